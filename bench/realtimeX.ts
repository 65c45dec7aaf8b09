/**
 * bench:realtime's X runs (modes `search` and `timeline`): the poller in this process against the
 * fake X of @sts/testing with Pro-like 15-minute windows (timeline 1,500, search 450, users 300),
 * every X call through the Redis governor. BENCH_X_TARGETS (default 1,000) targets, one Starter
 * monitor each, posts at BENCH_RATE per second for BENCH_SECONDS; then the poller keeps running
 * (the drain) until every post is hit or BENCH_X_DRAIN_SECONDS pass (default: `timeline` 960 =
 * one 15-minute window and a minute, since 1,000 timeline targets cannot all be read within a
 * window's 1,500 reads at 60 s each; `search` 90 = the Starter interval and a margin). Prints
 * upstream requests by family, 429s, target-polls, requests per target-poll, post → hit recorded
 * p50 / p99 over every hit, and apart: hits recorded while posting, `late` (recorded during the
 * drain) and `lost` (never recorded within the drain limit). Own database and Redis prefix.
 *
 * Run alone (quick runs): `npx tsx bench/realtimeX.ts timeline --targets 200 --seconds 60
 * --drain-seconds 300` (each flag defaults to its env variable, then to the defaults above).
 */
import { Redis } from 'ioredis';
import { createLogger, loadDevEnv } from '../packages/common/src';
import { createDbClient, type Db } from '../packages/db/src';
import { createRedisGovernor, createXSource } from '../packages/social/src';
import { startFakeX, type FakeX } from '../packages/testing/src/fakeX';
import { LOCAL_DEFAULTS, urlsFromEnv } from '../packages/testing/src/services';
import type { Poller } from '../services/poller/src/poller';
import { testPoller } from '../services/poller/test/poller';
import { percentile } from './lib/numbers';
import { paced } from './lib/pace';
import { createDatabase, deleteKeys, dropDatabase } from './lib/services';

export type XBenchMode = 'search' | 'timeline';

export interface XBenchOptions {
  adminUrl: string;
  redisUrl: string;
  prefix: string;
  targets: number;
  rate: number;
  seconds: number;
  /** how long the poller keeps running after the last post; default per mode (see above) */
  drainSeconds?: number;
  log: (msg: string) => void;
}

/** the drain limit of a mode without BENCH_X_DRAIN_SECONDS */
export const X_DRAIN_SECONDS: Record<XBenchMode, number> = { timeline: 960, search: 90 };

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function seedTargets(db: Db, fake: FakeX, n: number): Promise<string[]> {
  const account = await db.account.create({ data: { email: 'bench-x@example.com', plan: 'starter' } });
  const ids: string[] = [];
  const rows = [];
  for (let i = 0; i < n; i++) {
    const u = fake.state.addUser({ username: `xb_${i}` });
    ids.push(u.id);
    rows.push({ accountId: account.id, targetUsername: u.username, targetKey: u.username.toLowerCase() });
  }
  await db.monitor.createMany({ data: rows });
  return ids;
}

function makePoller(mode: XBenchMode, db: Db, redis: Redis, fake: FakeX, polls: { n: number }): Poller {
  const governor = createRedisGovernor(redis);
  const source = createXSource({ baseUrl: fake.url, bearerToken: 'bench', timeoutMs: 10_000, redis, governor });
  return testPoller(
    { db, redis },
    {
      source,
      logger: createLogger({ service: 'bench-x', level: 'error' }),
      concurrency: 8,
      metrics: { polls: (o) => void (o === 'ok' && polls.n++), hits: () => undefined },
      ...(mode === 'search' ? { search: { source, maxQueryLength: 512, overlapMs: 30_000 } } : {}),
    },
  );
}

async function postSteadily(fake: FakeX, authors: readonly string[], rate: number, seconds: number) {
  const posted = new Map<string, number>();
  await paced(rate, seconds, (i) => {
    const t = fake.state.post({ author: authors[Math.floor(Math.random() * authors.length)]!, text: `x post ${i}` });
    posted.set(t.id, Date.now());
  });
  return posted;
}

async function hitTimes(db: Db, ids: string[]): Promise<Map<string, number>> {
  const hits = await db.hit.findMany({ where: { tweetId: { in: ids } }, select: { tweetId: true, detectedAt: true } });
  return new Map(hits.map((h) => [h.tweetId, h.detectedAt.getTime()]));
}

async function measure(mode: XBenchMode, db: Db, redis: Redis, fake: FakeX, authors: string[], o: XBenchOptions) {
  const polls = { n: 0 };
  const poller = makePoller(mode, db, redis, fake, polls);
  await poller.start();
  try {
    // warm: every target polled once (the first minute's cycle)
    const until = Date.now() + 180_000;
    while ((await db.pollCursor.count()) < o.targets && Date.now() < until) await sleep(500);
    o.log(`${mode}: ${await db.pollCursor.count()} of ${o.targets} targets polled once; posting`);
    fake.requests.clear();
    polls.n = 0;
    const posted = await postSteadily(fake, authors, o.rate, o.seconds);
    const postingEnded = Date.now();
    const drainSeconds = o.drainSeconds ?? X_DRAIN_SECONDS[mode];
    const drainUntil = postingEnded + drainSeconds * 1000;
    let hits = await hitTimes(db, [...posted.keys()]);
    let lastReport = Date.now();
    while (hits.size < posted.size && Date.now() < drainUntil) {
      await sleep(1000);
      hits = await hitTimes(db, [...posted.keys()]);
      if (Date.now() - lastReport >= 60_000) {
        lastReport = Date.now();
        o.log(`${mode}: draining, ${posted.size - hits.size} of ${posted.size} posts not hit yet`);
      }
    }
    const latencies = [...posted].filter(([id]) => hits.has(id)).map(([id, at]) => hits.get(id)! - at);
    return {
      posted: posted.size,
      latencies: latencies.sort((a, b) => a - b),
      targetPolls: polls.n,
      late: [...hits.values()].filter((at) => at > postingEnded).length,
      drainMs: Date.now() - postingEnded,
    };
  } finally {
    await poller.stop();
  }
}

/** One X mode's run; prints its figures. */
export async function runXBench(mode: XBenchMode, o: XBenchOptions): Promise<void> {
  const name = `${o.prefix.replace(/\W/g, '_')}${mode}`;
  const db = createDbClient({ url: await createDatabase(o.adminUrl, name), poolSize: 8 });
  const redis = new Redis(o.redisUrl, { keyPrefix: `${o.prefix}${mode}:` });
  const fake = await startFakeX({ limits: { timeline: 1500, search: 450, users: 300, stream_connect: 50 } });
  try {
    const authors = await seedTargets(db, fake, o.targets);
    const r = await measure(mode, db, redis, fake, authors, o);
    const requests = fake.requests.log.filter((q) => q.family !== 'other').length;
    const upstream = fake.requests.count({ family: mode === 'search' ? 'search' : 'timeline' });
    const lost = r.posted - r.latencies.length;
    console.log(
      `x_${mode} requests ${requests} ${JSON.stringify(fake.requests.byFamily())} 429s ${fake.requests.count({ status: 429 })} ` +
        `target_polls ${r.targetPolls} requests_per_target_poll ${(upstream / Math.max(1, r.targetPolls)).toFixed(3)} ` +
        `p50_ms ${Math.round(percentile(r.latencies, 50))} p99_ms ${Math.round(percentile(r.latencies, 99))} ` +
        `hit_while_posting ${r.latencies.length - r.late} late ${r.late} lost ${lost} of ${r.posted} ` +
        `drain_s ${Math.round(r.drainMs / 1000)}`,
    );
  } finally {
    await fake.stop();
    redis.disconnect();
    await deleteKeys(o.redisUrl, `${o.prefix}${mode}:`);
    await db.$disconnect();
    await dropDatabase(o.adminUrl, name);
  }
}

/** `--name value` or `--name=value`, else the env variable, else the fallback */
function knob(flag: string, env: string, fallback: number | undefined): number | undefined {
  const args = process.argv.slice(2);
  const at = args.findIndex((a) => a === `--${flag}` || a.startsWith(`--${flag}=`));
  const raw = at < 0 ? process.env[env] : args[at]!.includes('=') ? args[at]!.split('=')[1] : args[at + 1];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`--${flag} / ${env} must be a positive number`);
  return n;
}

async function main(): Promise<void> {
  const mode = process.argv[2];
  if (mode !== 'timeline' && mode !== 'search')
    throw new Error('usage: realtimeX.ts timeline|search [--targets n] ...');
  loadDevEnv();
  const urls = { ...LOCAL_DEFAULTS, ...urlsFromEnv() };
  const id = Math.random().toString(16).slice(2, 10);
  await runXBench(mode, {
    adminUrl: urls.postgres,
    redisUrl: urls.redis,
    prefix: `bench_${id}_x_`,
    targets: knob('targets', 'BENCH_X_TARGETS', 1000)!,
    rate: knob('rate', 'BENCH_RATE', 5)!,
    seconds: knob('seconds', 'BENCH_SECONDS', 120)!,
    drainSeconds: knob('drain-seconds', 'BENCH_X_DRAIN_SECONDS', undefined),
    log: (msg) => console.log(`[bench:realtime:x] ${msg}`),
  });
}

if (require.main === module) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
