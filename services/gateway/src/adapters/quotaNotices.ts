/**
 * Quota thresholds: after each usage write-through, the accounts whose calls this
 * month reached 80 % or 100 % of their plan's quota get an `account.quota.threshold` event in
 * `account_events` (the dashboard relays it to RabbitMQ and mails it). The event's key
 * `quota:<account>:<month>:<threshold>` is the table's primary key, so each threshold is written
 * once per account and month however many gateways see it, and it survives restarts.
 * Each round reads only this month's rows changed since its previous round (less a margin for a
 * write-through that committed late), through the index usage_monthly(period, updated_at): a
 * round costs the accounts active right now, never a scan of the table. The first round looks a
 * minute back.
 */
import { usagePeriod, type Plans } from '@sts/core';
import type { Db } from '@sts/db';

/** how far before the previous round a round looks (a write-through's updated_at is its transaction's start) */
export const QUOTA_NOTICE_MARGIN_MS = 30_000;

export function createQuotaNotices(db: Db, plans: Plans, now: () => Date = () => new Date()): () => Promise<number> {
  let previous: Date | null = null;
  return async () => {
    const at = now();
    const since = previous ? new Date(previous.getTime() - QUOTA_NOTICE_MARGIN_MS) : new Date(at.getTime() - 60_000);
    const period = usagePeriod(at);
    const occurredAt = at.toISOString();
    const written = await db.$executeRaw`
      INSERT INTO account_events (dedup_key, routing_key, account_id, payload)
      SELECT 'quota:' || q.account_id || ':' || q.period || ':' || t.threshold, 'account.quota.threshold', q.account_id,
        jsonb_build_object('accountId', q.account_id::text, 'occurredAt', ${occurredAt}::text, 'month', q.period,
          'threshold', t.threshold, 'used', q.used, 'quota', q.quota)
      FROM (
        SELECT u.account_id, u.period, u.used,
          CASE WHEN a.plan = 'starter' OR a.trial_ends_at > ${at} THEN ${plans.starter.monthlyQuota}::int
               ELSE ${plans.free.monthlyQuota}::int END AS quota
        FROM usage_monthly u JOIN accounts a ON a.id = u.account_id
        WHERE u.period = ${period} AND u.updated_at > ${since}
      ) q
      CROSS JOIN (VALUES (80), (100)) AS t(threshold)
      WHERE q.used::bigint * 100 >= q.quota::bigint * t.threshold
      ON CONFLICT (dedup_key) DO NOTHING`;
    previous = at;
    return written;
  };
}
