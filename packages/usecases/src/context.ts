/** What every use-case module shares: the options, resolved, and small helpers. */
import { randomUUID } from 'node:crypto';
import { effectivePlan, isUuid, type PlanName, type SecretBox } from '@sts/core';
import { Prisma, type Db } from '@sts/db';
import {
  NotConfiguredError,
  NotFoundError,
  RateLimitedError,
  UnavailableError,
  UnverifiedError,
  ValidationError,
} from './errors';
import { DEFAULT_SCRYPT, type ScryptParams } from './password';
import type { AccountView, PublishedKey, Publisher, UseCaseOptions } from './types';
import type { HeadersOf, PayloadOf } from '@sts/messaging';

export interface Ctx {
  db: Db;
  opts: UseCaseOptions;
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

export function createCtx(opts: UseCaseOptions): Ctx {
  const now = opts.now ?? (() => new Date());
  const outboundAllowed = async (accountId: string, what: string) => {
    const wait = opts.outboundLimit ? await opts.outboundLimit(accountId) : null;
    if (wait !== null) {
      throw new RateLimitedError(`too many ${what} and redeliveries for this account; try again in ${wait} s`, wait);
    }
  };
  return {
    db: opts.db,
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

export const accountSelect = {
  id: true,
  email: true,
  plan: true,
  trialStartedAt: true,
  trialEndsAt: true,
  passwordHash: true,
  createdAt: true,
  emailVerifiedAt: true,
  notifyQuota: true,
  notifyWebhook: true,
  notifyTrial: true,
} as const;

export type AccountRow = Prisma.AccountGetPayload<{ select: typeof accountSelect }>;

export function toAccountView(a: AccountRow, now: Date): AccountView {
  return {
    id: a.id,
    email: a.email,
    plan: a.plan,
    effectivePlan: effectivePlan(a, now),
    trialStartedAt: a.trialStartedAt,
    trialEndsAt: a.trialEndsAt,
    hasPassword: a.passwordHash !== null,
    createdAt: a.createdAt,
    emailVerifiedAt: a.emailVerifiedAt,
    notifications: { quota: a.notifyQuota, webhook: a.notifyWebhook, trial: a.notifyTrial },
  };
}

export async function loadAccount(ctx: Ctx, accountId: string): Promise<AccountRow> {
  const message = `no account with id ${accountId}`;
  const id = idOrNotFound(accountId, 'account', message);
  const a = await ctx.db.account.findUnique({ where: { id }, select: accountSelect });
  if (!a) throw new NotFoundError('account', message);
  return a;
}

export function planOf(ctx: Ctx, a: { plan: PlanName; trialEndsAt: Date | null }): PlanName {
  return effectivePlan(a, ctx.now());
}

export const PLAN_LABEL: Record<PlanName, string> = { free: 'Free', starter: 'Starter' };

export function isUniqueViolation(err: unknown): boolean {
  return err instanceof Prisma.PrismaClientKnownRequestError && err.code === 'P2002';
}

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
 * The key of an address for once-per-address rules (the Starter trial): NFKC (so full-width and
 * other compatibility forms fold to their plain letters), trimmed, lower-cased.
 */
export function emailKey(email: string): string {
  return email.normalize('NFKC').trim().toLowerCase();
}
