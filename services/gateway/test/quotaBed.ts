/**
 * What the leased quota's tests (leasedQuota.test.ts, leasedQuota.flush.test.ts) run on: a test
 * database and a Redis prefix per file, and stores each on its own Redis connection, as separate
 * gateway processes would have, closed after each test. `useQuotaBed()` registers the jest hooks;
 * read the fields inside tests and hooks only.
 */
import { Redis } from 'ioredis';
import { createDbClient, type Db } from '@sts/db';
import { createTestDatabase, createTestRedis } from '@sts/testing';
import { createQuotaStore, type QuotaStore, type QuotaStoreOptions } from '../src/adapters/leasedQuota';

export class QuotaBed {
  dbHandle!: Awaited<ReturnType<typeof createTestDatabase>>;
  db!: Db;
  redisHandle!: ReturnType<typeof createTestRedis>;
  /** a client on the prefix, the test's own (no store's) */
  redis!: Redis;
  readonly stores: QuotaStore[] = [];
  readonly clients: Redis[] = [];

  /** a store on its own Redis connection (closed after the test), and that connection */
  store(opts: Omit<QuotaStoreOptions, 'db' | 'redis'> = {}): { s: QuotaStore; client: Redis } {
    const client = new Redis(this.redisHandle.url, { keyPrefix: this.redisHandle.prefix, maxRetriesPerRequest: 1 });
    this.clients.push(client);
    const s = createQuotaStore({ db: this.db, redis: client, ...opts });
    this.stores.push(s);
    return { s, client };
  }
}

/** the bed of one test file, its jest hooks registered */
export function useQuotaBed(opts: { poolSize: number }): QuotaBed {
  const bed = new QuotaBed();
  beforeAll(async () => {
    bed.dbHandle = await createTestDatabase();
    bed.db = createDbClient({ url: bed.dbHandle.url, poolSize: opts.poolSize });
    bed.redisHandle = createTestRedis();
    bed.redis = new Redis(bed.redisHandle.url, { keyPrefix: bed.redisHandle.prefix });
  });
  afterAll(async () => {
    bed.redis.disconnect();
    await bed.redisHandle.cleanup();
    await bed.db.$disconnect();
    await bed.dbHandle.drop();
  });
  afterEach(async () => {
    for (const s of bed.stores.splice(0)) await s.close().catch(() => undefined);
    for (const c of bed.clients.splice(0)) c.disconnect();
  });
  return bed;
}
