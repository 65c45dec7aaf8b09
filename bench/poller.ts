/**
 * Poller benchmark: BENCH_MONITORS monitors (default 10,000) over BENCH_TARGETS targets (default
 * 1,000), seeded in SQL (generate_series; 1,000,000 monitors in seconds).
 * - idle_tick_ms: the median of 50 ticks with nothing due (every target scheduled ahead): what a
 *   replica pays every second; it reads the schedule's index only (issue 19 part 4).
 * - the cycle (BENCH_CYCLE=0 skips it): every target due, one poll cycle against a counting
 *   source; the poller must make one source call per target, however many monitors watch each.
 * Runs standalone (`npm run bench:poller`) or through bench/pipeline.ts.
 * Uses its own database on postgresql://postgres@127.0.0.1:5432 and Redis key prefix; removes both.
 */
import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { Redis } from 'ioredis';
import { createLogger, loadDevEnv } from '../packages/common/src';
import { snowflakeId } from '../packages/core/src';
import { createDbClient } from '../packages/db/src';
import type { SocialSource, SocialTweet } from '../packages/social/src';
import { createRedisLeases } from '../services/poller/src/adapters/lease';
import { createPollerRepository } from '../services/poller/src/adapters/repository';
import { createPoller } from '../services/poller/src/poller';
import { positiveEnv } from './lib/numbers';
import { createDatabase, deleteKeys, dropDatabase, postgresAdminUrl, redisUrl } from './lib/services';

const MONITORS = positiveEnv('BENCH_MONITORS', 10_000, { whole: true });
const TARGETS = positiveEnv('BENCH_TARGETS', 1_000, { whole: true });

/**
 * The monitors, and their schedule rows written in one statement: the row trigger would upsert
 * poll_targets once per monitor, so it is off during the load (the bench's own database) and the
 * rows it would have written are inserted at once. Every target is scheduled ahead (idle).
 */
async function seed(url: string, accountId: string, created: Date): Promise<void> {
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    await c.query('SET statement_timeout = 0');
    await c.query('BEGIN');
    await c.query('ALTER TABLE monitors DISABLE TRIGGER monitors_poll_targets_sync');
    await c.query(
      `INSERT INTO monitors (account_id, target_username, target_key, keywords, created_at)
       SELECT $1::uuid, 'target_' || (i % $2), 'target_' || (i % $2),
              CASE WHEN i % 2 = 0 THEN ARRAY['launch'] ELSE ARRAY[]::text[] END, $3
       FROM generate_series(0, $4 - 1) AS g(i)`,
      [accountId, TARGETS, created, MONITORS],
    );
    await c.query('ALTER TABLE monitors ENABLE TRIGGER monitors_poll_targets_sync');
    await c.query(
      `INSERT INTO poll_targets (target_key, active_monitors, next_due_at)
       SELECT target_key, count(*), now() + interval '1 hour' FROM monitors WHERE is_active GROUP BY target_key`,
    );
    await c.query('COMMIT');
    await c.query('ANALYZE monitors');
    await c.query('ANALYZE poll_targets');
  } finally {
    await c.end();
  }
}

/** median of `n` ticks with nothing due */
async function idleTicks(poller: { runCycle(): Promise<{ targets: number }> }, n: number): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const r = await poller.runCycle();
    times.push(performance.now() - t0);
    if (r.targets !== 0) throw new Error(`an idle tick found ${r.targets} due targets`);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)]!;
}

export async function measurePollerCycle(opts: { cycle?: boolean } = {}): Promise<{
  sourceCallsPerCycle: number;
  monitors: number;
  targets: number;
  cycleMs: number;
  idleTickMs: number;
  seedMs: number;
}> {
  const runTheCycle = opts.cycle ?? process.env.BENCH_CYCLE !== '0';
  const admin = postgresAdminUrl();
  const name = `sts_bench_${randomBytes(4).toString('hex')}`;
  const url = await createDatabase(admin, name);
  const db = createDbClient({ url, poolSize: 10 });
  const prefix = `bench:${name}:`;
  const redis = new Redis(redisUrl(), { keyPrefix: prefix });
  try {
    const account = await db.account.create({ data: { email: 'bench@example.com', plan: 'starter' } });
    const created = new Date(Date.now() - 3600_000);
    const s0 = performance.now();
    await seed(url, account.id, created);
    const seedMs = performance.now() - s0;

    // an in-memory source: every target has one new tweet; calls are counted
    let calls = 0;
    const author = (username: string) => ({
      id: '1',
      username,
      name: username,
      description: null,
      followersCount: 0,
      followingCount: 0,
      tweetCount: 1,
      verified: false,
      profileImageUrl: null,
      createdAt: null,
    });
    const source: SocialSource = {
      name: 'local',
      getUser: () => Promise.resolve(null),
      getUserTimeline: () => Promise.resolve(null),
      getTweet: () => Promise.resolve(null),
      search: () => Promise.resolve({ items: [], nextCursor: null }),
      pollTweets: (username) => {
        calls++;
        const tweet: SocialTweet = {
          id: snowflakeId(),
          text: 'we launch today',
          authorId: '1',
          author: author(username),
          createdAt: new Date(),
          lang: 'en',
          metrics: { likeCount: 0, retweetCount: 0, replyCount: 0, quoteCount: 0 },
        };
        return Promise.resolve({ tweets: [tweet], position: `x.${tweet.id}`, more: false });
      },
    };
    const poller = createPoller({
      repository: createPollerRepository(db),
      source,
      leases: createRedisLeases(redis),
      logger: createLogger({ service: 'bench', level: 'error' }),
      // the default plan intervals; the cycle polls every target (all are new, so all are due)
      intervals: { plans: { free: { pollIntervalSec: 300 }, starter: { pollIntervalSec: 60 } } },
      concurrency: 16,
    });
    await poller.runCycle(); // warm-up (connections, plans)
    const idleTickMs = await idleTicks(poller, 50);
    let cycleMs = NaN;
    if (runTheCycle) {
      await db.$executeRaw`UPDATE poll_targets SET next_due_at = now()`;
      const t0 = performance.now();
      const result = await poller.runCycle();
      cycleMs = performance.now() - t0;
      if (result.hits !== MONITORS) throw new Error(`expected ${MONITORS} hits, recorded ${result.hits}`);
    }
    return { sourceCallsPerCycle: calls, monitors: MONITORS, targets: TARGETS, cycleMs, idleTickMs, seedMs };
  } finally {
    await db.$disconnect();
    redis.disconnect();
    await deleteKeys(redisUrl(), prefix);
    await dropDatabase(admin, name);
  }
}

if (require.main === module) {
  loadDevEnv(); // next to `npm start`: its settings (.tmp/dev.env) where the environment sets none
  measurePollerCycle()
    .then((r) => {
      console.log(`monitors ${r.monitors} targets ${r.targets} seed_ms ${r.seedMs.toFixed(0)}`);
      console.log(`idle_tick_ms ${r.idleTickMs.toFixed(2)} (median of 50 ticks with nothing due)`);
      if (Number.isNaN(r.cycleMs)) console.log('cycle skipped (BENCH_CYCLE=0)');
      else {
        console.log(`cycle_ms ${r.cycleMs.toFixed(0)} (${r.monitors} hits recorded with their events)`);
        console.log(`source_calls_per_cycle ${r.sourceCallsPerCycle}`);
      }
    })
    .catch((err: unknown) => {
      console.error(err);
      process.exit(1);
    });
}
