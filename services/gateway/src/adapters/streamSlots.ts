/**
 * Open streams per account, across every gateway replica: a sorted set per account in Redis whose
 * members are stream ids scored by the time their lease runs out. A gateway renews its streams'
 * leases on every heartbeat, so a replica that dies frees its slots within one lease.
 */
import type { RedisClient } from '@sts/common';

/** KEYS[1] the account's set; ARGV: now ms, lease end ms, limit, stream id. 1 taken, 0 full. */
const TAKE = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) - tonumber(ARGV[1]))
return 1`;

type WithTake = RedisClient & {
  stsStreamTake(key: string, now: number, until: number, limit: number, id: string): Promise<number>;
};

const streamSlotsKey = (accountId: string) => `streams:{${accountId}}`;

export interface StreamSlots {
  /** true when the account had a free slot (now taken by `streamId`) */
  take(accountId: string, streamId: string, limit: number): Promise<boolean>;
  /** extends the leases of these streams */
  renew(streams: readonly { accountId: string; streamId: string }[]): Promise<void>;
  release(accountId: string, streamId: string): Promise<void>;
}

export function createStreamSlots(redis: RedisClient, leaseMs: number, now: () => number = Date.now): StreamSlots {
  const r = redis as WithTake;
  if (typeof r.stsStreamTake !== 'function') redis.defineCommand('stsStreamTake', { numberOfKeys: 1, lua: TAKE });
  return {
    async take(accountId, streamId, limit) {
      const t = now();
      return (await r.stsStreamTake(streamSlotsKey(accountId), t, t + leaseMs, limit, streamId)) === 1;
    },
    async renew(streams) {
      if (streams.length === 0) return;
      const until = now() + leaseMs;
      // one command per stream (a cluster pipeline routes each to its slot)
      const p = redis.pipeline();
      for (const s of streams) {
        p.zadd(streamSlotsKey(s.accountId), 'XX', until, s.streamId);
        p.pexpire(streamSlotsKey(s.accountId), leaseMs);
      }
      await p.exec();
    },
    async release(accountId, streamId) {
      await redis.zrem(streamSlotsKey(accountId), streamId);
    },
  };
}
