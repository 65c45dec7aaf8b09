/**
 * The per-account bound of outbound actions (Test webhook and Redeliver): a fixed one-minute
 * window per account in Redis (INCR, then PEXPIRE on the first hit), shared by every dashboard
 * replica and the admin CLI. Default 10 a minute (OUTBOUND_TEST_MAX_PER_MIN).
 */
import type { RedisClient } from '@sts/common';

export const OUTBOUND_WINDOW_MS = 60_000;

export function outboundLimiter(
  redis: RedisClient,
  perMinute: number,
  windowMs = OUTBOUND_WINDOW_MS,
): (accountId: string) => Promise<number | null> {
  return async (accountId) => {
    const key = `usecases:outbound:${accountId}`;
    const count = await redis.incr(key);
    if (count === 1) await redis.pexpire(key, windowMs);
    if (count <= perMinute) return null;
    const ttl = await redis.pttl(key);
    if (ttl < 0) await redis.pexpire(key, windowMs);
    return Math.max(1, Math.ceil((ttl > 0 ? ttl : windowMs) / 1000));
  };
}

/**
 * The monitor preview's bound of upstream reads per account (PREVIEW_MAX_PER_MIN a minute and
 * PREVIEW_MAX_PER_DAY a day, fixed windows in Redis): null when allowed, or the seconds to wait.
 */
export function previewLimiter(
  redis: RedisClient,
  perMinute: number,
  perDay: number,
): (accountId: string) => Promise<number | null> {
  const minute = outboundLimiter(redis, perMinute, 60_000);
  const day = outboundLimiter(redis, perDay, 86_400_000);
  return async (accountId) => (await minute(`preview-min:${accountId}`)) ?? (await day(`preview-day:${accountId}`));
}

/**
 * Recover's per-account budget of redeliveries: `perHour` in a fixed one-hour window in Redis
 * (INCRBY what is wanted, then give back what is over), shared by every dashboard replica.
 */
export function redeliveryBudget(
  redis: RedisClient,
  perHour: number,
): (accountId: string, wanted: number) => Promise<{ granted: number; retryAfterSec: number }> {
  const windowMs = 3_600_000;
  return async (accountId, wanted) => {
    const key = `usecases:redeliveries:${accountId}`;
    const used = await redis.incrby(key, wanted);
    if (used === wanted) await redis.pexpire(key, windowMs);
    const over = Math.min(wanted, Math.max(0, used - perHour));
    if (over > 0) await redis.decrby(key, over);
    const ttl = await redis.pttl(key);
    if (ttl < 0) await redis.pexpire(key, windowMs);
    return { granted: wanted - over, retryAfterSec: Math.max(1, Math.ceil((ttl > 0 ? ttl : windowMs) / 1000)) };
  };
}
