/**
 * Redis leases: one replica polls a target at a time. SET NX PX takes the lease; release deletes
 * it only when it is still ours (compare-and-delete in Lua). A replica that dies leaves its lease
 * to expire after the poll timeout. No home-made consensus: Redis is the single arbiter.
 *
 * Redis Cluster (REDIS_MODE=cluster): every command here touches one key, `poll:lease:<target>`,
 * so the leases spread over the cluster's slots with no hash tag, and the name is the one earlier
 * versions used (a rename would let an old and a new replica poll one target at once during an
 * upgrade). A script that ever uses a second key of a target must tag both: `{<target>}`.
 */
import { randomUUID } from 'node:crypto';
import type { RedisClient } from '@sts/common';

const RELEASE = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`;

export interface LeaseStore {
  acquire(target: string, ttlMs: number): Promise<string | null>;
  release(target: string, token: string): Promise<void>;
}

/** the Redis key of a target's lease (after REDIS_KEY_PREFIX) */
export const leaseKey = (target: string): string => `poll:lease:${target}`;

export function createRedisLeases(redis: RedisClient): LeaseStore {
  return {
    async acquire(target, ttlMs) {
      const token = randomUUID();
      const ok = await redis.set(leaseKey(target), token, 'PX', ttlMs, 'NX');
      return ok === 'OK' ? token : null;
    },
    async release(target, token) {
      await redis.eval(RELEASE, 1, leaseKey(target), token);
    },
  };
}
