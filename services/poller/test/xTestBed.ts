/**
 * What the poller's X-mode tests (search.test.ts, timeline.test.ts) run on: a test database, a
 * Redis prefix (the fleet's governor, leases and user cache) and the fake X, opened once per file
 * and closed, each cleaned up, after it.
 */
import { Redis } from 'ioredis';
import { createDbClient, type Db } from '@sts/db';
import { createTestDatabase, createTestRedis, startFakeX, type FakeX, type FakeXOptions } from '@sts/testing';

export interface XTestBed {
  db: Db;
  /** the database's URLs (a spawned service's DATABASE_URL; LISTEN and the outbox relay's session) */
  dbUrl: string;
  dbDirectUrl: string;
  redis: Redis;
  /** the Redis prefix's handle: `cleanup()` removes this bed's keys only */
  redisHandle: ReturnType<typeof createTestRedis>;
  fake: FakeX;
  close(): Promise<void>;
}

export async function openXTestBed(opts: { poolSize: number; fakeX?: FakeXOptions }): Promise<XTestBed> {
  const dbHandle = await createTestDatabase();
  const db = createDbClient({ url: dbHandle.url, poolSize: opts.poolSize });
  const redisHandle = createTestRedis();
  const redis = new Redis(redisHandle.url, { keyPrefix: redisHandle.prefix });
  const fake = await startFakeX(opts.fakeX);
  return {
    db,
    dbUrl: dbHandle.url,
    dbDirectUrl: dbHandle.directUrl,
    redis,
    redisHandle,
    fake,
    async close() {
      await fake.stop();
      redis.disconnect();
      await redisHandle.cleanup();
      await db.$disconnect();
      await dbHandle.drop();
    },
  };
}
