/**
 * Poller benchmark: 10,000 monitors over 1,000 targets, one poll cycle against a counting source.
 * The poller must make one source call per target (1,000), however many monitors watch each.
 * Runs standalone (`node --import tsx bench/poller.ts`) or through bench/pipeline.ts.
 * Uses its own database on postgresql://postgres@127.0.0.1:5432 and Redis key prefix; removes both.
 */
import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { Redis } from 'ioredis';
import { createLogger, loadDevEnv } from '../packages/common/src';
import { snowflakeId } from '../packages/core/src';
import { createDbClient, ensureDatabase, migrate } from '../packages/db/src';
import type { SocialSource, SocialTweet } from '../packages/social/src';
import { createRedisLeases } from '../services/poller/src/adapters/lease';
import { createPollerRepository } from '../services/poller/src/adapters/repository';
import { createPoller } from '../services/poller/src/poller';

const MONITORS = 10_000;
const TARGETS = 1_000;

export async function measurePollerCycle(): Promise<{
  sourceCallsPerCycle: number;
  monitors: number;
  targets: number;
  cycleMs: number;
}> {
  const admin = process.env.BENCH_POSTGRES_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
  const name = `sts_bench_${randomBytes(4).toString('hex')}`;
  const url = new URL(admin);
  url.pathname = `/${name}`;
  await ensureDatabase(url.toString());
  await migrate(url.toString());
  const db = createDbClient({ url: url.toString(), poolSize: 10 });
  const prefix = `bench:${name}:`;
  const redis = new Redis(process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379', { keyPrefix: prefix });
  try {
    const account = await db.account.create({ data: { email: 'bench@example.com', plan: 'starter' } });
    const created = new Date(Date.now() - 3600_000);
    const rows = Array.from({ length: MONITORS }, (_, i) => ({
      accountId: account.id,
      targetUsername: `target_${i % TARGETS}`,
      targetKey: `target_${i % TARGETS}`,
      keywords: i % 2 === 0 ? ['launch'] : [],
      createdAt: created,
    }));
    for (let i = 0; i < rows.length; i += 2000) await db.monitor.createMany({ data: rows.slice(i, i + 2000) });

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
    const t0 = performance.now();
    const result = await poller.runCycle();
    const cycleMs = performance.now() - t0;
    if (result.hits !== MONITORS) throw new Error(`expected ${MONITORS} hits, recorded ${result.hits}`);
    return { sourceCallsPerCycle: calls, monitors: MONITORS, targets: TARGETS, cycleMs };
  } finally {
    await db.$disconnect();
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length) await redis.del(...keys.map((k) => k.slice(prefix.length)));
    redis.disconnect();
    const c = new Client({ connectionString: admin });
    await c.connect();
    await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    await c.end();
  }
}

if (require.main === module) {
  loadDevEnv(); // next to `npm start`: its settings (.tmp/dev.env) where the environment sets none
  measurePollerCycle()
    .then((r) => {
      console.log(
        `monitors ${r.monitors} targets ${r.targets} cycle_ms ${r.cycleMs.toFixed(0)} (10,000 hits recorded with their events)`,
      );
      console.log(`source_calls_per_cycle ${r.sourceCallsPerCycle}`);
    })
    .catch((err: unknown) => {
      console.error(err);
      process.exit(1);
    });
}
