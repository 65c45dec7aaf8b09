/**
 * Redis leases: one replica polls a target at a time. SET NX PX takes the lease; release deletes
 * it only when it is still ours (compare-and-delete in Lua). A replica that dies leaves its lease
 * to expire after the poll timeout. No home-made consensus: Redis is the single arbiter.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';

const RELEASE = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`;

export interface LeaseStore {
  acquire(target: string, ttlMs: number): Promise<string | null>;
  release(target: string, token: string): Promise<void>;
}

export function createRedisLeases(redis: Redis): LeaseStore {
  return {
    async acquire(target, ttlMs) {
      const token = randomUUID();
      const ok = await redis.set(`poll:lease:${target}`, token, 'PX', ttlMs, 'NX');
      return ok === 'OK' ? token : null;
    },
    async release(target, token) {
      await redis.eval(RELEASE, 1, `poll:lease:${target}`, token);
    },
  };
}
