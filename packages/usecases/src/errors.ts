/**
 * The errors a use-case throws on purpose. Each has a stable `code` (for the dashboard's status
 * and the CLI's exit code) and, where one input is at fault, the `field` it names, so a form can
 * show the problem next to that field. `message` is a sentence a person reads; for field errors
 * it does not repeat the field's name (e.g. "must use https (got http)").
 * Anything else a use-case throws is a bug or an outage (a 500 / exit 1).
 */
export type UseCaseErrorCode =
  | 'invalid_input'
  | 'not_found'
  | 'conflict'
  | 'plan_limit'
  | 'invalid_credentials'
  | 'not_configured'
  | 'unavailable'
  | 'rate_limited'
  | 'unverified';

export abstract class UseCaseError extends Error {
  abstract readonly code: UseCaseErrorCode;
  /** the input at fault: 'email', 'password', 'target', 'keywords', 'intervalSec', 'webhookUrl', 'cursor', ... */
  readonly field: string | undefined;
  constructor(message: string, field?: string) {
    super(message);
    this.field = field;
  }
}

/** Bad input: nothing was saved. `field` names the input. */
export class ValidationError extends UseCaseError {
  override name = 'ValidationError';
  readonly code = 'invalid_input' as const;
  declare readonly field: string;
  constructor(field: string, message: string) {
    super(message, field);
  }
}

/** No such thing in this account (another account's ids are NotFound too). `field` is the kind. */
export class NotFoundError extends UseCaseError {
  override name = 'NotFoundError';
  readonly code = 'not_found' as const;
  /** 'account' | 'monitor' | 'apiKey' | 'delivery' | 'webhook' */
  readonly kind: string;
  constructor(kind: string, message: string) {
    super(message, kind);
    this.kind = kind;
  }
}

/** The request clashes with what exists: duplicate email, trial already used, no webhook yet. */
export class ConflictError extends UseCaseError {
  override name = 'ConflictError';
  readonly code = 'conflict' as const;
  /** finer reason: 'email_taken' | 'trial_used' | 'no_webhook' | 'hit_gone' */
  readonly reason: string;
  constructor(reason: string, message: string, field?: string) {
    super(message, field);
    this.reason = reason;
  }
}

/** The account's plan does not allow it; the message names the limit and the upgrade path. */
export class PlanLimitError extends UseCaseError {
  override name = 'PlanLimitError';
  readonly code = 'plan_limit' as const;
  constructor(
    message: string,
    readonly limit: number,
    readonly plan: 'free' | 'starter',
    field?: string,
  ) {
    super(message, field);
  }
}

/** Wrong email or password (the message never says which). */
export class InvalidCredentialsError extends UseCaseError {
  override name = 'InvalidCredentialsError';
  readonly code = 'invalid_credentials' as const;
  constructor() {
    super('wrong email or password');
  }
}

/** A needed setting is missing or wrong (e.g. SECRETS_ENCRYPTION_KEY, no publisher). */
export class NotConfiguredError extends UseCaseError {
  override name = 'NotConfiguredError';
  readonly code = 'not_configured' as const;
}

/** A dependency outside the database did not answer (RabbitMQ for test pings / redeliveries). */
export class UnavailableError extends UseCaseError {
  override name = 'UnavailableError';
  readonly code = 'unavailable' as const;
}

/** Too many of an outbound action (Test webhook, Redeliver) for the account; try again after `retryAfterSec`. */
export class RateLimitedError extends UseCaseError {
  override name = 'RateLimitedError';
  readonly code = 'rate_limited' as const;
  constructor(
    message: string,
    readonly retryAfterSec: number,
  ) {
    super(message);
  }
}

/** The account's email address is not verified yet: keys, webhooks and the trial wait for it. */
export class UnverifiedError extends UseCaseError {
  override name = 'UnverifiedError';
  readonly code = 'unverified' as const;
}

/** The HTTP status a web front end answers with for a use-case error. */
export function httpStatusOf(err: UseCaseError): number {
  switch (err.code) {
    case 'invalid_input':
      return 422;
    case 'not_found':
      return 404;
    case 'conflict':
      return 409;
    case 'plan_limit':
      return 403;
    case 'invalid_credentials':
      return 401;
    case 'not_configured':
    case 'unavailable':
      return 503;
    case 'rate_limited':
      return 429;
    case 'unverified':
      return 403;
  }
}
