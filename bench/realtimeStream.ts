/**
 * `npm run bench:realtime`, X `stream` mode, against the fake X of
 * packages/testing (filtered stream, rules, search, users; every family's window one minute
 * here, so a "budget window" is a minute). Two stream replicas run in this process (each with its
 * own lease identity and RabbitMQ connection; replica A's database goes through a TCP proxy the
 * bench can black-hole), the holder handing streamed posts to both replicas' recording through
 * RabbitMQ (a vhost of the run), on the bench database. Phases, each printing one line:
 *
 * 1. set-up: BENCH_X_STREAM_TARGETS (2,000) X accounts, each watched by a Starter monitor created
 *    while the stream runs, in BENCH_X_BATCHES (20) batches a second apart, or one by one
 *    (BENCH_X_SETUP=one); every upstream request until the rules cover them all, no backfill is
 *    owed and every account had its first profile/health look (the X account lookup round that
 *    every poller replica runs in production, services/poller/src/intake/profile/xLookup.ts) →
 *    requests per 20 accounts, split by kind (user lookups, rule calls, searches, connects), the
 *    searches against the fewest the query length allows; then, apart, the account lookup's
 *    steady-state cost: its `users` calls over BENCH_X_LOOKUP_SECONDS (60) → calls per minute;
 * 2. burst: BENCH_X_STREAM_RATE (200) posts/s for BENCH_X_STREAM_SECONDS (30) to random accounts
 *    → post → hit p50/p99 (hit `detected_at` − the post's `created_at`) and lost;
 * 3. gap: the search budget cut to BENCH_X_SEARCH_PER_MIN (30) a minute, the stream down (503s)
 *    for BENCH_X_GAP_SECONDS (60) while one post a second is made → lost, 429s, and how long after
 *    the stream was back the last gap post became a hit (in budget windows); the searches against
 *    the fewest the query length allows (the lower bound on the windows: fewest / budget);
 * 3b. gapspent (not in the default phases): the same gap while other work on the same token keeps
 *    the search budget (BENCH_X_SEARCH_PER_MIN a minute) spent through the fleet's governor, from
 *    before the stream goes down until the gap is closed → lost, 429s, how long after the stream
 *    was back the last gap post became a hit, and what the backfill read it with (searches,
 *    timeline reads, user lookups);
 * 4. failover: replica A (the holder) loses PostgreSQL (its connections black-holed, no socket
 *    closed) while 5 posts/s keep coming → seconds until replica B's stream is connected, lost.
 *
 * X plan modelled: Pro (X_RULE_MAX_LENGTH 1,024 and X_MAX_RULES 1,000: the filtered stream at this
 * size), with recent search's documented self-serve query length, 512 characters
 * (X_QUERY_MAX_LENGTH; 4,096 is Enterprise's).
 *
 * BENCH_X_STATEMENTS=1: the burst also prints the statements sent (round trips), commits and rows
 * written per post (bench/lib/statements.ts), figures a busy machine's clock does not skew.
 *
 * Last line: `x_stream setup_per_20 <n> setup_users <n> lookups_per_min <n> burst_p50_ms <a> p99_ms <b> lost <n> gap_lost <n>
 * gap_429s <n> gap_windows <n> failover_s <n> failover_lost <n>` (with `gapspent`: `gapspent_lost <n> gapspent_429s <n>
 * gapspent_closed_s <s>` after the gap's).
 * Run alone: `npx tsx bench/realtimeStream.ts` (its own database and Redis prefix).
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { createLogger, createMetricsRegistry, loadDevEnv } from '../packages/common/src';
import { createDbClient, type Db } from '../packages/db/src';
import { AmqpClient } from '../packages/messaging/src';
import { createXSource, SourceBusyError } from '../packages/social/src';
import {
  createFakeStream,
  startFakeX,
  type FakeStream,
  type FakeX,
  type FakeXRequest,
} from '../packages/testing/src/fakeX';
import { TcpProxy } from '../packages/testing/src/proxy';
import { createVhost, deleteVhosts } from '../packages/testing/src/services';
import { createRedisLeases } from '../services/poller/src/adapters/lease';
import { createProfileRepository } from '../services/poller/src/adapters/profiles';
import { createXProfileLookup, type XProfileLookup } from '../services/poller/src/intake/profile/xLookup';
import { buildStreamMode, type StreamMode } from '../packages/x-stream/src';
import { createHitWriter } from '../services/poller/src/adapters/hitWriter';
import { createScheduleStore } from '../services/poller/src/adapters/scheduleStore';
import { createStreamPort } from '../services/poller/src/intake/stream/port';
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
const LOOKUP_SECONDS = positiveEnv('BENCH_X_LOOKUP_SECONDS', 60);
const QUERY_MAX_LENGTH = 512;
const STARTER_INTERVAL_S = 60;
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
  redis: Redis;
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

/** the fewest searches `usernames` fit in: `from:a OR from:b …` of at most `maxLength` characters */
function fewestSearches(usernames: readonly string[], maxLength: number): number {
  const or = ' OR '.length;
  const chars = usernames.reduce((n, u) => n + `from:${u}`.length + or, 0);
  return Math.ceil(chars / (maxLength + or));
}

/**
 * Requests by kind: user lookups (the account lookup's by id / by name; `usersCheck`: the user
 * cache's own lookups, e.g. the stream's account check, which ask no `protected`), rule calls,
 * searches, connects, other.
 */
function byKind(requests: readonly FakeXRequest[]): Record<string, number> {
  const out: Record<string, number> = {
    users: 0,
    usersById: 0,
    usersByName: 0,
    usersCheck: 0,
    rules: 0,
    searches: 0,
    connects: 0,
  };
  for (const r of requests) {
    if (r.family === 'users') {
      out.users!++;
      if (!(r.params.get('user.fields') ?? '').includes('protected')) out.usersCheck!++;
      else if (r.path === '/2/users') out.usersById!++;
      else if (r.path.startsWith('/2/users/by')) out.usersByName!++;
    } else if (r.family === 'rules') out.rules!++;
    else if (r.family === 'search') out.searches!++;
    else if (r.family === 'stream_connect') out.connects!++;
    else out[r.family] = (out[r.family] ?? 0) + 1;
  }
  return out;
}

async function looked(db: Db): Promise<number> {
  const [r] = await db.$queryRaw<
    { n: bigint }[]
  >`SELECT count(*) AS n FROM target_profiles WHERE checked_at IS NOT NULL`;
  return Number(r!.n);
}

async function createMonitors(db: Db, usernames: readonly string[]): Promise<number> {
  const account = await db.account.create({
    data: { email: `x-stream-${randomBytes(4).toString('hex')}@bench.test`, plan: 'starter' },
  });
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
  return Date.now() - started;
}

interface SetupResult {
  per20: number;
  users: number;
  /** the account lookup's `users` calls per minute once set up */
  lookupsPerMin: number;
}

/**
 * Phase 1: the accounts watched while the stream runs; requests per 20 accounts until they are
 * streamed, backfilled and looked at once, then the account lookup's steady state apart.
 */
async function setup(bed: Bed): Promise<SetupResult> {
  const { db, fake, stream, usernames } = bed;
  const before = fake.requests.log.length;
  const created = await createMonitors(db, usernames);
  const covered = () => new Set(stream.rules().flatMap((r) => [...r.from])).size === usernames.length;
  const ready = async () => covered() && (await owed(db)) === 0 && (await looked(db)) >= usernames.length;
  if (!(await until(ready, 180_000)))
    throw new Error('the stream did not cover, backfill and look at every account within 3 minutes');
  await sleep(3000);
  const requests = fake.requests.log.slice(before);
  const kinds = byKind(requests);
  // a first look is by name; by id is a second look of an account set up over a plan interval ago
  const setupRequests = requests.length - kinds.usersById!;
  const per20 = (setupRequests / usernames.length) * 20;
  log(
    `set-up ${ONE_BY_ONE ? 'one by one' : `in ${BATCHES} batches`} (${Math.round(created / 1000)} s of monitor creation): ` +
      `${setupRequests} requests for ${usernames.length} accounts = ${per20.toFixed(2)} per 20: ` +
      `first looks ${kinds.usersByName} (users by name), account checks ${kinds.usersCheck}, rules ${kinds.rules}, ` +
      `searches ${kinds.searches} (fewest at ${QUERY_MAX_LENGTH} characters: ${fewestSearches(usernames, QUERY_MAX_LENGTH)}), ` +
      `connects ${kinds.connects}; without the first looks ${(((setupRequests - kinds.usersByName!) / usernames.length) * 20).toFixed(2)} per 20; ` +
      `${stream.rules().length} rules; meanwhile ${kinds.usersById} second looks (users by id, the steady state's) ${JSON.stringify(kinds)}`,
  );
  const from = fake.requests.log.length;
  await sleep(LOOKUP_SECONDS * 1000);
  const steady = byKind(fake.requests.log.slice(from));
  const lookupsPerMin = (steady.users! / LOOKUP_SECONDS) * 60;
  log(
    `account lookup once set up (Starter interval ${STARTER_INTERVAL_S} s): ${steady.users} users calls in ` +
      `${LOOKUP_SECONDS} s = ${lookupsPerMin.toFixed(1)} a minute (${((lookupsPerMin * 100) / usernames.length).toFixed(1)} ` +
      `per 100 accounts a minute) ${JSON.stringify(steady)}`,
  );
  return { per20, users: kinds.usersByName!, lookupsPerMin };
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
  const fewest = fewestSearches(usernames, QUERY_MAX_LENGTH);
  log(
    `gap of ${GAP_SECONDS} s (${ids.length} posts, ${usernames.length} accounts, ${SEARCH_PER_MIN} searches/min): ` +
      `reconnected ${reconnectedS.toFixed(1)} s after the stream was back, last gap post a hit ${closedS.toFixed(1)} s after ` +
      `(${windows} window(s)), ${searches} searches (fewest at ${QUERY_MAX_LENGTH} characters: ${fewest}, so at ` +
      `least ${Math.ceil(fewest / SEARCH_PER_MIN)} window(s) of budget), lost ${lost}, 429s ${tooMany}`,
  );
  fake.limits.setLimit('search', 450);
  return { lost, tooMany, windows };
}

/** other work on the token and governor searching whenever the budget lets it; stop() resolves with its searches */
function spendSearches(bed: Bed): { spent: () => boolean; searches: () => number; stop: () => Promise<void> } {
  const other = createXSource({ baseUrl: bed.fake.url, bearerToken: 'bench-token', redis: bed.redis });
  let running = true;
  let refused = false;
  let searches = 0;
  const loop = (async () => {
    while (running) {
      try {
        await other.search('from:someone_else', { limit: 10 });
        searches++;
      } catch (err) {
        if (!(err instanceof SourceBusyError)) throw err;
        refused = true;
        await sleep(250);
      }
    }
  })();
  return {
    spent: () => refused,
    searches: () => searches,
    stop: async () => {
      running = false;
      await loop;
    },
  };
}

/** Phase 3b: the gap of phase 3 with the search budget spent by other work until it is closed. */
async function gapSpent(bed: Bed): Promise<{ lost: number; tooMany: number; closedS: number }> {
  const { db, fake, stream, usernames } = bed;
  fake.limits.setLimit('search', SEARCH_PER_MIN);
  const other = spendSearches(bed);
  try {
    if (!(await until(other.spent, 30_000))) throw new Error('other work did not spend the search budget');
    const before = fake.requests.log.length;
    const otherBefore = other.searches();
    const connects = stream.connects();
    stream.outage(true);
    const ids: string[] = [];
    await paced(1, GAP_SECONDS, (i) => {
      const author = usernames[Math.floor(Math.random() * usernames.length)]!;
      ids.push(fake.state.post({ author, text: `gap spent ${i}` }).id);
    });
    stream.outage(false);
    const back = Date.now();
    await until(() => stream.connects() > connects, 120_000);
    const reconnectedS = (Date.now() - back) / 1000;
    await until(async () => (await hitsOf(db, ids)).length >= ids.length, 5 * WINDOW_MS);
    const closedS = (Date.now() - back) / 1000;
    const lost = ids.length - (await hitsOf(db, ids)).length;
    const requests = fake.requests.log.slice(before);
    const tooMany = requests.filter((r) => r.status === 429).length;
    const kinds = byKind(requests);
    const backfillSearches = kinds.searches! - (other.searches() - otherBefore);
    const authors = new Set(
      ids.map((id) => fake.state.tweet(id)?.author_id).filter((a): a is string => a !== undefined),
    ).size;
    log(
      `gap of ${GAP_SECONDS} s with the search budget (${SEARCH_PER_MIN}/min) spent by other work (${ids.length} posts from ` +
        `${authors} of ${usernames.length} accounts): reconnected ${reconnectedS.toFixed(1)} s after the stream was back, ` +
        `last gap post a hit ${closedS.toFixed(1)} s after (a search window is ${WINDOW_MS / 1000} s), backfill searches ` +
        `${backfillSearches}, timeline reads ${kinds.timeline ?? 0}, users calls ${kinds.users} (other work's searches ` +
        `${other.searches() - otherBefore}), lost ${lost}, 429s ${tooMany}`,
    );
    return { lost, tooMany, closedS };
  } finally {
    await other.stop();
    fake.limits.setLimit('search', 450);
  }
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

/**
 * One poller replica's X part in stream mode: the stream mode and, as main.ts gives every replica
 * on X, the account lookup round (one replica at a time under its Redis lease); the round is
 * added to `lookups` for the caller to stop.
 */
function startReplica(
  r: { dbUrl: string; db: Db; fake: FakeX; redis: Redis; amqp: AmqpClient; name: string },
  lookups: XProfileLookup[],
): StreamMode {
  const { dbUrl, db, fake, redis, amqp, name } = r;
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
    X_STREAM_BACKFILL_MINUTES: 0,
    X_BACKFILL_LOOKUP: 'auto' as const,
    X_QUERY_MAX_LENGTH: QUERY_MAX_LENGTH,
    POLL_OVERLAP_SECONDS: 30,
    PLAN_FREE_POLL_INTERVAL_SECONDS: 300,
    PLAN_STARTER_POLL_INTERVAL_SECONDS: STARTER_INTERVAL_S,
  };
  const source = createXSource({ baseUrl: fake.url, bearerToken: env.X_BEARER_TOKEN, redis });
  const logger = createLogger({ service: `bench-x-stream-${name}`, level: process.env.BENCH_LOG_LEVEL ?? 'warn' });
  const mode = buildStreamMode(env, {
    db,
    source,
    port: createStreamPort({
      schedule: createScheduleStore(db),
      writer: createHitWriter(db),
      profiles: createProfileRepository(db),
      logger,
    }),
    logger,
    registry: createMetricsRegistry(`bench-x-stream-${name}`),
    amqp,
  });
  const lookup = createXProfileLookup({
    source,
    repository: createProfileRepository(db),
    leases: createRedisLeases(redis),
    logger,
    intervals: {
      plans: {
        free: { pollIntervalSec: env.PLAN_FREE_POLL_INTERVAL_SECONDS },
        starter: { pollIntervalSec: env.PLAN_STARTER_POLL_INTERVAL_SECONDS },
      },
    },
    now: () => new Date(),
    // as main.ts: a new streamed target's first look is the stream backfill's lookup
    leavesFirstLook: (t, now) => mode.leavesFirstLook(t, now),
  });
  mode.start();
  lookup.start();
  lookups.push(lookup);
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
  const lookups: XProfileLookup[] = [];
  const a = startReplica({ dbUrl: e.dbUrl, db: dbA, fake, redis, amqp: amqpA, name: 'a' }, lookups);
  let b: StreamMode | undefined;
  const out: string[] = [];
  try {
    if (!(await until(() => a.isHolder() && stream.connections() === 1, 30_000)))
      throw new Error('replica A did not connect within 30 s');
    b = startReplica({ dbUrl: e.dbUrl, db, fake, redis, amqp: amqpB, name: 'b' }, lookups);
    const bed: Bed = { db, fake, stream, a, b, proxy, redis, usernames, statements };
    if (PHASES.includes('setup')) {
      const r = await setup(bed);
      out.push(
        `setup_per_20 ${r.per20.toFixed(2)} setup_users ${r.users} lookups_per_min ${r.lookupsPerMin.toFixed(1)}`,
      );
    } else throw new Error('the set-up phase is needed by the others');
    if (PHASES.includes('burst')) {
      const r = await burst(bed);
      out.push(`burst_p50_ms ${Math.round(r.p50)} p99_ms ${Math.round(r.p99)} lost ${r.lost}`);
    }
    if (PHASES.includes('gap')) {
      const r = await gap(bed);
      out.push(`gap_lost ${r.lost} gap_429s ${r.tooMany} gap_windows ${r.windows}`);
    }
    if (PHASES.includes('gapspent')) {
      const r = await gapSpent(bed);
      out.push(`gapspent_lost ${r.lost} gapspent_429s ${r.tooMany} gapspent_closed_s ${r.closedS.toFixed(1)}`);
    }
    if (PHASES.includes('failover')) {
      const r = await failover(bed);
      out.push(`failover_s ${r.seconds.toFixed(1)} failover_lost ${r.lost}`);
    }
    console.log(`x_stream ${out.join(' ')}`);
  } finally {
    await b?.stop();
    // the account lookups first, while their looks can still be recorded, unless the failover
    // phase black-holed replica A's database (a stop would wait on calls that never answer)
    if (!PHASES.includes('failover')) await Promise.all(lookups.map((l) => l.stop()));
    // replica A's database may be black-holed: cut it so its calls fail instead of hanging
    await proxy.close();
    await a.stop();
    await Promise.all(lookups.map((l) => l.stop()));
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
