/**
 * The sessions of an account, so they can be ended together (password reset or change, "sign
 * out everywhere"): a Redis set `dashboard:acct-sess:<accountId>` of session ids next to the
 * sessions themselves (`<SESSION_KEY_PREFIX><sid>`). Ending deletes each session key (one key per
 * command, so a Redis Cluster needs no hash tags); ids whose session already expired are dropped.
 */
import type { RedisClient } from '@sts/common';

export interface AccountSessions {
  add(accountId: string, sid: string, maxAgeSec: number): Promise<void>;
  /** ends every session of the account but `keep`; returns how many were ended */
  endAll(accountId: string, keep?: string): Promise<number>;
}

export function createAccountSessions(redis: RedisClient, sessionPrefix: string): AccountSessions {
  const setKey = (accountId: string) => `dashboard:acct-sess:${accountId}`;
  return {
    async add(accountId, sid, maxAgeSec) {
      await redis.sadd(setKey(accountId), sid);
      await redis.expire(setKey(accountId), maxAgeSec);
    },
    async endAll(accountId, keep) {
      const sids = await redis.smembers(setKey(accountId));
      let ended = 0;
      for (const sid of sids) {
        if (sid === keep) continue;
        ended += await redis.del(`${sessionPrefix}${sid}`);
        await redis.srem(setKey(accountId), sid);
      }
      return ended;
    },
  };
}
