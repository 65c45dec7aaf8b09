/**
 * Poller benchmark: BENCH_MONITORS monitors (default 10,000) over BENCH_TARGETS targets (default
 * 1,000), seeded in SQL (generate_series; 1,000,000 monitors in seconds).
 * - idle_tick_ms: the median of 50 ticks with nothing due (every target scheduled ahead): what a
 *   replica pays every second; it reads the schedule's index only.
 * - the cycle (BENCH_CYCLE=0 skips it): every target due, one poll cycle against a counting
 *   source; the poller must make one source call per target, however many monitors watch each.
 * - replicas (BENCH_REPLICAS=1|3, default 1; BENCH_ROUNDS rounds, default 3): every target due
 *   once, BENCH_REPLICAS pollers (each its own connections) tick until each target is polled;
 *   reports the rows PostgreSQL read from `monitors` and `poll_targets` per target-poll
 *   (pg_stat_user_tables seq_tup_read + idx_tup_fetch, read after the pollers disconnected so
 *   their counters are flushed) and the targets polled more or less than once.
 * - outage (BENCH_OUTAGE=1): BENCH_OUTAGE_TARGETS targets (default 100,000), one monitor each, all
 *   due at once with the i-th due i ms after the first; the pollers tick for BENCH_OUTAGE_SECONDS
 *   (default 15): reports the slowest tick query (each raw query of the tick timed on its own),
 *   targets drained, and polls out of due order (beyond one claim's slack).
 * - fan-out (BENCH_FANOUT=1, only this part): BENCH_FANOUT_WATCHERS monitors (default 20,000) on
 *   one target of the local store, a poller listening for its tweets (the push) and the outbox
 *   relay with an in-memory publisher (the relay's PostgreSQL work, no broker); BENCH_FANOUT_POSTS
 *   posts (default 5), one at a time: post (its createdAt) → the poll's last hit committed, and
 *   post → every event relayed. Prints each post and the medians.
 * Runs standalone (`npm run bench:poller`) or through bench/pipeline.ts.
 * Uses its own database on postgresql://postgres@127.0.0.1:5432 and Redis key prefix; removes both.
 */
import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { Redis } from 'ioredis';
import { createLogger, loadDevEnv } from '../packages/common/src';
import { createLocalSource, createSocialTweet, createSocialUser } from '../packages/social/src';
import { createOutboxRelay } from '../services/poller/src/relay/relay';
import { createDbClient, type Db } from '../packages/db/src';
import { plans, testPoller } from '../services/poller/test/poller';
import { postingSource } from '../services/poller/test/postingSource';
import { percentile, positiveEnv } from './lib/numbers';
import { createDatabase, deleteKeys, dropDatabase, postgresAdminUrl, redisUrl } from './lib/services';

const MONITORS = positiveEnv('BENCH_MONITORS', 10_000, { whole: true });
const TARGETS = positiveEnv('BENCH_TARGETS', 1_000, { whole: true });
const REPLICAS = positiveEnv('BENCH_REPLICAS', 1, { whole: true });
const ROUNDS = positiveEnv('BENCH_ROUNDS', 3, { whole: true });
const OUTAGE_TARGETS = positiveEnv('BENCH_OUTAGE_TARGETS', 100_000, { whole: true });
const OUTAGE_SECONDS = positiveEnv('BENCH_OUTAGE_SECONDS', 15);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const logger = createLogger({ service: 'bench', level: 'error' });

/**
 * The monitors, and their schedule rows written in one statement: the row trigger would upsert
 * poll_targets once per monitor, so it is off during the load (the bench's own database) and the
 * rows it would have written are inserted at once. Every target is scheduled ahead (idle).
 */
async function seed(
  url: string,
  accountId: string,
  created: Date,
  { monitors, targets }: { monitors: number; targets: number } = { monitors: MONITORS, targets: TARGETS },
): Promise<void> {
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
      [accountId, targets, created, monitors],
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

/** rows PostgreSQL has read from monitors and poll_targets (sequential + index fetches) */
async function rowsRead(url: string): Promise<number> {
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    const r = await c.query<{ n: string }>(
      `SELECT sum(seq_tup_read + coalesce(idx_tup_fetch, 0))::text AS n FROM pg_stat_user_tables
       WHERE relname IN ('monitors', 'poll_targets')`,
    );
    return Number(r.rows[0]!.n);
  } finally {
    await c.end();
  }
}

async function sql(url: string, text: string): Promise<void> {
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    await c.query('SET statement_timeout = 0');
    await c.query(text);
  } finally {
    await c.end();
  }
}

/** A Db whose raw queries (the tick's: claim, targets, release, reschedule) are timed one by one. */
function timedDb(db: Db, times: Map<string, number[]>): Db {
  return new Proxy(db, {
    get(obj, prop, receiver) {
      if (prop === '$queryRaw' || prop === '$executeRaw') {
        const fn = Reflect.get(obj, prop, receiver) as (...a: unknown[]) => PromiseLike<unknown>;
        return async (...args: unknown[]) => {
          const t0 = performance.now();
          const out = await fn.apply(obj, args);
          // by the SQL's first words
          const label = String((args[0] as readonly string[])[0])
            .trim()
            .replace(/\s+/g, ' ')
            .slice(0, 40);
          times.set(label, [...(times.get(label) ?? []), performance.now() - t0]);
          return out;
        };
      }
      return Reflect.get(obj, prop, receiver) as unknown;
    },
  });
}

interface FleetRun {
  /** polls per target key */
  polls: Map<string, number>;
  /** every raw tick query's time, ms, by its SQL's first words */
  queryMs: Map<string, number[]>;
  /** the order targets were polled in */
  order: string[];
}

/**
 * `replicas` pollers, each with its own PostgreSQL and Redis connections, ticking every `tickMs`
 * until `done()` (then `extraTicks` more each, the steady state's idle ticks); disconnects them.
 */
async function runFleet(
  url: string,
  prefix: string,
  opts: { replicas: number; tickMs: number; done: (run: FleetRun) => boolean; extraTicks: number; deadlineMs: number },
): Promise<FleetRun> {
  const run: FleetRun = { polls: new Map(), queryMs: new Map(), order: [] };
  const source = postingSource((u) => {
    run.polls.set(u, (run.polls.get(u) ?? 0) + 1);
    run.order.push(u);
  }, 'we launch today');
  const members = Array.from({ length: opts.replicas }, () => {
    const db = createDbClient({ url, poolSize: 4 });
    const redis = new Redis(redisUrl(), { keyPrefix: prefix });
    const poller = testPoller(
      { db: timedDb(db, run.queryMs), redis },
      {
        source,
        logger,
        // nothing becomes due again during the run: each target is due once
        intervals: { plans, overrideSec: 3600 },
        concurrency: 8,
      },
    );
    return { db, redis, poller };
  });
  // connections open before the run: a tick query's time is the query's, not a connect's
  await Promise.all(members.map((m) => Promise.all([0, 1, 2, 3].map(() => m.db.$queryRaw`SELECT 1`))));
  const deadline = Date.now() + opts.deadlineMs;
  // at the deadline a cycle in progress stops taking targets (a tick of the unbounded due read
  // would otherwise poll the whole backlog first)
  const timer = setTimeout(() => void Promise.all(members.map((m) => m.poller.stop())), opts.deadlineMs);
  await Promise.all(
    members.map(async ({ poller }) => {
      let extra = opts.extraTicks;
      while (Date.now() < deadline && (!opts.done(run) || extra-- > 0)) {
        await poller.runCycle();
        await sleep(opts.tickMs);
      }
    }),
  );
  clearTimeout(timer);
  for (const m of members) {
    await m.db.$disconnect();
    m.redis.disconnect();
  }
  return run;
}

/** every target due now, its last poll an interval ago (so the tick's re-evaluation polls it) */
async function allDue(url: string, stagger: boolean): Promise<void> {
  await sql(
    url,
    `UPDATE poll_cursors SET last_polled_at = now() - interval '2 hours', last_success_at = now() - interval '2 hours';
     UPDATE poll_targets SET next_due_at = now() - interval '1 hour'
       + ${stagger ? "substr(target_key, 8)::int * interval '1 millisecond'" : "interval '0'"}
     WHERE active_monitors > 0`,
  );
}

/** BENCH_REPLICAS pollers over BENCH_TARGETS targets all due once: rows read per target-poll (median of rounds) */
export async function measureReplicas(): Promise<{ rowsPerPoll: number[]; misses: number[]; ms: number[] }> {
  const admin = postgresAdminUrl();
  const name = `sts_bench_${randomBytes(4).toString('hex')}`;
  const url = await createDatabase(admin, name);
  const prefix = `bench:${name}:`;
  const out = { rowsPerPoll: [] as number[], misses: [] as number[], ms: [] as number[] };
  try {
    const db = createDbClient({ url, poolSize: 2 });
    const account = await db.account.create({ data: { email: 'bench@example.com', plan: 'starter' } });
    await db.$disconnect();
    await seed(url, account.id, new Date(Date.now() - 3600_000));
    for (let round = 0; round < ROUNDS; round++) {
      await allDue(url, false);
      await sleep(300);
      const before = await rowsRead(url);
      const t0 = performance.now();
      const run = await runFleet(url, prefix, {
        replicas: REPLICAS,
        tickMs: 1000,
        done: (r) => r.polls.size >= TARGETS,
        extraTicks: 2,
        deadlineMs: 300_000,
      });
      out.ms.push(performance.now() - t0);
      await sleep(500);
      const read = (await rowsRead(url)) - before;
      const polls = [...run.polls.values()].reduce((a, b) => a + b, 0);
      out.rowsPerPoll.push(read / polls);
      // targets polled other than exactly once
      out.misses.push(TARGETS - [...run.polls.values()].filter((n) => n === 1).length);
    }
    return out;
  } finally {
    await deleteKeys(redisUrl(), prefix);
    await dropDatabase(admin, name);
  }
}

/** An outage: BENCH_OUTAGE_TARGETS targets all due at once; the slowest tick query and the drain order. */
export async function measureOutage(): Promise<{
  maxQueryMs: number;
  p50QueryMs: number;
  byQuery: string;
  drained: number;
  outOfOrder: number;
}> {
  const admin = postgresAdminUrl();
  const name = `sts_bench_${randomBytes(4).toString('hex')}`;
  const url = await createDatabase(admin, name);
  const prefix = `bench:${name}:`;
  try {
    const db = createDbClient({ url, poolSize: 2 });
    const account = await db.account.create({ data: { email: 'bench@example.com', plan: 'starter' } });
    await db.$disconnect();
    await seed(url, account.id, new Date(Date.now() - 3600_000), { monitors: OUTAGE_TARGETS, targets: OUTAGE_TARGETS });
    await allDue(url, true);
    const run = await runFleet(url, prefix, {
      replicas: REPLICAS,
      tickMs: 1000,
      done: () => false,
      extraTicks: 0,
      deadlineMs: OUTAGE_SECONDS * 1000,
    });
    // due order is the number in the key (target_<i> due i ms after target_0); a poll is in order
    // when its target is among the oldest (polls so far + one claim per replica) due
    const slack = 200 * REPLICAS;
    let outOfOrder = 0;
    run.order.forEach((key, i) => {
      if (Number(key.slice('target_'.length)) >= i + 1 + slack) outOfOrder++;
    });
    const sorted = [...run.queryMs.values()].flat().sort((a, b) => a - b);
    const byQuery = [...run.queryMs]
      .map(([label, ms]) => `${label}…: n ${ms.length} max ${Math.max(...ms).toFixed(1)}`)
      .join('; ');
    return {
      maxQueryMs: sorted.at(-1) ?? NaN,
      p50QueryMs: percentile(sorted, 50),
      byQuery,
      drained: run.polls.size,
      outOfOrder,
    };
  } finally {
    await deleteKeys(redisUrl(), prefix);
    await dropDatabase(admin, name);
  }
}

const FANOUT_WATCHERS = positiveEnv('BENCH_FANOUT_WATCHERS', 20_000, { whole: true });
const FANOUT_POSTS = positiveEnv('BENCH_FANOUT_POSTS', 5, { whole: true });

/** resolves when `check()` holds (polled every 5 ms), rejects after `ms` */
async function until(check: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

/** One post to a target of BENCH_FANOUT_WATCHERS monitors, BENCH_FANOUT_POSTS times: ms to the last hit, to the last event relayed. */
export async function measureFanout(): Promise<{ hitMs: number[]; relayedMs: number[] }> {
  const admin = postgresAdminUrl();
  const name = `sts_bench_${randomBytes(4).toString('hex')}`;
  const url = await createDatabase(admin, name);
  const prefix = `bench:${name}:`;
  const db = createDbClient({ url, poolSize: 10 });
  const redis = new Redis(redisUrl(), { keyPrefix: prefix });
  const out = { hitMs: [] as number[], relayedMs: [] as number[] };
  try {
    const account = await db.account.create({ data: { email: 'bench@example.com', plan: 'starter' } });
    await createSocialUser(db, { username: 'target_0', name: 'Popular' });
    // half the monitors with a keyword, half without; the post matches both
    await seed(url, account.id, new Date(Date.now() - 3600_000), { monitors: FANOUT_WATCHERS, targets: 1 });
    // a Starter target its polls have marked pushed: the tweet trigger notifies its posts
    await db.$executeRaw`UPDATE poll_targets SET pushed = true`;
    let hitAt = 0;
    let hits = 0;
    let relayedAt = 0;
    let relayed = 0;
    const poller = testPoller(
      { db, redis },
      {
        source: createLocalSource({ db }),
        logger,
        databaseUrl: url,
        metrics: {
          polls: (o) => {
            if (process.env.BENCH_DEBUG) console.log('poll', o, hits);
          },
          hits: () => undefined,
          detected: (found) => {
            hits += found.length;
            hitAt = Date.now();
          },
        },
      },
    );
    const relay = createOutboxRelay({
      db,
      publisher: { publish: () => Promise.resolve() },
      logger,
      databaseUrl: url,
      onPublished: (n) => {
        relayed += n;
        relayedAt = Date.now();
      },
    });
    await relay.start();
    await poller.start();
    for (let i = 0; i < FANOUT_POSTS; i++) {
      await sleep(1000);
      const tweet = await createSocialTweet(db, { authorUsername: 'target_0', text: `we launch today, take ${i}` });
      const posted = tweet.createdAt.getTime();
      const want = FANOUT_WATCHERS * (i + 1);
      await until(() => hits >= want, 120_000, 'the hits');
      await until(() => relayed >= want, 120_000, 'the relay');
      out.hitMs.push(hitAt - posted);
      out.relayedMs.push(relayedAt - posted);
      console.log(
        `fanout post ${i + 1}: post → last hit ${hitAt - posted} ms, post → last event relayed ${relayedAt - posted} ms`,
      );
    }
    await poller.stop();
    await relay.stop();
    return out;
  } finally {
    await db.$disconnect();
    redis.disconnect();
    await deleteKeys(redisUrl(), prefix);
    await dropDatabase(admin, name);
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
    const source = postingSource(() => calls++, 'we launch today');
    const poller = testPoller(
      { db, redis },
      {
        source,
        logger,
        // the fixture's plan intervals; the cycle polls every target (all are new, so all are due)
        concurrency: 16,
      },
    );
    await poller.runCycle(); // warm-up (connections, plans)
    const idleTickMs = await idleTicks(poller, 50);
    let cycleMs = NaN;
    if (runTheCycle) {
      await db.$executeRaw`UPDATE poll_targets SET next_due_at = now()`;
      // a cycle claims at most its claim limit (200): the due set is drained in several
      const t0 = performance.now();
      let hits = 0;
      for (let r = await poller.runCycle(); r.hits > 0; r = await poller.runCycle()) hits += r.hits;
      cycleMs = performance.now() - t0;
      if (hits !== MONITORS) throw new Error(`expected ${MONITORS} hits, recorded ${hits}`);
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
  const med = (xs: number[]) =>
    percentile(
      [...xs].sort((a, b) => a - b),
      50,
    );
  if (process.env.BENCH_FANOUT === '1')
    measureFanout().then(
      (f) =>
        console.log(
          `fanout ${FANOUT_WATCHERS} watchers, ${FANOUT_POSTS} posts: post_to_last_hit_ms p50 ${med(f.hitMs).toFixed(0)} ` +
            `post_to_relayed_ms p50 ${med(f.relayedMs).toFixed(0)}`,
        ),
      (err: unknown) => {
        console.error(err);
        process.exit(1);
      },
    );
  // BENCH_IDLE=0: only the replicas and outage parts
  else
    (process.env.BENCH_IDLE === '0' ? Promise.resolve(null) : measurePollerCycle())
      .then(async (r) => {
        if (r) {
          console.log(`monitors ${r.monitors} targets ${r.targets} seed_ms ${r.seedMs.toFixed(0)}`);
          console.log(`idle_tick_ms ${r.idleTickMs.toFixed(2)} (median of 50 ticks with nothing due)`);
          if (Number.isNaN(r.cycleMs)) console.log('cycle skipped (BENCH_CYCLE=0)');
          else {
            console.log(`cycle_ms ${r.cycleMs.toFixed(0)} (${r.monitors} hits recorded with their events)`);
            console.log(`source_calls_per_cycle ${r.sourceCallsPerCycle}`);
          }
        }
        if (process.env.BENCH_REPLICAS_SKIP === '1') return;
        const rep = await measureReplicas();
        console.log(
          `replicas ${REPLICAS}: rows_read_per_target_poll ${med(rep.rowsPerPoll).toFixed(1)} (median of ${ROUNDS} rounds: ${rep.rowsPerPoll.map((x) => x.toFixed(1)).join(', ')}); ` +
            `targets not polled exactly once ${rep.misses.join(', ')}; round_ms ${rep.ms.map((x) => x.toFixed(0)).join(', ')}`,
        );
        if (process.env.BENCH_OUTAGE !== '1') return;
        const o = await measureOutage();
        console.log(
          `outage ${OUTAGE_TARGETS} targets due at once, ${REPLICAS} replica(s), ${OUTAGE_SECONDS} s: max_tick_query_ms ${o.maxQueryMs.toFixed(1)} ` +
            `p50 ${o.p50QueryMs.toFixed(1)}; drained ${o.drained}; polls out of due order ${o.outOfOrder}`,
        );
        console.log(`outage tick queries: ${o.byQuery}`);
      })
      .catch((err: unknown) => {
        console.error(err);
        process.exit(1);
      });
}
