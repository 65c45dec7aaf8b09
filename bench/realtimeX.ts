/**
 * bench:realtime's X runs (modes `search` and `timeline`): the poller in this process against the
 * fake X of @sts/testing with Pro-like 15-minute windows (timeline 1,500, search 450, users 300),
 * every X call through the Redis governor. BENCH_X_TARGETS (default 1,000) targets, one Starter
 * monitor each, posts at BENCH_RATE per second for BENCH_SECONDS; prints upstream requests by
 * family, 429s, target-polls, requests per target-poll, post → hit recorded p50 / p99 and lost
 * hits (posted, no hit BENCH_X_DRAIN_SECONDS after the last post; default 90 = the Starter
 * interval and a margin). Own database and Redis prefix.
 */
import { Redis } from 'ioredis';
import { createLogger } from '../packages/common/src';
import { createDbClient, type Db } from '../packages/db/src';
import { createRedisGovernor, createXSource } from '../packages/social/src';
import { startFakeX, type FakeX } from '../packages/testing/src/fakeX';
import { createRedisLeases } from '../services/poller/src/adapters/lease';
import { createPollerRepository } from '../services/poller/src/adapters/repository';
import { createPoller, type Poller } from '../services/poller/src/poller';
import { percentile } from './lib/numbers';
import { createDatabase, deleteKeys, dropDatabase } from './lib/services';

export type XBenchMode = 'search' | 'timeline';

export interface XBenchOptions {
  adminUrl: string;
  redisUrl: string;
  prefix: string;
  targets: number;
  rate: number;
  seconds: number;
  drainSeconds: number;
  log: (msg: string) => void;
}

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
  return createPoller({
    repository: createPollerRepository(db),
    source,
    leases: createRedisLeases(redis),
    logger: createLogger({ service: 'bench-x', level: 'error' }),
    intervals: { plans: { free: { pollIntervalSec: 300 }, starter: { pollIntervalSec: 60 } } },
    concurrency: 8,
    metrics: { polls: (o) => void (o === 'ok' && polls.n++), hits: () => undefined },
    ...(mode === 'search' ? { search: { source, maxQueryLength: 512, overlapMs: 30_000 } } : {}),
  });
}

async function postSteadily(fake: FakeX, authors: readonly string[], rate: number, seconds: number) {
  const posted = new Map<string, number>();
  const total = Math.round(rate * seconds);
  const start = Date.now();
  for (let i = 0; i < total; i++) {
    const wait = start + (i * 1000) / rate - Date.now();
    if (wait > 0) await sleep(wait);
    const t = fake.state.post({ author: authors[Math.floor(Math.random() * authors.length)]!, text: `x post ${i}` });
    posted.set(t.id, Date.now());
  }
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
    const drainUntil = Date.now() + o.drainSeconds * 1000;
    let hits = await hitTimes(db, [...posted.keys()]);
    while (hits.size < posted.size && Date.now() < drainUntil) {
      await sleep(1000);
      hits = await hitTimes(db, [...posted.keys()]);
    }
    const latencies = [...posted].filter(([id]) => hits.has(id)).map(([id, at]) => hits.get(id)! - at);
    return { posted: posted.size, latencies: latencies.sort((a, b) => a - b), targetPolls: polls.n };
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
    console.log(
      `x_${mode} requests ${requests} ${JSON.stringify(fake.requests.byFamily())} 429s ${fake.requests.count({ status: 429 })} ` +
        `target_polls ${r.targetPolls} requests_per_target_poll ${(upstream / Math.max(1, r.targetPolls)).toFixed(3)} ` +
        `p50_ms ${Math.round(percentile(r.latencies, 50))} p99_ms ${Math.round(percentile(r.latencies, 99))} ` +
        `lost ${r.posted - r.latencies.length} of ${r.posted}`,
    );
  } finally {
    await fake.stop();
    redis.disconnect();
    await deleteKeys(o.redisUrl, `${o.prefix}${mode}:`);
    await db.$disconnect();
    await dropDatabase(o.adminUrl, name);
  }
}
