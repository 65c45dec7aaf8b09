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
  /**
   * counts one attempt for the client address, for the email from this address, and for the
   * email from anywhere; throws ThrottledError over any of the three limits
   */
  attempt(email: string, address: string): Promise<void>;
  /** a successful sign-in clears the email's count from this address (the others keep theirs) */
  succeeded(email: string, address: string): Promise<void>;
}

/**
 * Fixed-window counters in Redis (rate-limiter-flexible: one atomic INCR+EXPIRE per key), so
 * every dashboard replica shares them. Emails are hashed in the key (no addresses of people in
 * Redis key names).
 *
 * Three counters, so that failures from one place do not lock the owner out:
 * - per client address (`perAddress` in `windowSec`): one machine cannot spray many accounts;
 * - per email AND client address (`perEmail` in `windowSec`): one machine cannot guess one
 *   account's password, and its failures do not touch the owner signing in from elsewhere;
 * - per email from anywhere (`perEmailHourly` an hour): guesses against one account stay bounded
 *   however many addresses an attacker has. Only past that bound (100 by default) is the owner
 *   refused too, for the rest of the hour: the bound on guesses wins over convenience.
 */
export function createSignInThrottle(opts: {
  redis: RedisClient;
  perEmail: number;
  perAddress: number;
  windowSec: number;
  perEmailHourly: number;
}): SignInThrottle {
  const limiter = (keyPrefix: string, points: number, duration: number) =>
    new RateLimiterRedis({ storeClient: opts.redis, keyPrefix, points, duration });
  const byAddress = limiter('dashboard:signin:addr', opts.perAddress, opts.windowSec);
  const byPair = limiter('dashboard:signin:pair', opts.perEmail, opts.windowSec);
  const byEmail = limiter('dashboard:signin:email', opts.perEmailHourly, 3600);
  const emailKey = (email: string) =>
    createHash('sha256').update(email.trim().normalize('NFC').toLowerCase()).digest('hex').slice(0, 32);
  const pairKey = (email: string, address: string) => `${emailKey(email)}:${address}`;
  const consume = async (l: RateLimiterRedis, key: string) => {
    try {
      await l.consume(key);
    } catch (err) {
      if (err instanceof RateLimiterRes) throw new ThrottledError(Math.max(1, Math.ceil(err.msBeforeNext / 1000)));
      throw err;
    }
  };
  return {
    async attempt(email, address) {
      await consume(byAddress, address);
      if (!email) return;
      await consume(byPair, pairKey(email, address));
      await consume(byEmail, emailKey(email));
    },
    async succeeded(email, address) {
      await byPair.delete(pairKey(email, address));
      // the owner's own attempt does not count towards the bound on guesses
      await byEmail.reward(emailKey(email), 1);
    },
  };
}
