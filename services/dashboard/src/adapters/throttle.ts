import { createHash } from 'node:crypto';
import type { RedisClient } from '@sts/common';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';

export class ThrottledError extends Error {
  override name = 'ThrottledError';
  constructor(readonly retryAfterSec: number) {
    super(`Too many sign-in attempts. Try again in ${retryAfterSec} s.`);
  }
}

export interface SignInThrottle {
  /** counts one attempt for the email and the address; throws ThrottledError over either limit */
  attempt(email: string, address: string): Promise<void>;
  /** a successful sign-in clears the email's count (the address keeps its count) */
  succeeded(email: string): Promise<void>;
}

/**
 * Fixed-window counters in Redis (rate-limiter-flexible: one atomic INCR+EXPIRE per key), so
 * every dashboard replica shares them. Emails are hashed in the key (no addresses of people in
 * Redis key names).
 */
export function createSignInThrottle(opts: {
  redis: RedisClient;
  perEmail: number;
  perAddress: number;
  windowSec: number;
}): SignInThrottle {
  const byEmail = new RateLimiterRedis({
    storeClient: opts.redis,
    keyPrefix: 'dashboard:signin:email',
    points: opts.perEmail,
    duration: opts.windowSec,
  });
  const byAddress = new RateLimiterRedis({
    storeClient: opts.redis,
    keyPrefix: 'dashboard:signin:addr',
    points: opts.perAddress,
    duration: opts.windowSec,
  });
  const emailKey = (email: string) =>
    createHash('sha256').update(email.trim().toLowerCase()).digest('hex').slice(0, 32);
  const consume = async (limiter: RateLimiterRedis, key: string) => {
    try {
      await limiter.consume(key);
    } catch (err) {
      if (err instanceof RateLimiterRes) throw new ThrottledError(Math.max(1, Math.ceil(err.msBeforeNext / 1000)));
      throw err;
    }
  };
  return {
    async attempt(email, address) {
      await consume(byAddress, address);
      if (email) await consume(byEmail, emailKey(email));
    },
    async succeeded(email) {
      await byEmail.delete(emailKey(email));
    },
  };
}
