/**
 * `npm run bench:realtime`, X `stream` mode (issue 19 part 5): against the fake X of
 * packages/testing (filtered stream, rules, search, users; Pro-like 15-minute windows),
 * BENCH_X_TARGETS (default 1,000) targets each watched by a Starter monitor, posts at BENCH_RATE
 * per second (default 5) for BENCH_X_SECONDS (default 120) to random targets, and one forced
 * stream disconnect half-way. The stream holder runs in this process (services/poller/src/intake/stream)
 * with the poller's recording path on the bench database.
 *
 * Prints: set-up requests (rules, connect, the new rules' backfill; no user lookup is on that
 * path) and requests per 20 targets, requests while posting (independent of the number of posts:
 * only the disconnect's reconnect and backfill), the background account check's user lookups
 * apart (`GET /2/users/by`, 100 a call, only accounts not seen posting within the cache TTL; the
 * first pass one minute after the holder starts), upstream 429s, post → hit p50/p99 (hit
 * `detected_at` − the post's `created_at`, the fake delivering at once) and hits lost (posts with
 * no hit 30 s after the last one); last line
 * `x_stream_post_to_hit_p50_ms <a> p99_ms <b> lost <n> requests <setup>+<posting> lookups <n> 429s <n>`.
 *
 * Run alone: `npx tsx bench/realtimeStream.ts` (its own database and Redis prefix).
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { createLogger, createMetricsRegistry, loadDevEnv } from '../packages/common/src';
import { createDbClient, type Db } from '../packages/db/src';
import { createXSource } from '../packages/social/src';
import { createFakeStream, startFakeX, type FakeX } from '../packages/testing/src/fakeX';
import { createPollerRepository } from '../services/poller/src/adapters/repository';
import { buildStreamMode } from '../services/poller/src/intake/stream';
import { percentile, positiveEnv } from './lib/numbers';
import { paced } from './lib/pace';
import { createDatabase, deleteKeys, dropDatabase, serviceUrls } from './lib/services';

let TARGETS = positiveEnv('BENCH_X_TARGETS', 1000);
let RATE = positiveEnv('BENCH_RATE', 5);
let SECONDS = positiveEnv('BENCH_X_SECONDS', 120);
let DRAIN_MS = 30_000;

const log = (msg: string) => console.log(`[bench:realtime:stream] ${msg}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(check: () => Promise<boolean> | boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await sleep(200);
  }
  return false;
}

/** 1,000 users on the fake X, one Starter account watching each (the other monitors paused). */
async function seed(db: Db, fake: FakeX): Promise<string[]> {
  await db.monitor.updateMany({ data: { isActive: false } });
  const account = await db.account.create({
    data: { email: `x-stream-${randomBytes(4).toString('hex')}@bench.test`, plan: 'starter' },
  });
  const usernames = Array.from({ length: TARGETS }, (_, i) => `xs_${i}_${randomBytes(2).toString('hex')}`);
  for (const u of usernames) fake.state.addUser({ username: u });
  await db.monitor.createMany({
    data: usernames.map((u) => ({
      accountId: account.id,
      targetUsername: u,
      targetKey: u.toLowerCase(),
      keywords: [],
    })),
  });
  return usernames;
}

/** Posts RATE a second; forces one stream disconnect half-way. Returns tweet id → author. */
async function post(fake: FakeX, usernames: string[], disconnect: () => void): Promise<Map<string, string>> {
  const posted = new Map<string, string>();
  await paced(RATE, SECONDS, (i, total) => {
    if (i === Math.floor(total / 2)) {
      log('forcing a stream disconnect');
      disconnect();
    }
    const author = usernames[Math.floor(Math.random() * usernames.length)]!;
    posted.set(fake.state.post({ author, text: `post ${i}` }).id, author);
  });
  return posted;
}

async function latencies(db: Db, ids: string[]): Promise<number[]> {
  const rows = await db.$queryRaw<{ ms: number }[]>`
    SELECT extract(epoch FROM (detected_at - tweet_created_at)) * 1000 AS ms FROM hits WHERE tweet_id = ANY(${ids})`;
  return rows.map((r) => Number(r.ms)).sort((a, b) => a - b);
}

export async function runStreamMode(e: { dbUrl: string; redisUrl: string; prefix: string }): Promise<void> {
  const stream = createFakeStream();
  const fake = await startFakeX({ routes: stream.routes });
  const db = createDbClient({ url: e.dbUrl, poolSize: 8 });
  const redis = new Redis(e.redisUrl, { keyPrefix: e.prefix });
  const env = {
    DATABASE_URL: e.dbUrl,
    X_API_BASE_URL: fake.url,
    X_BEARER_TOKEN: 'bench-token',
    X_TIMEOUT_MS: 10_000,
    X_RULE_MAX_LENGTH: 1024,
    X_MAX_RULES: 1000,
    // the fake applies rules at once; X takes up to ~20 s (the default)
    X_RULE_SETTLE_SECONDS: 1,
    X_QUERY_MAX_LENGTH: 512,
    POLL_OVERLAP_SECONDS: 30,
    PLAN_FREE_POLL_INTERVAL_SECONDS: 300,
    PLAN_STARTER_POLL_INTERVAL_SECONDS: 60,
  };
  const mode = buildStreamMode(env, {
    db,
    source: createXSource({
      baseUrl: fake.url,
      bearerToken: env.X_BEARER_TOKEN,
      redis,
    }),
    pollerRepository: createPollerRepository(db),
    logger: createLogger({ service: 'bench-x-stream', level: process.env.BENCH_LOG_LEVEL ?? 'warn' }),
    registry: createMetricsRegistry('bench-x-stream'),
  });
  try {
    const usernames = await seed(db, fake);
    mode.start();
    const covered = () => new Set(stream.rules().flatMap((r) => [...r.from]));
    const ready = await until(() => stream.connections() === 1 && covered().size === TARGETS, 60_000);
    if (!ready) throw new Error(`the stream did not cover ${TARGETS} targets within 60 s`);
    await sleep(env.X_RULE_SETTLE_SECONDS * 1000 + 3000); // the new rules' backfill
    const lookups = () => fake.requests.count({ family: 'users' });
    const setupLookups = lookups(); // none expected: counted in set-up if any
    const setup = fake.requests.log.length;
    log(
      `set-up: ${setup} requests for ${TARGETS} targets (${stream.rules().length} rules): ${JSON.stringify(fake.requests.byFamily())}`,
    );
    log(`posting ${RATE}/s for ${SECONDS} s`);
    const posted = await post(fake, usernames, () => stream.disconnect());
    const ids = [...posted.keys()];
    await until(async () => (await db.hit.count({ where: { tweetId: { in: ids } } })) >= ids.length, DRAIN_MS);
    const lat = await latencies(db, ids);
    const background = lookups() - setupLookups;
    const posting = fake.requests.log.length - setup - background;
    const tooMany = fake.requests.count({ status: 429 });
    log(
      `requests while posting ${ids.length} posts: ${posting} (reconnect and gap backfill), ` +
        `background user lookups: ${background}; all: ${JSON.stringify(fake.requests.byFamily())}`,
    );
    log(
      `set-up requests per 20 targets: ${((setup / TARGETS) * 20).toFixed(2)}; stream connects: ${stream.connects()}`,
    );
    console.log(
      `x_stream_post_to_hit_p50_ms ${Math.round(percentile(lat, 50))} p99_ms ${Math.round(percentile(lat, 99))} ` +
        `lost ${ids.length - lat.length} requests ${setup}+${posting} lookups ${background} 429s ${tooMany}`,
    );
  } finally {
    await mode.stop();
    await fake.stop();
    redis.disconnect();
    await db.$disconnect();
  }
}

/** A fresh database (from `adminUrl`) and Redis prefix for the run, removed afterwards. */
export async function runStreamBench(o: {
  adminUrl: string;
  redisUrl: string;
  prefix: string;
  targets?: number;
  rate?: number;
  seconds?: number;
  drainSeconds?: number;
}): Promise<void> {
  TARGETS = o.targets ?? TARGETS;
  RATE = o.rate ?? RATE;
  SECONDS = o.seconds ?? SECONDS;
  DRAIN_MS = (o.drainSeconds ?? DRAIN_MS / 1000) * 1000;
  const name = `sts_bench_xs_${randomBytes(4).toString('hex')}`;
  const dbUrl = await createDatabase(o.adminUrl, name);
  const prefix = `${o.prefix}stream:${name}:`;
  try {
    await runStreamMode({ dbUrl, redisUrl: o.redisUrl, prefix });
  } finally {
    await dropDatabase(o.adminUrl, name);
    await deleteKeys(o.redisUrl, prefix);
  }
}

async function main(): Promise<void> {
  loadDevEnv();
  const urls = serviceUrls();
  await runStreamBench({ adminUrl: urls.postgres, redisUrl: urls.redis, prefix: 'bench:' });
}

if (require.main === module) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
