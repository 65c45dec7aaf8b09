/**
 * `npm run bench:realtime`, X `stream` mode (issues 19 and 28), against the fake X of
 * packages/testing (filtered stream, rules, search, users; every family's window one minute
 * here, so a "budget window" is a minute). Two stream replicas run in this process (each with its
 * own lease identity and RabbitMQ connection; replica A's database goes through a TCP proxy the
 * bench can black-hole), the holder handing streamed posts to both replicas' recording through
 * RabbitMQ (a vhost of the run), on the bench database. Phases, each printing one line:
 *
 * 1. set-up: BENCH_X_STREAM_TARGETS (2,000) X accounts, each watched by a Starter monitor created
 *    while the stream runs, in BENCH_X_BATCHES (20) batches a second apart, or one by one
 *    (BENCH_X_SETUP=one); every upstream request until the rules cover them all and no backfill
 *    is owed (user lookups, rule calls, searches, connects) → requests per 20 accounts;
 * 2. burst: BENCH_X_STREAM_RATE (200) posts/s for BENCH_X_STREAM_SECONDS (30) to random accounts
 *    → post → hit p50/p99 (hit `detected_at` − the post's `created_at`) and lost;
 * 3. gap: the search budget cut to BENCH_X_SEARCH_PER_MIN (30) a minute, the stream down (503s)
 *    for BENCH_X_GAP_SECONDS (60) while one post a second is made → lost, 429s, and how long after
 *    the stream was back the last gap post became a hit (in budget windows);
 * 4. failover: replica A (the holder) loses PostgreSQL (its connections black-holed, no socket
 *    closed) while 5 posts/s keep coming → seconds until replica B's stream is connected, lost.
 *
 * BENCH_X_STATEMENTS=1: the burst also prints the statements sent (round trips), commits and rows
 * written per post (bench/lib/statements.ts), figures a busy machine's clock does not skew.
 *
 * Last line: `x_stream setup_per_20 <n> burst_p50_ms <a> p99_ms <b> lost <n> gap_lost <n>
 * gap_429s <n> gap_windows <n> failover_s <n> failover_lost <n>`.
 * Run alone: `npx tsx bench/realtimeStream.ts` (its own database and Redis prefix).
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { createLogger, createMetricsRegistry, loadDevEnv } from '../packages/common/src';
import { createDbClient, type Db } from '../packages/db/src';
import { AmqpClient } from '../packages/messaging/src';
import { createXSource } from '../packages/social/src';
import { createFakeStream, startFakeX, type FakeStream, type FakeX } from '../packages/testing/src/fakeX';
import { TcpProxy } from '../packages/testing/src/proxy';
import { createVhost, deleteVhosts } from '../packages/testing/src/services';
import { createPollerRepository } from '../services/poller/src/adapters/repository';
import { buildStreamMode } from '../services/poller/src/intake/stream';
import type { StreamMode } from '../services/poller/src/intake/stream/streamMode';
import { percentile, positiveEnv } from './lib/numbers';
import { paced } from './lib/pace';
import { createDatabase, deleteKeys, dropDatabase, serviceUrls } from './lib/services';
import { StatementCounter } from './lib/statements';

const TARGETS = positiveEnv('BENCH_X_STREAM_TARGETS', 2000, { whole: true });
const BATCHES = positiveEnv('BENCH_X_BATCHES', 20, { whole: true });
const ONE_BY_ONE = process.env.BENCH_X_SETUP === 'one';
const RATE = positiveEnv('BENCH_X_STREAM_RATE', 200);
const SECONDS = positiveEnv('BENCH_X_STREAM_SECONDS', 30);
const SEARCH_PER_MIN = positiveEnv('BENCH_X_SEARCH_PER_MIN', 30, { whole: true });
const GAP_SECONDS = positiveEnv('BENCH_X_GAP_SECONDS', 60);
const PHASES = (process.env.BENCH_X_STREAM_PHASES ?? 'setup,burst,gap,failover').split(',');
/** BENCH_X_STATEMENTS=1: the burst's statements, transactions and rows per post (bench/lib/statements.ts) */
const STATEMENTS = process.env.BENCH_X_STATEMENTS === '1';
const WINDOW_MS = 60_000;

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

interface Bed {
  db: Db;
  fake: FakeX;
  stream: FakeStream;
  a: StreamMode;
  b: StreamMode;
  proxy: TcpProxy;
  usernames: string[];
  statements: StatementCounter | null;
}

async function owed(db: Db): Promise<number> {
  const [r] = await db.$queryRaw<{ n: bigint }[]>`SELECT count(*) AS n FROM x_stream_owed`;
  return Number(r!.n);
}

async function hitsOf(db: Db, ids: string[]): Promise<number[]> {
  const rows = await db.$queryRaw<{ ms: number }[]>`
    SELECT extract(epoch FROM (detected_at - tweet_created_at)) * 1000 AS ms FROM hits WHERE tweet_id = ANY(${ids})`;
  return rows.map((r) => Number(r.ms)).sort((x, y) => x - y);
}

/** Phase 1: the accounts watched while the stream runs; requests per 20 accounts. */
async function setup(bed: Bed): Promise<number> {
  const { db, fake, stream, usernames } = bed;
  const account = await db.account.create({
    data: { email: `x-stream-${randomBytes(4).toString('hex')}@bench.test`, plan: 'starter' },
  });
  const before = fake.requests.log.length;
  const row = (u: string) => ({ accountId: account.id, targetUsername: u, targetKey: u.toLowerCase(), keywords: [] });
  const started = Date.now();
  if (ONE_BY_ONE) for (const u of usernames) await db.monitor.create({ data: row(u) });
  else {
    const size = Math.ceil(usernames.length / BATCHES);
    for (let i = 0; i < BATCHES; i++) {
      await db.monitor.createMany({ data: usernames.slice(i * size, (i + 1) * size).map(row) });
      if (i < BATCHES - 1) await sleep(1000);
    }
  }
  const created = Date.now() - started;
  const covered = () => new Set(stream.rules().flatMap((r) => [...r.from])).size === usernames.length;
  const done = await until(async () => covered() && (await owed(db)) === 0, 180_000);
  if (!done) throw new Error('the stream did not cover every account and pay its backfill within 3 minutes');
  await sleep(3000);
  const requests = fake.requests.log.slice(before);
  const per20 = (requests.length / usernames.length) * 20;
  const byFamily: Record<string, number> = {};
  for (const r of requests) byFamily[r.family] = (byFamily[r.family] ?? 0) + 1;
  log(
    `set-up ${ONE_BY_ONE ? 'one by one' : `in ${BATCHES} batches`} (${Math.round(created / 1000)} s of monitor creation): ` +
      `${requests.length} requests for ${usernames.length} accounts = ${per20.toFixed(2)} per 20 ${JSON.stringify(byFamily)}, ` +
      `${stream.rules().length} rules`,
  );
  return per20;
}

/** Phase 2: RATE posts/s for SECONDS; p50/p99 post → hit and lost. */
async function burst(bed: Bed): Promise<{ p50: number; p99: number; lost: number }> {
  const { db, fake, usernames } = bed;
  const ids: string[] = [];
  await bed.statements?.start();
  await paced(RATE, SECONDS, (i) => {
    const author = usernames[Math.floor(Math.random() * usernames.length)]!;
    ids.push(fake.state.post({ author, text: `burst ${i}` }).id);
  });
  await until(async () => (await hitsOf(db, ids)).length >= ids.length, 30_000);
  const lat = await hitsOf(db, ids);
  for (const line of (await bed.statements?.stop(ids.length)) ?? []) log(line);
  const r = { p50: percentile(lat, 50), p99: percentile(lat, 99), lost: ids.length - lat.length };
  log(
    `burst ${RATE}/s for ${SECONDS} s: ${ids.length} posts, p50 ${Math.round(r.p50)} ms, p99 ${Math.round(r.p99)} ms, lost ${r.lost}`,
  );
  return r;
}

/** Phase 3: the stream down GAP_SECONDS with SEARCH_PER_MIN searches a minute. */
async function gap(bed: Bed): Promise<{ lost: number; tooMany: number; windows: number }> {
  const { db, fake, stream, usernames } = bed;
  fake.limits.setLimit('search', SEARCH_PER_MIN);
  const before = fake.requests.log.length;
  const connects = stream.connects();
  stream.outage(true);
  const ids: string[] = [];
  await paced(1, GAP_SECONDS, (i) => {
    const author = usernames[Math.floor(Math.random() * usernames.length)]!;
    ids.push(fake.state.post({ author, text: `gap ${i}` }).id);
  });
  stream.outage(false);
  const back = Date.now();
  await until(() => stream.connects() > connects, 120_000);
  const reconnectedS = (Date.now() - back) / 1000;
  await until(async () => (await hitsOf(db, ids)).length >= ids.length, 5 * WINDOW_MS);
  const closedS = (Date.now() - back) / 1000;
  const lost = ids.length - (await hitsOf(db, ids)).length;
  const tooMany = fake.requests.log.slice(before).filter((r) => r.status === 429).length;
  const searches = fake.requests.log.slice(before).filter((r) => r.family === 'search').length;
  const windows = Math.ceil(closedS / (WINDOW_MS / 1000));
  log(
    `gap of ${GAP_SECONDS} s (${ids.length} posts, ${usernames.length} accounts, ${SEARCH_PER_MIN} searches/min): ` +
      `reconnected ${reconnectedS.toFixed(1)} s after the stream was back, last gap post a hit ${closedS.toFixed(1)} s after ` +
      `(${windows} window(s)), ${searches} searches, lost ${lost}, 429s ${tooMany}`,
  );
  fake.limits.setLimit('search', 450);
  return { lost, tooMany, windows };
}

/** Phase 4: the holder (A) loses PostgreSQL; seconds until B's stream is connected. */
async function failover(bed: Bed): Promise<{ seconds: number; lost: number }> {
  const { db, fake, stream, usernames, a, b } = bed;
  if (!a.isHolder()) throw new Error('replica A is expected to hold the stream');
  const ids: string[] = [];
  let posting = true;
  const poster = (async () => {
    for (let i = 0; posting; i++) {
      const author = usernames[Math.floor(Math.random() * usernames.length)]!;
      ids.push(fake.state.post({ author, text: `failover ${i}` }).id);
      await sleep(200);
    }
  })();
  await sleep(1000);
  const connects = stream.connects();
  const cut = Date.now();
  bed.proxy.blackhole();
  await until(() => b.isHolder() && stream.connects() > connects && stream.connections() === 1, 60_000);
  const seconds = (Date.now() - cut) / 1000;
  await sleep(3000);
  posting = false;
  await poster;
  await until(async () => (await hitsOf(db, ids)).length >= ids.length, 60_000);
  const lost = ids.length - (await hitsOf(db, ids)).length;
  log(
    `failover: replica B's stream connected ${seconds.toFixed(1)} s after the holder lost PostgreSQL; ` +
      `${ids.length} posts, lost ${lost}, connections now ${stream.connections()}`,
  );
  return { seconds, lost };
}

function startReplica(dbUrl: string, db: Db, fake: FakeX, redis: Redis, amqp: AmqpClient, name: string): StreamMode {
  const env = {
    DATABASE_URL: dbUrl,
    X_API_BASE_URL: fake.url,
    X_BEARER_TOKEN: 'bench-token',
    X_TIMEOUT_MS: 10_000,
    X_RULE_MAX_LENGTH: 1024,
    X_MAX_RULES: 1000,
    // the fake applies rules at once; X takes up to ~20 s (the default)
    X_RULE_SETTLE_SECONDS: 1,
    X_RULE_COALESCE_SECONDS: 5,
    X_STREAM_LEASE_SECONDS: 10,
    X_QUERY_MAX_LENGTH: 512,
    POLL_OVERLAP_SECONDS: 30,
    PLAN_FREE_POLL_INTERVAL_SECONDS: 300,
    PLAN_STARTER_POLL_INTERVAL_SECONDS: 60,
  };
  const mode = buildStreamMode(env, {
    db,
    source: createXSource({ baseUrl: fake.url, bearerToken: env.X_BEARER_TOKEN, redis }),
    pollerRepository: createPollerRepository(db),
    logger: createLogger({ service: `bench-x-stream-${name}`, level: process.env.BENCH_LOG_LEVEL ?? 'warn' }),
    registry: createMetricsRegistry(`bench-x-stream-${name}`),
    amqp,
  });
  mode.start();
  return mode;
}

export async function runStreamMode(e: {
  dbUrl: string;
  redisUrl: string;
  prefix: string;
  amqpUrl: string;
}): Promise<void> {
  const logger = createLogger({ service: 'bench-x-stream-amqp', level: process.env.BENCH_LOG_LEVEL ?? 'warn' });
  // one RabbitMQ connection per replica, as each poller process has
  const amqpA = new AmqpClient({ url: e.amqpUrl, logger, name: 'bench-x-stream-a' });
  const amqpB = new AmqpClient({ url: e.amqpUrl, logger, name: 'bench-x-stream-b' });
  await Promise.all([amqpA.start(), amqpB.start()]);
  const stream = createFakeStream();
  const fake = await startFakeX({ routes: stream.routes, windowMs: WINDOW_MS });
  const proxy = new TcpProxy(new URL(e.dbUrl).hostname, Number(new URL(e.dbUrl).port || 5432));
  await proxy.listen();
  // before the clients: it counts what their connections send
  const statements = STATEMENTS ? new StatementCounter(e.dbUrl) : null;
  const db = createDbClient({ url: e.dbUrl, poolSize: 12 });
  const dbA = createDbClient({ url: proxy.urlFor(e.dbUrl), poolSize: 12 });
  const redis = new Redis(e.redisUrl, { keyPrefix: e.prefix });
  const usernames = Array.from({ length: TARGETS }, (_, i) => `xs_${i}_${randomBytes(2).toString('hex')}`);
  for (const u of usernames) fake.state.addUser({ username: u });
  const a = startReplica(e.dbUrl, dbA, fake, redis, amqpA, 'a');
  let b: StreamMode | undefined;
  const out: string[] = [];
  try {
    if (!(await until(() => a.isHolder() && stream.connections() === 1, 30_000)))
      throw new Error('replica A did not connect within 30 s');
    b = startReplica(e.dbUrl, db, fake, redis, amqpB, 'b');
    const bed: Bed = { db, fake, stream, a, b, proxy, usernames, statements };
    if (PHASES.includes('setup')) out.push(`setup_per_20 ${(await setup(bed)).toFixed(2)}`);
    else throw new Error('the set-up phase is needed by the others');
    if (PHASES.includes('burst')) {
      const r = await burst(bed);
      out.push(`burst_p50_ms ${Math.round(r.p50)} p99_ms ${Math.round(r.p99)} lost ${r.lost}`);
    }
    if (PHASES.includes('gap')) {
      const r = await gap(bed);
      out.push(`gap_lost ${r.lost} gap_429s ${r.tooMany} gap_windows ${r.windows}`);
    }
    if (PHASES.includes('failover')) {
      const r = await failover(bed);
      out.push(`failover_s ${r.seconds.toFixed(1)} failover_lost ${r.lost}`);
    }
    console.log(`x_stream ${out.join(' ')}`);
  } finally {
    await b?.stop();
    // replica A's database may be black-holed: cut it so its calls fail instead of hanging
    await proxy.close();
    await a.stop();
    await amqpB.stop();
    await amqpA.stop();
    await fake.stop();
    redis.disconnect();
    await dbA.$disconnect().catch(() => undefined);
    await db.$disconnect();
    await statements?.end();
  }
}

/** A fresh database (from `adminUrl`) and Redis prefix for the run, removed afterwards. */
export async function runStreamBench(o: { adminUrl: string; redisUrl: string; prefix: string }): Promise<void> {
  const name = `sts_bench_xs_${randomBytes(4).toString('hex')}`;
  const dbUrl = await createDatabase(o.adminUrl, name);
  const prefix = `${o.prefix}stream:${name}:`;
  const urls = serviceUrls();
  const amqpUrl = await createVhost(urls, name);
  try {
    await runStreamMode({ dbUrl, redisUrl: o.redisUrl, prefix, amqpUrl });
  } finally {
    await dropDatabase(o.adminUrl, name);
    await deleteKeys(o.redisUrl, prefix);
    await deleteVhosts(urls, name);
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
