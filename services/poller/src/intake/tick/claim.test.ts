/**
 * Replicas divide the poller's work (real PostgreSQL and Redis):
 * - a tick claims its due targets (FOR UPDATE SKIP LOCKED, oldest due first, at most the limit):
 *   replicas claiming at once get disjoint sets, and three pollers running a cycle at once poll
 *   every due target exactly once;
 * - an outage's backlog drains oldest first, the limit a tick; claims a cycle did not reach (the
 *   budget refused) are given back at their old due time;
 * - a poll writes the target's rows, not its monitors';
 * - a post to a target of 20,000 monitors is recorded in chunks: every monitor gets exactly one
 *   hit and one event, no transaction holds them all, and a crash between chunks loses and
 *   duplicates nothing.
 */
import type { Redis } from 'ioredis';
import { createLogger } from '@sts/common';
import { createDbClient, Prisma, type Db } from '@sts/db';
import { SourceBusyError, type SocialSource } from '@sts/social';
import { createScheduleStore } from '../../adapters/scheduleStore';
import { createHitWriter } from '../../adapters/hitWriter';
import { HIT_CHUNK } from '../../domain/pipeline';
import { openTestStore, type TestStore } from '@sts/testing';
import { testPoller, type TestPollerOptions } from '../../../test/poller';
import { postBy, postingSource } from '../../../test/postingSource';

const logger = createLogger({ service: 'claim-test', level: process.env.LOG_LEVEL ?? 'error' });

/** a source with one new post per target per call (new id each time), counting its calls */
const countingSource = (calls: string[], opts: { busyAfter?: number } = {}): SocialSource =>
  postingSource((username) => {
    if (opts.busyAfter !== undefined && calls.length >= opts.busyAfter)
      throw new SourceBusyError('timeline budget exhausted', 'timeline', 60_000);
    calls.push(username.toLowerCase());
  });

describe('replicas divide the poller work', () => {
  let bed: TestStore;
  let db: Db;
  let redis: Redis;
  let accountId: string;
  let prefix = 0;

  beforeAll(async () => {
    bed = await openTestStore({ poolSize: 8 });
    ({ db, redis } = bed);
    accountId = (await db.account.create({ data: { email: 'claim@example.com', plan: 'starter' } })).id;
  });

  afterAll(() => bed.close());

  /** `n` targets of one monitor each, all due, the i-th due i seconds after the first; their keys */
  async function dueTargets(n: number): Promise<string[]> {
    const p = `c${++prefix}_`;
    await db.$executeRaw`
      INSERT INTO monitors (account_id, target_username, target_key, created_at)
      SELECT ${accountId}::uuid, ${p} || i, ${p} || i, now() - interval '1 hour' FROM generate_series(0, ${n - 1}) AS g(i)`;
    await db.$executeRaw`
      UPDATE poll_targets SET next_due_at = now() - interval '1 day' + (substr(target_key, ${p.length + 1})::int * interval '1 second')
      WHERE target_key LIKE ${`${p}%`}`;
    return Array.from({ length: n }, (_, i) => `${p}${i}`);
  }

  /** puts every target not among `keys` out of the way (each test sees only its own due set) */
  async function only(keys: string[]): Promise<void> {
    await db.$executeRaw`UPDATE poll_targets SET next_due_at = now() + interval '1 day' WHERE NOT (target_key = ANY(${keys}::text[]))`;
  }

  function makePoller(source: SocialSource, extra: Partial<TestPollerOptions> = {}) {
    return testPoller(
      { db, redis },
      {
        source,
        logger,
        concurrency: 4,
        ...extra,
      },
    );
  }

  it('replicas claiming at once get disjoint sets, oldest due first, at most the limit each', async () => {
    const keys = await dueTargets(300);
    await only(keys);
    const replicas = [0, 1, 2].map(() => createScheduleStore(createDbClient({ url: bed.dbUrl, poolSize: 2 })));
    const claimed = await Promise.all(replicas.map((r) => r.claimDue(50, 60_000)));
    const all = claimed.flatMap((c) => c.claims.map((x) => x.targetKey));
    for (const c of claimed) expect(c.claims.length).toBeLessThanOrEqual(50);
    expect(new Set(all).size).toBe(all.length); // no target claimed twice
    expect(all.length).toBe(150);
    // together they took the 150 oldest (whatever the interleaving)
    expect([...all].sort()).toEqual(keys.slice(0, 150).sort());
    // a claimed target is not due any more: the next claim takes the next oldest
    const next = await replicas[0]!.claimDue(10, 60_000);
    expect(next.claims.map((c) => c.targetKey)).toEqual(keys.slice(150, 160));
    // a release puts them back where they were
    await replicas[0]!.release(next.claims);
    const again = await replicas[1]!.claimDue(10, 60_000);
    expect(again.claims.map((c) => c.targetKey)).toEqual(keys.slice(150, 160));
    expect(again.claims.map((c) => c.dueAt)).toEqual(next.claims.map((c) => c.dueAt));
  });

  it('three pollers running a cycle at once poll every due target exactly once', async () => {
    const keys = await dueTargets(120);
    await only(keys);
    const calls: string[] = [];
    const source = countingSource(calls);
    const pollers = [0, 1, 2].map(() => makePoller(source, { claimLimit: 500 }));
    const results = await Promise.all(pollers.map((p) => p.runCycle()));
    expect([...calls].sort()).toEqual([...keys].sort());
    expect(results.reduce((n, r) => n + r.polled, 0)).toBe(120);
    expect(results.reduce((n, r) => n + r.skipped, 0)).toBe(0);
    // each scheduled at its next interval (Starter: 60 s), none left claimed
    const rows = await db.pollTarget.findMany({ where: { targetKey: { in: keys } } });
    for (const r of rows) expect(r.nextDueAt.getTime() - Date.now()).toBeLessThanOrEqual(60_000);
  });

  it('an outage backlog drains oldest first, the claim limit a tick', async () => {
    const keys = await dueTargets(250);
    await only(keys);
    const calls: string[] = [];
    const poller = makePoller(countingSource(calls), { claimLimit: 100, concurrency: 1 });
    const ticks: number[] = [];
    for (let i = 0; i < 3; i++) ticks.push((await poller.runCycle()).polled);
    expect(ticks).toEqual([100, 100, 50]);
    // each tick took the oldest due ones (within a tick, the fair order: all Starter, never read)
    expect(calls.slice(0, 100).sort()).toEqual(keys.slice(0, 100).sort());
    expect(calls.slice(100, 200).sort()).toEqual(keys.slice(100, 200).sort());
    expect((await poller.runCycle()).targets).toBe(0);
  });

  it('claims a refused cycle did not reach stay due at their old time; the refused one is due now', async () => {
    const keys = await dueTargets(10);
    await only(keys);
    const before = await db.pollTarget.findMany({ where: { targetKey: { in: keys } }, orderBy: { targetKey: 'asc' } });
    const calls: string[] = [];
    const poller = makePoller(countingSource(calls, { busyAfter: 3 }), { concurrency: 1 });
    const r = await poller.runCycle();
    expect(r.polled).toBe(3);
    expect(r.failed).toBe(1); // the refused one; the tick then takes no further target
    const after = await db.pollTarget.findMany({ where: { targetKey: { in: keys } }, orderBy: { targetKey: 'asc' } });
    const polled = new Set(calls);
    const byKey = new Map(before.map((b) => [b.targetKey, b.nextDueAt.getTime()]));
    const untouched = after.filter((a) => !polled.has(a.targetKey) && a.nextDueAt.getTime() === byKey.get(a.targetKey));
    expect(untouched).toHaveLength(6); // released: in their old place
    const refused = after.filter((a) => !polled.has(a.targetKey) && a.nextDueAt.getTime() !== byKey.get(a.targetKey));
    expect(refused).toHaveLength(1);
    expect(refused[0]!.nextDueAt.getTime()).toBeLessThanOrEqual(Date.now()); // due now, no poll
  });

  describe('a target of 20,000 monitors', () => {
    const WATCHERS = 20_000;
    const target = 'popular';

    beforeAll(async () => {
      // 20,000 trigger runs on one schedule row: longer than a service's statement timeout on a busy machine
      const seeder = createDbClient({ url: bed.dbUrl, poolSize: 1 });
      try {
        await seeder.$transaction(
          async (tx) => {
            await tx.$executeRaw`SET LOCAL statement_timeout = '300s'`;
            await tx.$executeRaw`
              INSERT INTO monitors (account_id, target_username, target_key, created_at)
              SELECT ${accountId}::uuid, ${target}, ${target}, now() - interval '1 hour' FROM generate_series(1, ${WATCHERS})`;
          },
          { maxWait: 60_000, timeout: 300_000 },
        );
      } finally {
        await seeder.$disconnect();
      }
    }, 300_000);

    /** the target's monitors by how many hits and events each has: "<hits>/<events>" → monitors */
    async function perMonitor(): Promise<Record<string, number>> {
      const rows = await db.$queryRaw<{ k: string; n: number }[]>`
        WITH h AS (SELECT monitor_id, count(*) AS n FROM hits GROUP BY monitor_id),
             o AS (SELECT (payload->'monitor'->>'id')::uuid AS monitor_id, count(*) AS n FROM outbox GROUP BY 1)
        SELECT coalesce(h.n, 0) || '/' || coalesce(o.n, 0) AS k, count(*)::int AS n
        FROM monitors m LEFT JOIN h ON h.monitor_id = m.id LEFT JOIN o ON o.monitor_id = m.id
        WHERE m.target_key = ${target} GROUP BY 1`;
      return Object.fromEntries(rows.map((r) => [r.k, r.n]));
    }

    it('records a post as one hit and one event per monitor, in chunks, without writing the monitors', async () => {
      await only([target]);
      const monitorsBefore = await db.$queryRaw<{ xmin: string }[]>`
        SELECT DISTINCT xmin::text FROM monitors WHERE target_key = ${target}`;
      const calls: string[] = [];
      const t0 = performance.now();
      const r = await makePoller(countingSource(calls)).runCycle();
      logger.info('recorded a post to 20,000 monitors', { ms: Math.round(performance.now() - t0) });
      expect(calls).toEqual([target]);
      expect(r.hits).toBe(WATCHERS);
      expect(await perMonitor()).toEqual({ '1/1': WATCHERS });
      // the hits were written by several transactions, none holding them all
      const txs = await db.$queryRaw<{ n: number; biggest: number }[]>`
        SELECT count(*)::int AS n, max(c)::int AS biggest
        FROM (SELECT h.xmin::text, count(*) AS c FROM hits h JOIN monitors m ON m.id = h.monitor_id
              WHERE m.target_key = ${target} GROUP BY 1) x`;
      expect(txs[0]!.n).toBe(Math.ceil(WATCHERS / HIT_CHUNK));
      expect(txs[0]!.biggest).toBeLessThanOrEqual(HIT_CHUNK);
      // the poll wrote the target's rows only: no monitor row changed
      const monitorsAfter = await db.$queryRaw<{ xmin: string }[]>`
        SELECT DISTINCT xmin::text FROM monitors WHERE target_key = ${target}`;
      expect(monitorsAfter).toEqual(monitorsBefore);
      const cursor = await db.pollCursor.findUniqueOrThrow({ where: { targetKey: target } });
      expect(cursor.lastPolledAt).toBeInstanceOf(Date);
    });

    /** the target's interval has passed since its last poll */
    async function dueAgain(): Promise<void> {
      const ago = new Date(Date.now() - 120_000);
      await db.pollCursor.update({ where: { targetKey: target }, data: { lastPolledAt: ago, lastSuccessAt: ago } });
      await db.pollTarget.update({ where: { targetKey: target }, data: { nextDueAt: ago } });
    }

    it('a crash between chunks loses nothing and duplicates nothing: the next poll records the rest', async () => {
      await only([target]);
      await dueAgain();
      const cursorBefore = await db.pollCursor.findUniqueOrThrow({ where: { targetKey: target } });
      // one post, read twice (the first poll dies at its 6th chunk, before its cursor moved)
      const post = postBy(target, 'again');
      const calls: string[] = [];
      const source: SocialSource = {
        ...countingSource(calls),
        pollTweets: () => (
          calls.push(target),
          Promise.resolve({ tweets: [post], position: `x.${post.id}`, more: false })
        ),
      };
      // the 6th chunk statement (each chunk but the last is one statement on the pool) fails
      let chunks = 0;
      const crashing = new Proxy(db, {
        get(obj, prop, receiver) {
          if (prop === '$queryRaw')
            return (query: Prisma.Sql | TemplateStringsArray, ...values: unknown[]) => {
              if (query instanceof Prisma.Sql && query.sql.includes('INSERT INTO hits') && ++chunks === 6)
                return Promise.reject(new Error('connection lost'));
              const raw = obj.$queryRaw.bind(obj) as (...args: unknown[]) => Promise<unknown>;
              return raw(query, ...values);
            };
          return Reflect.get(obj, prop, receiver) as unknown;
        },
      });
      const first = await makePoller(source, { writer: createHitWriter(crashing) }).runCycle();
      expect(first.failed).toBe(1);
      const partial = await db.$queryRaw<{ n: number }[]>`
        SELECT count(*)::int AS n FROM hits WHERE tweet_id = ${post.id}`;
      // chunks 1–5 committed, and the one the other lane ran beside the 6th (CHUNK_LANES = 2)
      const committed = partial[0]!.n;
      expect([5 * HIT_CHUNK, 6 * HIT_CHUNK]).toContain(committed);
      // the cursor did not move: the failed poll's error is on it, its position is the old one
      const cursorMid = await db.pollCursor.findUniqueOrThrow({ where: { targetKey: target } });
      expect(cursorMid.position).toBe(cursorBefore.position);
      expect(cursorMid.lastError).toBe('connection lost');

      await dueAgain();
      const second = await makePoller(source).runCycle();
      expect(second.hits).toBe(WATCHERS - committed); // only the ones not yet recorded are new
      expect(await perMonitor()).toEqual({ '2/2': WATCHERS }); // this post and the previous one
      const cursorAfter = await db.pollCursor.findUniqueOrThrow({ where: { targetKey: target } });
      expect(cursorAfter.position).toBe(`x.${post.id}`);
      expect(cursorAfter.lastError).toBeNull();
    });
  });
});
