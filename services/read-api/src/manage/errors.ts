/**
 * The use-cases' errors (@sts/usecases) in the API's envelope: the same rule answers the same way
 * in the dashboard, the CLI and here, with the API's status, code and the body field at fault
 * (`param`, in the API's snake_case names).
 */
import { ApiError, InvalidRequestError, NotFoundError, ServiceUnavailableError } from '@sts/common';
import {
  ConflictError,
  NotConfiguredError,
  NotFoundError as UseCaseNotFound,
  PlanLimitError,
  RateLimitedError,
  UnavailableError,
  UnverifiedError,
  ValidationError,
} from '@sts/usecases';

/** use-case field → the API's name for it */
const PARAM: Readonly<Record<string, string>> = {
  target: 'target_username',
  intervalSec: 'check_interval_sec',
  webhookUrl: 'webhook_url',
  exclude: 'filters.exclude',
  lang: 'filters.lang',
  failedSince: 'since',
  overlapSec: 'overlap_sec',
  retryPolicy: 'retry_policy',
};

/** `urlParam`: the name of the webhook URL in this endpoint's body (`webhook_url` or `url`) */
export function fromUseCaseError(err: unknown, urlParam = 'webhook_url'): unknown {
  if (err instanceof ValidationError) {
    const param = err.field === 'webhookUrl' ? urlParam : (PARAM[err.field] ?? err.field);
    // "must …" / "is …" read as a sentence after the name; anything else follows a colon
    return new InvalidRequestError(`${param}${/^(must|is) /.test(err.message) ? ' ' : ': '}${err.message}`, param);
  }
  if (err instanceof UseCaseNotFound) {
    const what = err.kind === 'delivery' ? 'delivery attempt' : err.kind;
    return new NotFoundError('NOT_FOUND', `${what} not found`);
  }
  if (err instanceof PlanLimitError)
    return new ApiError(403, 'PLAN_LIMIT', err.message, { limit: err.limit, plan: err.plan });
  if (err instanceof ConflictError) {
    const code = err.reason === 'no_webhook' ? 'NO_WEBHOOK' : 'HIT_GONE';
    return new ApiError(409, code, err.message);
  }
  if (err instanceof RateLimitedError)
    return new ApiError(
      429,
      'RATE_LIMIT_EXCEEDED',
      err.message,
      { retry_after: err.retryAfterSec },
      { 'Retry-After': String(err.retryAfterSec) },
    );
  if (err instanceof UnverifiedError) return new ApiError(403, 'EMAIL_UNVERIFIED', err.message);
  if (err instanceof NotConfiguredError || err instanceof UnavailableError)
    return new ServiceUnavailableError(err.message, 1);
  return err;
}
