import { createHash } from 'node:crypto';
import type { RedisClient } from '@sts/common';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import { addressBlock } from '../domain/addressBlock';

export class ThrottledError extends Error {
  override name = 'ThrottledError';
  constructor(readonly retryAfterSec: number) {
    super(`Too many sign-in attempts. Try again in ${retryAfterSec} s.`);
  }
}

export interface SignInThrottle {
  /**
   * counts one password check (sign-in, change of password) of `email` from the client `address`;
   * throws ThrottledError, before any password is hashed, when it is refused
   */
  attempt(email: string, address: string): Promise<void>;
  /** a correct password clears the email's count from this address block (the others keep theirs) */
  succeeded(email: string, address: string): Promise<void>;
}

/**
 * Fixed-window counters in Redis (rate-limiter-flexible: one atomic INCR+EXPIRE per key), so
 * every dashboard replica shares them. Emails are hashed in the key (no addresses of people in
 * Redis key names). Addresses count by block (/24 IPv4, /64 IPv6: domain/addressBlock.ts).
 *
 * Three counters, so that failures from one place never lock the owner out:
 * - per address block (`perAddress` in `windowSec`): one network cannot spray many accounts;
 * - per email AND address block (`perEmail` in `windowSec`): one network cannot guess one
 *   account's password, and its failures do not touch the owner signing in from elsewhere;
 * - per email from anywhere (`perEmailHourly` an hour): past it, only blocks that have not tried
 *   this email in the window get a check (one each; a failure closes the block for the window).
 *   Invariant: a correct password from a block that has not failed for the email always gets in,
 *   and distributed guessing past the bound costs the attacker one address block per guess.
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
  const byBlock = limiter('dashboard:signin:block', opts.perAddress, opts.windowSec);
  const byPair = limiter('dashboard:signin:pairblock', opts.perEmail, opts.windowSec);
  const byEmail = limiter('dashboard:signin:email', opts.perEmailHourly, 3600);
  const emailKey = (email: string) =>
    createHash('sha256').update(email.trim().normalize('NFC').toLowerCase()).digest('hex').slice(0, 32);
  const pairKey = (email: string, address: string) => `${emailKey(email)}:${addressBlock(address)}`;
  const throttled = (res: RateLimiterRes) => new ThrottledError(Math.max(1, Math.ceil(res.msBeforeNext / 1000)));
  /** the counter after this attempt; `over` when it passed the limit */
  const count = async (l: RateLimiterRedis, key: string): Promise<{ res: RateLimiterRes; over: boolean }> => {
    try {
      return { res: await l.consume(key), over: false };
    } catch (err) {
      if (err instanceof RateLimiterRes) return { res: err, over: true };
      throw err;
    }
  };
  return {
    async attempt(email, address) {
      const block = await count(byBlock, addressBlock(address));
      if (block.over) throw throttled(block.res);
      if (!email) return;
      const pair = await count(byPair, pairKey(email, address));
      if (pair.over) throw throttled(pair.res);
      const hourly = await count(byEmail, emailKey(email));
      // a block's first attempt in the window is checked whatever the hourly count
      if (hourly.over && pair.res.consumedPoints > 1) throw throttled(hourly.res);
    },
    async succeeded(email, address) {
      await byPair.delete(pairKey(email, address));
      // the owner's own attempt does not count towards the bound on guesses
      await byEmail.reward(emailKey(email), 1);
    },
  };
}
