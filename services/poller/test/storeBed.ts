/**
 * What the poller's tests on the real store run on: a test database and a Redis prefix with a
 * client on it (the fleet's governor, leases and user cache), opened once per file; `close()`
 * disconnects both, removes the prefix's keys and drops the database.
 */
import { Redis } from 'ioredis';
import { createDbClient, type Db } from '@sts/db';
import { createTestDatabase, createTestRedis } from '@sts/testing';

export interface StoreBed {
  db: Db;
  /** the database's URLs (a spawned service's DATABASE_URL; LISTEN and the outbox relay's session) */
  dbUrl: string;
  dbDirectUrl: string;
  /** a client on the prefix (its keys are the prefix's) */
  redis: Redis;
  /** the Redis prefix's handle: `cleanup()` removes this bed's keys only */
  redisHandle: ReturnType<typeof createTestRedis>;
  close(): Promise<void>;
}

export async function openStoreBed(opts: { poolSize: number }): Promise<StoreBed> {
  const dbHandle = await createTestDatabase();
  const db = createDbClient({ url: dbHandle.url, poolSize: opts.poolSize });
  const redisHandle = createTestRedis();
  const redis = new Redis(redisHandle.url, { keyPrefix: redisHandle.prefix });
  return {
    db,
    dbUrl: dbHandle.url,
    dbDirectUrl: dbHandle.directUrl,
    redis,
    redisHandle,
    async close() {
      redis.disconnect();
      await redisHandle.cleanup();
      await db.$disconnect();
      await dbHandle.drop();
    },
  };
}
