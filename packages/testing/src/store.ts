/**
 * A test's store: a database of its own with a client on it, and a Redis prefix of its own with a
 * client whose keys are the prefix's. `close()` disconnects both, removes the prefix's keys and
 * drops the database.
 */
import { Redis } from 'ioredis';
import { createDbClient, type Db } from '@sts/db';
import { createTestDatabase, createTestRedis } from './isolation';

export interface TestStore {
  db: Db;
  /** the database's URLs (a spawned service's DATABASE_URL; a direct session for LISTEN) */
  dbUrl: string;
  dbDirectUrl: string;
  redis: Redis;
  /** the Redis prefix's handle: `cleanup()` removes this store's keys only */
  redisHandle: ReturnType<typeof createTestRedis>;
  close(): Promise<void>;
}

export async function openTestStore(opts: { poolSize: number }): Promise<TestStore> {
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
