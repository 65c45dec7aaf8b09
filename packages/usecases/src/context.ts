/** What every use-case module shares: the options, resolved, and small helpers. */
import { randomUUID } from 'node:crypto';
import { effectivePlan, isUuid, type PlanName, type SecretBox } from '@sts/core';
import {
  NotConfiguredError,
  NotFoundError,
  RateLimitedError,
  UnavailableError,
  UnverifiedError,
  ValidationError,
} from './errors';
import { DEFAULT_SCRYPT, type ScryptParams } from './password';
import type { Repositories } from './repositories';
import type { AccountChange, AccountRecord } from './repositories/accounts';
import type { AccountView, PublishedKey, Publisher, UseCaseOptions } from './types';
import type { HeadersOf, PayloadOf } from '@sts/messaging';

/** the options without the database: the use-cases reach it through `repos` */
type Settings = Omit<UseCaseOptions, 'db'>;

export interface Ctx {
  repos: Repositories;
  opts: Settings;
  now(): Date;
  trialDays: number;
  scrypt: ScryptParams;
  secretBox(): SecretBox;
  /**
   * Publishes one message; `limited` (default true) counts it against the account's outbound
   * bound first (a recovery counts once for all it queues: `outboundAllowed`).
   */
  publish<K extends PublishedKey>(
    routingKey: K,
    payload: PayloadOf<K>,
    headers: HeadersOf<K>,
    opts?: { limited?: boolean },
  ): Promise<string>;
  /** one outbound action of the account: throws RateLimitedError when its bound is used up */
  outboundAllowed(accountId: string, what: string): Promise<void>;
}

export function createCtx(opts: Settings, repos: Repositories): Ctx {
  const now = opts.now ?? (() => new Date());
  const outboundAllowed = async (accountId: string, what: string) => {
    const wait = opts.outboundLimit ? await opts.outboundLimit(accountId) : null;
    if (wait !== null) {
      throw new RateLimitedError(`too many ${what} and redeliveries for this account; try again in ${wait} s`, wait);
    }
  };
  return {
    repos,
    opts,
    now,
    trialDays: opts.trialDays ?? 30,
    scrypt: opts.scrypt ?? DEFAULT_SCRYPT,
    secretBox() {
      const box = typeof opts.secretBox === 'function' ? opts.secretBox() : opts.secretBox;
      if (!box) throw new NotConfiguredError('webhook secrets cannot be stored: SECRETS_ENCRYPTION_KEY is not set');
      return box;
    },
    outboundAllowed,
    async publish(routingKey, payload, headers, publishOpts = {}) {
      const publisher: Publisher | undefined = opts.publisher;
      if (!publisher) throw new NotConfiguredError(`cannot send ${routingKey}: no message broker configured`);
      if (publishOpts.limited ?? true)
        await outboundAllowed(headers.accountId, routingKey === 'monitor.test' ? 'test pings' : 'redeliveries');
      const messageId = randomUUID();
      try {
        await publisher.publish(routingKey, payload, { messageId, headers });
      } catch (err) {
        throw new UnavailableError(
          `could not queue ${routingKey}: ${err instanceof Error ? err.message : String(err)}; try again`,
        );
      }
      return messageId;
    },
  };
}

/**
 * An id from a URL or a flag: anything that is not a UUID cannot exist, so it is NotFound (a
 * dashboard URL with garbage in it is a 404, like another account's id).
 */
export function idOrNotFound(id: string, kind: string, message: string): string {
  if (typeof id !== 'string' || !isUuid(id)) throw new NotFoundError(kind, message);
  return id.toLowerCase();
}

export function toAccountView(a: AccountRecord, now: Date): AccountView {
  return {
    id: a.id,
    email: a.email,
    plan: a.plan,
    effectivePlan: effectivePlan(a, now),
    planSince: a.planSince,
    trialStartedAt: a.trialStartedAt,
    trialEndsAt: a.trialEndsAt,
    hasPassword: a.passwordHash !== null,
    createdAt: a.createdAt,
    emailVerifiedAt: a.emailVerifiedAt,
    notifications: { quota: a.notifyQuota, webhook: a.notifyWebhook, trial: a.notifyTrial },
    sessionGeneration: a.sessionGeneration,
  };
}

export async function loadAccount(ctx: Ctx, accountId: string): Promise<AccountRecord> {
  const message = `no account with id ${accountId}`;
  const id = idOrNotFound(accountId, 'account', message);
  const a = await ctx.repos.accounts.findById(id);
  if (!a) throw new NotFoundError('account', message);
  return a;
}

/** A change to an account loaded just before: NotFound when it was deleted in between. */
export async function changeAccount(ctx: Ctx, id: string, change: AccountChange): Promise<void> {
  if (!(await ctx.repos.accounts.update(id, change))) throw new NotFoundError('account', `no account with id ${id}`);
}

export function planOf(ctx: Ctx, a: { plan: PlanName; trialEndsAt: Date | null }): PlanName {
  return effectivePlan(a, ctx.now());
}

export const PLAN_LABEL: Record<PlanName, string> = { free: 'Free', starter: 'Starter' };

const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,255}\.[^\s@]{2,63}$/;

/** Trimmed, NFC, lower-cased; ValidationError('email') when it is not an address. */
export function normaliseEmail(raw: unknown): string {
  if (typeof raw !== 'string' || raw.trim() === '') throw new ValidationError('email', 'is required');
  const email = raw.trim().normalize('NFC').toLowerCase();
  if (email.length > 254 || !EMAIL.test(email)) throw new ValidationError('email', 'is not an email address');
  return email;
}

/** With `requireVerifiedEmail` (the dashboard): UnverifiedError until the account's address is verified. */
export function requireVerified(ctx: Ctx, a: { emailVerifiedAt: Date | null }, what: string): void {
  if (ctx.opts.requireVerifiedEmail && !a.emailVerifiedAt) {
    throw new UnverifiedError(`verify your email address before you ${what}: follow the link we sent you`);
  }
}

/**
 * The key of an inbox for once-per-inbox rules (the Starter trial): NFKC (so full-width and
 * other compatibility forms fold to their plain letters), trimmed, lower-cased, and without a
 * `+tag` in the local part (`Ann+trial2@x` is Ann's inbox). Only for the rule: mail goes to the
 * address as the account has it.
 */
export function emailKey(email: string): string {
  const folded = email.normalize('NFKC').trim().toLowerCase();
  const at = folded.lastIndexOf('@');
  if (at < 0) return folded;
  const local = folded.slice(0, at);
  const plus = local.indexOf('+');
  return plus > 0 ? `${local.slice(0, plus)}${folded.slice(at)}` : folded;
}
