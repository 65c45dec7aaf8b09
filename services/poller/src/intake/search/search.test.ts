/**
 * X `search` mode against the fake X API v2 (@sts/testing startFakeX), real PostgreSQL and Redis:
 * due targets are packed into `from:` OR-queries (≤ 1 search request per 20 target-polls), each
 * target keeps its own position, a post X shows late is still recorded through the overlap window,
 * every post is exactly one hit per monitor, and a suspended account shows as last_error.
 */
import { Redis } from 'ioredis';
import { createLogger } from '@sts/common';
import { withLastCheck, type Db } from '@sts/db';
import { createRedisGovernor, createXSource, type XSource } from '@sts/social';
import { createTestRedis, type FakeX } from '@sts/testing';
import { openXTestBed, type XTestBed } from '../../../test/xTestBed';
import { tickTargets } from '../../domain/groups';
import type { Poller } from '../../poller';
import { plans, testPoller } from '../../../test/poller';

const logger = createLogger({ service: 'poller-search-test', level: 'error' });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const TARGETS = 100;

describe('poller: X search mode', () => {
  let bed: XTestBed;
  let db: Db;
  let redisHandle: XTestBed['redisHandle'];
  let redis: Redis;
  let fake: FakeX;
  let source: XSource;
  let poller: Poller;
  const users: { id: string; username: string }[] = [];
  const monitorOf = new Map<string, string>();

  beforeAll(async () => {
    bed = await openXTestBed({ poolSize: 8 });
    ({ db, redis, redisHandle, fake } = bed);
    const account = (await db.account.create({ data: { email: 'search@example.com', plan: 'starter' } })).id;
    for (let i = 0; i < TARGETS; i++) {
      const u = fake.state.addUser({ username: `Searched_${i}` });
      users.push(u);
      const m = await db.monitor.create({
        data: {
          accountId: account,
          targetUsername: u.username,
          targetKey: u.username.toLowerCase(),
          createdAt: new Date(Date.now() - 3600_000),
        },
      });
      monitorOf.set(u.username, m.id);
    }
    source = createXSource({ baseUrl: fake.url, bearerToken: 't', timeoutMs: 5000, overlapMs: 30_000, redis });
    poller = testPoller(
      { db, redis },
      {
        source,
        logger,
        intervals: { plans, overrideSec: 1 },
        concurrency: 2,
        search: { source, maxQueryLength: 512, overlapMs: 30_000 },
      },
    );
  });

  afterAll(() => bed.close());

  const searches = () => fake.requests.count({ family: 'search' });
  const timelines = () => fake.requests.count({ family: 'timeline' });

  it('polls 100 due targets with at most 1 search request per 20 targets, and no timeline read', async () => {
    fake.requests.clear();
    const r = await poller.runCycle();
    expect(r.targets).toBe(TARGETS);
    expect(r.polled).toBe(TARGETS);
    expect(searches()).toBeGreaterThan(0);
    expect(searches()).toBeLessThanOrEqual(TARGETS / 20);
    expect(timelines()).toBe(0);
    // every query stays within X_QUERY_MAX_LENGTH
    for (const q of fake.requests.log.filter((x) => x.family === 'search'))
      expect(q.params.get('query')!.length).toBeLessThanOrEqual(512);
  });

  it('every post becomes exactly one hit on its own target; a post shown late is still recorded', async () => {
    await sleep(1100); // the 1 s interval: all due again
    const posted = new Map<string, string>(); // tweet id → username
    for (let i = 0; i < 30; i++) {
      const u = users[(i * 7) % TARGETS]!;
      posted.set(fake.state.post({ author: u.id, text: `search post ${i}` }).id, u.username);
    }
    fake.requests.clear();
    await poller.runCycle();
    expect(searches()).toBeLessThanOrEqual(TARGETS / 20);
    // X shows a post 10 s old only now: behind every cursor, inside the 30 s overlap window
    const late = fake.state.post({
      author: users[3]!.id,
      text: 'shown late',
      createdAt: new Date(Date.now() - 10_000),
    });
    posted.set(late.id, users[3]!.username);
    await sleep(1100);
    await poller.runCycle();
    await sleep(1100);
    await poller.runCycle(); // read again through the window: nothing twice
    const hits = await db.hit.findMany({ where: { tweetId: { in: [...posted.keys()] } } });
    expect(hits).toHaveLength(posted.size);
    for (const h of hits) expect(h.monitorId).toBe(monitorOf.get(posted.get(h.tweetId)!));
  });

  it('a suspended account shows on its monitor as last_error; the others are still read', async () => {
    await sleep(1100);
    const gone = users[5]!;
    fake.state.suspend(gone.id);
    await redisHandle.cleanup(); // this test's keys only: the cached user resolution expires (TTL) in production; at once here
    const other = fake.state.post({ author: users[6]!.id, text: 'still read' });
    await poller.runCycle();
    const [m] = await withLastCheck(db, [
      await db.monitor.findUniqueOrThrow({ where: { id: monitorOf.get(gone.username)! } }),
    ]);
    expect(m!.lastError).toMatch(/suspended/i);
    expect(await db.hit.count({ where: { tweetId: other.id } })).toBe(1);
  });

  it('appends the rule parts X can apply only where no monitor of the target needs what they leave out', async () => {
    await sleep(1100);
    const account = (await db.account.findFirstOrThrow({ where: { email: 'search@example.com' } })).id;
    const monitor = async (u: { username: string }, rules: { excludeTypes?: string[]; langs?: string[] }) =>
      (
        await db.monitor.create({
          data: {
            accountId: account,
            targetUsername: u.username,
            targetKey: u.username.toLowerCase(),
            createdAt: new Date(Date.now() - 3600_000),
            ...rules,
          },
        })
      ).id;
    const only = fake.state.addUser({ username: 'NoReposts' });
    const mixed = fake.state.addUser({ username: 'SomeReposts' });
    const langs = fake.state.addUser({ username: 'TwoLangs' });
    const onlyM = await monitor(only, { excludeTypes: ['reposts'] });
    const mixedNo = await monitor(mixed, { excludeTypes: ['reposts'] });
    const mixedAll = await monitor(mixed, {});
    const langsM = await monitor(langs, { langs: ['en', 'de'] });
    const original = fake.state.post({ author: users[0]!.id, text: 'an original' });
    const repost = (u: { id: string }) =>
      fake.state.post({ author: u.id, text: 'RT an original', references: [{ type: 'retweeted', id: original.id }] });
    const onlyPost = fake.state.post({ author: only.id, text: 'own words' });
    repost(only);
    const mixedPost = fake.state.post({ author: mixed.id, text: 'own words' });
    const mixedRepost = repost(mixed);
    const en = fake.state.post({ author: langs.id, text: 'hello', lang: 'en' });
    const de = fake.state.post({ author: langs.id, text: 'hallo', lang: 'de' });
    fake.state.post({ author: langs.id, text: 'salut', lang: 'fr' });
    fake.requests.clear();
    await poller.runCycle();

    const queries = fake.requests.log.filter((x) => x.family === 'search').map((x) => x.params.get('query')!);
    const queryOf = (name: string) => queries.filter((q) => new RegExp(`from:${name}\\b`).test(q));
    expect(queryOf('NoReposts')).toEqual([expect.stringMatching(/^\(from:.*\) -is:retweet$/)]);
    expect(queryOf('SomeReposts')).toHaveLength(1);
    expect(queryOf('SomeReposts')[0]).not.toContain('is:');
    expect(queryOf('TwoLangs')).toEqual([expect.stringMatching(/\) \(lang:de OR lang:en\)$/)]);
    // targets of other rules are never packed into these queries
    expect(queryOf('NoReposts')[0]).not.toMatch(/from:(SomeReposts|TwoLangs|Searched_)/);
    for (const q of queries) expect(q.length).toBeLessThanOrEqual(512);

    const hitsOf = async (monitorId: string) =>
      (await db.hit.findMany({ where: { monitorId } })).map((h) => h.tweetId).sort();
    expect(await hitsOf(onlyM)).toEqual([onlyPost.id]);
    expect(await hitsOf(mixedNo)).toEqual([mixedPost.id]);
    expect(await hitsOf(mixedAll)).toEqual([mixedPost.id, mixedRepost.id].sort());
    expect(await hitsOf(langsM)).toEqual([en.id, de.id].sort());
  });

  it('a group search the fleet budget refuses is no poll: its targets stay due with last_polled_at unchanged', async () => {
    await sleep(1100);
    // a fleet whose search window has room for one request (its own Redis prefix, so its budget
    // is not the one the other tests' source learnt from X's headers)
    const fleet = createTestRedis();
    const fleetRedis = new Redis(fleet.url, { keyPrefix: fleet.prefix });
    const governor = createRedisGovernor(fleetRedis, { limits: { search: 1 }, windowMs: 60_000 });
    const short = createXSource({ baseUrl: fake.url, bearerToken: 't', timeoutMs: 5000, redis: fleetRedis, governor });
    const refusing = testPoller(
      { db, redis: fleetRedis },
      {
        source: short,
        logger,
        intervals: { plans, overrideSec: 1 },
        concurrency: 2,
        search: { source: short, maxQueryLength: 512, overlapMs: 30_000 },
      },
    );
    type Row = { target_key: string; last_polled_at: Date | null };
    const before = new Map(
      (await db.$queryRaw<Row[]>`SELECT target_key, last_polled_at FROM poll_cursors`).map((r) => [
        r.target_key,
        r.last_polled_at?.getTime(),
      ]),
    );
    fake.requests.clear();
    try {
      const r = await refusing.runCycle();
      expect(searches()).toBe(1);
      expect(fake.requests.count({ status: 429 })).toBe(0);
      expect(r.polled).toBeGreaterThan(0);
      expect(r.failed).toBe(r.targets - r.polled - r.skipped);
      expect(r.failed).toBeGreaterThan(0);
      const after = await db.$queryRaw<(Row & { due: boolean; last_error: string | null })[]>`
        SELECT c.target_key, c.last_polled_at, c.last_error, t.next_due_at <= clock_timestamp() AS due
          FROM poll_cursors c JOIN poll_targets t USING (target_key)`;
      const refused = after.filter((a) => a.last_error !== null && /budget|rate|busy/i.test(a.last_error));
      for (const a of refused) {
        expect(a.last_polled_at?.getTime()).toBe(before.get(a.target_key));
        expect(a.due).toBe(true);
      }
      // The two groups of the tick (concurrency 2) race for the one search the budget allows. When
      // the suspended account's group wins it, that account is read and fails as suspended (a poll:
      // last_polled_at moves); when it loses, it is refused like the others. Every failure is one of
      // the two, never anything else.
      const suspended = after.find((a) => a.target_key === users[5]!.username.toLowerCase())!;
      const readSuspended = !refused.includes(suspended);
      if (readSuspended) {
        expect(suspended.last_error).toMatch(/suspended/i);
        expect(suspended.last_polled_at?.getTime()).not.toBe(before.get(suspended.target_key));
      }
      expect(refused.length + (readSuspended ? 1 : 0)).toBe(r.failed);
    } finally {
      fleetRedis.disconnect();
      await fleet.cleanup();
    }
  });

  it('stream mode keeps only the Free-only targets for the tick while a stream covers the pushed ones', () => {
    const at = new Date();
    const starter = {
      targetKey: 's',
      username: 's',
      accounts: [{ plan: 'starter' as const, trialEndsAt: null }],
      lastPolledAt: null,
    };
    const free = {
      targetKey: 'f',
      username: 'f',
      accounts: [{ plan: 'free' as const, trialEndsAt: null }],
      lastPolledAt: null,
    };
    expect(tickTargets('stream', [starter, free], at, true).map((t) => t.targetKey)).toEqual(['f']);
    expect(tickTargets('stream', [starter, free], at, false).map((t) => t.targetKey)).toEqual(['s', 'f']);
    expect(tickTargets('search', [starter, free], at, true).map((t) => t.targetKey)).toEqual(['s', 'f']);
  });
});
