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
