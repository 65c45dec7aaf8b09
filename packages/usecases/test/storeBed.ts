/**
 * What the use-cases' tests on the real store (monitors.test.ts, rules.test.ts,
 * queryMonitors.test.ts) share: a test database and a Redis prefix with a client on it, opened
 * once per file (`close()` disconnects both, removes the prefix's keys and drops the database);
 * the preview's cache on that client; and `rejection()`, the error a call is refused with.
 */
import { Redis } from 'ioredis';
import { createDbClient, type Db } from '@sts/db';
import { createTestDatabase, createTestRedis } from '@sts/testing';
import type { PreviewOptions } from '../src/index';

export interface StoreBed {
  db: Db;
  redis: Redis;
  /** the preview's cache, on `redis` */
  cache: NonNullable<PreviewOptions['cache']>;
  close(): Promise<void>;
}

export async function openStoreBed(opts: { poolSize: number }): Promise<StoreBed> {
  const handle = await createTestDatabase();
  const db = createDbClient({ url: handle.url, poolSize: opts.poolSize });
  const redisHandle = createTestRedis();
  const redis = new Redis(redisHandle.url, { keyPrefix: redisHandle.prefix });
  return {
    db,
    redis,
    cache: {
      get: (k) => redis.get(k),
      set: async (k, v, ttl) => void (await redis.set(k, v, 'EX', ttl)),
    },
    async close() {
      redis.disconnect();
      await redisHandle.cleanup();
      await db.$disconnect();
      await handle.drop();
    },
  };
}

/** the error `p` rejects with (it must reject) */
export async function rejection(p: Promise<unknown>): Promise<Error & Record<string, unknown>> {
  try {
    await p;
  } catch (err) {
    return err as Error & Record<string, unknown>;
  }
  throw new Error('expected a rejection');
}
