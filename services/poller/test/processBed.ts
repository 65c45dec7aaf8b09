/**
 * What the poller's process tests (main.test.ts, budget.test.ts; metrics.test.ts in process) start
 * `src/main.ts` on: a test database, a Redis prefix and a RabbitMQ vhost, with the environment that
 * names them. `close()` drops the database and the prefix's keys (vhosts go with the test run).
 */
import { createDbClient, type Db } from '@sts/db';
import { createTestDatabase, createTestRedis, createTestVhost } from '@sts/testing';

export interface ProcessBed {
  /** a client of the test database (pool of 2) */
  db: Db;
  /** DATABASE_URL, REDIS_URL, REDIS_KEY_PREFIX and AMQP_URL for the poller process */
  env: { DATABASE_URL: string; REDIS_URL: string; REDIS_KEY_PREFIX: string; AMQP_URL: string };
  close(): Promise<void>;
}

/** `amqpUrl`: the broker the process is given instead of a fresh test vhost (e.g. one that is down) */
export async function openProcessBed(opts: { amqpUrl?: string } = {}): Promise<ProcessBed> {
  const dbHandle = await createTestDatabase();
  const redisHandle = createTestRedis();
  const amqpUrl = opts.amqpUrl ?? (await createTestVhost()).url;
  const db = createDbClient({ url: dbHandle.url, poolSize: 2 });
  return {
    db,
    env: {
      DATABASE_URL: dbHandle.url,
      REDIS_URL: redisHandle.url,
      REDIS_KEY_PREFIX: redisHandle.prefix,
      AMQP_URL: amqpUrl,
    },
    async close() {
      await db.$disconnect();
      await redisHandle.cleanup();
      await dbHandle.drop();
    },
  };
}
