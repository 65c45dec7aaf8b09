import type { RedisClient } from '@sts/common';

/**
 * connect-redis (v8+) speaks the node-redis client API; the project's Redis client is ioredis.
 * These are the four calls its get/set/touch/destroy make, mapped onto ioredis (the bulk calls
 * — all/clear/length — are not used by express-session and are not mapped).
 */
export function connectRedisClient(redis: RedisClient) {
  return {
    get: (key: string) => redis.get(key),
    set: (key: string, value: string, opts?: { expiration?: { type: 'EX'; value: number } }) =>
      opts?.expiration ? redis.set(key, value, 'EX', opts.expiration.value) : redis.set(key, value),
    expire: (key: string, seconds: number) => redis.expire(key, seconds),
    del: (keys: string[] | string) => redis.del(...(Array.isArray(keys) ? keys : [keys])),
  };
}
