/**
 * A monitor as the webhook dispatcher delivers its events: the monitor, its account's plan and its
 * webhook endpoint, read for many monitors in one statement. The statement runs on the client's
 * node-postgres pool (`sqlPool`), not through Prisma: it is on every delivery's path, and Prisma's
 * query compiler and plan interpreter are a measurable share of the dispatcher's CPU per delivery
 * (the dispatcher's README, "CPU per delivery").
 */
import type { PlanName } from '@sts/core';
import type { WebhookKind, WebhookOrdering, WebhookRetryPolicy } from './generated/prisma/client';

export interface MonitorContext {
  id: string;
  accountId: string;
  targetUsername: string;
  keywords: string[];
  isActive: boolean;
  plan: PlanName;
  trialEndsAt: Date | null;
  webhook: {
    id: string;
    url: string;
    kind: WebhookKind;
    secretCiphertext: string;
    /** an overlapped rotation: the old secret, in force for X-Service-Signature until `previousSecretUntil` */
    previousSecretCiphertext: string | null;
    previousSecretUntil: Date | null;
    isBroken: boolean;
    brokenReason: string | null;
    /** endpoint health (the dispatcher's domain/health.ts) */
    consecutiveFailures: number;
    firstFailureAt: Date | null;
    disabledAt: Date | null;
    /** the delivery rules (the dispatcher's domain/retrySchedule.ts; fifo: one delivery at a time, in order) */
    retryPolicy: WebhookRetryPolicy;
    ordering: WebhookOrdering;
    /** events held while it was disabled and not yet sent (the dispatcher's domain/hold.ts) */
    heldCount: number;
  } | null;
}

/** The contexts of the monitors whose ids are `$1` (a uuid array); a monitor without a webhook has null webhook columns. */
export const MONITOR_CONTEXT_SQL = `
  SELECT m.id, m.account_id, m.target_username, m.keywords, m.is_active, a.plan, a.trial_ends_at,
         w.id AS webhook_id, w.url AS webhook_url, w.kind::text AS webhook_kind,
         w.secret_ciphertext, w.previous_secret_ciphertext, w.previous_secret_until, w.is_broken, w.broken_reason,
         w.consecutive_failures, w.first_failure_at, w.disabled_at, w.held_count,
         w.retry_policy::text AS retry_policy, w.ordering::text AS ordering
  FROM monitors m
  JOIN accounts a ON a.id = m.account_id
  LEFT JOIN webhook_endpoints w ON w.monitor_id = m.id
  WHERE m.id = ANY($1::uuid[])`;

/** A row of MONITOR_CONTEXT_SQL. */
export interface MonitorContextRow {
  id: string;
  account_id: string;
  target_username: string;
  keywords: string[];
  is_active: boolean;
  plan: PlanName;
  trial_ends_at: Date | string | null;
  webhook_id: string | null;
  webhook_url: string | null;
  webhook_kind: WebhookKind | null;
  secret_ciphertext: string | null;
  previous_secret_ciphertext: string | null;
  previous_secret_until: Date | string | null;
  is_broken: boolean | null;
  broken_reason: string | null;
  consecutive_failures: number | null;
  first_failure_at: Date | string | null;
  disabled_at: Date | string | null;
  retry_policy: WebhookRetryPolicy | null;
  ordering: WebhookOrdering | null;
  held_count: number | null;
}

/** A timestamp column as node-postgres returns it (a Date, or text where a type parser is off). */
export const dateOrNull = (d: Date | string | null): Date | null => (d === null ? null : new Date(d));

/** A MONITOR_CONTEXT_SQL row as its MonitorContext (the webhook's columns are all set when its id is). */
export function monitorContextOf(r: MonitorContextRow): MonitorContext {
  return {
    id: r.id,
    accountId: r.account_id,
    targetUsername: r.target_username,
    keywords: r.keywords,
    isActive: r.is_active,
    plan: r.plan,
    trialEndsAt: dateOrNull(r.trial_ends_at),
    webhook:
      r.webhook_id === null
        ? null
        : {
            id: r.webhook_id,
            url: r.webhook_url!,
            kind: r.webhook_kind!,
            secretCiphertext: r.secret_ciphertext!,
            previousSecretCiphertext: r.previous_secret_ciphertext,
            previousSecretUntil: dateOrNull(r.previous_secret_until),
            isBroken: r.is_broken!,
            brokenReason: r.broken_reason,
            consecutiveFailures: r.consecutive_failures!,
            firstFailureAt: dateOrNull(r.first_failure_at),
            disabledAt: dateOrNull(r.disabled_at),
            retryPolicy: r.retry_policy!,
            ordering: r.ordering!,
            heldCount: r.held_count!,
          },
  };
}
