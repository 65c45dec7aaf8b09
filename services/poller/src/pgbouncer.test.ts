/**
 * The poller process with DATABASE_URL through a real PgBouncer in transaction mode (started by
 * this file, 2 server connections per database) and DATABASE_DIRECT_URL straight to PostgreSQL:
 * its pool works through the pooler, its one direct session (the push LISTEN that wakes a Starter
 * target's poll and the outbox relay's LISTEN, on one connection) works on the direct URL, and
 * PostgreSQL sees no more backends than the pool size plus that session.
 */
import { Client } from 'pg';
import { createLogger } from '@sts/common';
import { createDbClient } from '@sts/db';
import { AmqpClient, type Envelope } from '@sts/messaging';
import { createSocialTweet, createSocialUser } from '@sts/social';
import { SESSION_APPLICATION_NAME } from './adapters/session';
import {
  createTestDatabase,
  createTestRedis,
  createTestVhost,
  pgbouncerAvailable,
  PGBOUNCER_BIN,
  spawnService,
  startPgBouncer,
  testServiceUrls,
  waitFor,
} from '@sts/testing';

const available = pgbouncerAvailable();
if (!available)
  console.warn(`poller: ${PGBOUNCER_BIN} IS NOT INSTALLED (apt-get install pgbouncer): THE PGBOUNCER TEST IS SKIPPED`);
const itBouncer = available ? it : it.skip;

/** PostgreSQL's backends on `database`: all, and the poller's direct sessions */
async function backends(database: string): Promise<{ total: number; direct: number }> {
  const admin = new Client({ connectionString: testServiceUrls().postgres });
  await admin.connect();
  try {
    const { rows } = await admin.query<{ total: number; direct: number }>(
      `SELECT count(*)::int AS total, count(*) FILTER (WHERE application_name = $2)::int AS direct
         FROM pg_stat_activity WHERE datname = $1`,
      [database, SESSION_APPLICATION_NAME],
    );
    return rows[0]!;
  } finally {
    await admin.end();
  }
}

describe('poller through PgBouncer (transaction mode)', () => {
  itBouncer('polls through the pooler, is woken by LISTEN on DATABASE_DIRECT_URL, relays the event', async () => {
    const POOL = 2;
    const pgbouncer = await startPgBouncer({ upstream: testServiceUrls().postgres, poolSize: POOL });
    const t = await createTestDatabase();
    const redis = createTestRedis();
    const amqpUrl = (await createTestVhost()).url;
    const db = createDbClient({ url: t.directUrl, poolSize: 2 });
    const amqp = new AmqpClient({
      url: amqpUrl,
      logger: createLogger({ service: 'pgb-test', level: 'error' }),
      name: 'pgb-test',
    });
    const received: Envelope<'monitor.hit'>[] = [];
    // the tick polls every hour: only the push (LISTEN sts_tweets) can find the tweet in time
    const proc = spawnService('services/poller/src/main.ts', {
      DATABASE_URL: pgbouncer.pooled(t.directUrl),
      DATABASE_DIRECT_URL: t.directUrl,
      DB_POOL_SIZE: '6',
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: redis.prefix,
      AMQP_URL: amqpUrl,
      POLL_INTERVAL_SECONDS: '3600',
      LOG_LEVEL: 'error',
    });
    try {
      await amqp.start();
      await amqp.consume({
        queue: 'pgbouncer-test',
        bindings: ['monitor.hit'],
        handler: (e) => (received.push(e), Promise.resolve('ack' as const)),
      });
      const account = await db.account.create({ data: { email: 'pgb@example.com', plan: 'starter' } });
      await createSocialUser(db, { username: 'pooled', name: 'Pooled' });
      const monitor = await db.monitor.create({
        data: { accountId: account.id, targetUsername: 'pooled', targetKey: 'pooled' },
      });
      await proc.waitForLine(/poller started/);
      // the first tick polls the new target once (its cursor), then not for an hour
      await waitFor(async () => (await db.pollCursor.count({ where: { targetKey: 'pooled' } })) === 1, 15_000);
      await createSocialTweet(db, { authorUsername: 'pooled', text: 'through the pooler' });
      const event = await waitFor(() => received.find((e) => e.payload.monitor.id === monitor.id), 15_000);
      expect(event.payload.tweet.text).toBe('through the pooler');
      // the poller's backends: at most the pooler's 2 plus its one direct session (both LISTENs)
      const seen = await backends(t.name);
      expect(seen.direct).toBe(1);
      expect(seen.total).toBeLessThanOrEqual(POOL + 1 + 2 /* this test's own client */);
      proc.child.kill('SIGTERM');
      expect(await proc.exited).toBe(0);
      expect(proc.lines.join('\n')).not.toMatch(/unsupported startup parameter|prepared statement/);
    } finally {
      proc.child.kill('SIGKILL');
      await amqp.stop();
      await db.$disconnect();
      await redis.cleanup();
      await t.drop();
      await pgbouncer.stop();
    }
  });
});
