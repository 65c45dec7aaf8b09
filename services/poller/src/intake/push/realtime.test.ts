/**
 * The push and the per-target schedule on real PostgreSQL and Redis:
 * - push: a committed tweet of a Starter (or trial) target wakes its poll long before the plan
 *   interval (60 s); a replica that does not hold the target's lease leaves it; bursts coalesce;
 *   a slow writer's tweet pushed behind faster ones is still recorded exactly once;
 * - a Free-only target stays on its plan interval (no push);
 * - the schedule (poll_targets) follows monitor create / pause / resume / delete and plan
 *   changes, and a tick reads only the due targets.
 */
import { Client } from 'pg';
import type { Redis } from 'ioredis';
import { createLogger } from '@sts/common';
import { snowflakeId } from '@sts/core';
import type { Db } from '@sts/db';
import { createLocalSource, createSocialTweet, createSocialUser, type SocialSource } from '@sts/social';
import { waitFor, openTestStore, type TestStore } from '@sts/testing';
import { createRedisLeases } from '../../adapters/lease';
import { createScheduleStore, type ScheduleStore } from '../../adapters/scheduleStore';
import type { Poller } from '../../poller';
import { testPoller, type TestPollerOptions } from '../../../test/poller';

const logger = createLogger({ service: 'poller-realtime-test', level: 'error' });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
// the plan defaults: without push a Starter target would wait up to 60 s, a Free one 300 s
/** the schedule's 'never due' (no active monitor) */
const NEVER = new Date('9999-12-31T00:00:00Z');

describe('poller: push and schedule', () => {
  let bed: TestStore;
  let db: Db;
  let redis: Redis;
  let starter: string;
  let free: string;
  let seq = 0;
  let calls: string[];
  let source: SocialSource;
  const running: Poller[] = [];

  beforeAll(async () => {
    bed = await openTestStore({ poolSize: 8 });
    ({ db, redis } = bed);
    starter = (await db.account.create({ data: { email: 'rt-starter@example.com', plan: 'starter' } })).id;
    free = (await db.account.create({ data: { email: 'rt-free@example.com' } })).id;
    const local = createLocalSource({ db });
    source = {
      ...local,
      pollTweets: (username, request) => {
        calls.push(username.toLowerCase());
        return local.pollTweets(username, request);
      },
    };
  });

  beforeEach(() => {
    calls = [];
  });

  afterEach(async () => {
    await Promise.all(running.splice(0).map((p) => p.stop()));
  });

  afterAll(() => bed.close());

  function makePoller(extra: Partial<TestPollerOptions> = {}) {
    return testPoller(
      { db, redis },
      {
        source,
        logger,
        concurrency: 4,
        tickMs: 100,
        ...extra,
      },
    );
  }

  async function startPoller(extra: Partial<TestPollerOptions> = {}): Promise<Poller> {
    const p = makePoller({ databaseUrl: bed.dbUrl, ...extra });
    running.push(p);
    await p.start();
    return p;
  }

  async function newTarget(): Promise<string> {
    const username = `rt_${++seq}_${Math.random().toString(36).slice(2, 6)}`;
    await createSocialUser(db, { username, name: username });
    return username;
  }

  async function monitor(target: string, account: string) {
    return db.monitor.create({ data: { accountId: account, targetUsername: target, targetKey: target } });
  }

  const polls = (target: string) => calls.filter((c) => c === target).length;
  const schedule = (target: string) => db.pollTarget.findUniqueOrThrow({ where: { targetKey: target } });

  /** the target's first poll (a new target is due at once) and its schedule written (a tick's claim moves it too) */
  async function firstPolled(target: string): Promise<void> {
    await waitFor(
      async () =>
        (await db.pollCursor.findUnique({ where: { targetKey: target } }))?.lastPolledAt != null &&
        (await schedule(target)).nextDueAt.getTime() > Date.now() + 30_000,
      10_000,
    );
  }

  it('a committed tweet of a Starter target wakes its poll at once (the interval is 60 s)', async () => {
    const target = await newTarget();
    const m = await monitor(target, starter);
    await startPoller();
    await firstPolled(target);
    expect((await schedule(target)).pushed).toBe(true);
    const before = polls(target);
    const t0 = Date.now();
    const tweet = await createSocialTweet(db, { authorUsername: target, text: 'pushed at once' });
    await waitFor(async () => (await db.hit.count({ where: { monitorId: m.id, tweetId: tweet.id } })) === 1, 10_000);
    expect(Date.now() - t0).toBeLessThan(10_000); // the interval poll would have taken up to 60 s
    expect(polls(target)).toBeGreaterThan(before);
    expect(await db.outboxEvent.count({ where: { payload: { path: ['monitor', 'id'], equals: m.id } } })).toBe(1);
  });

  it('a trial account counts as Starter: its target is pushed', async () => {
    const trial = (
      await db.account.create({
        data: { email: `rt-trial-${seq}@example.com`, trialEndsAt: new Date(Date.now() + 86_400_000) },
      })
    ).id;
    const target = await newTarget();
    const m = await monitor(target, trial);
    await startPoller();
    await firstPolled(target);
    const tweet = await createSocialTweet(db, { authorUsername: target, text: 'trial push' });
    await waitFor(async () => (await db.hit.count({ where: { monitorId: m.id, tweetId: tweet.id } })) === 1, 10_000);
  });

  it('a replica that does not hold the lease leaves the target to the one that does', async () => {
    const target = await newTarget();
    const m = await monitor(target, starter);
    await startPoller();
    await startPoller();
    await firstPolled(target);
    // "another replica" holds the lease: neither poller polls the target while it does
    const leases = createRedisLeases(redis);
    const token = await leases.acquire(target, 60_000);
    expect(token).not.toBeNull();
    const before = polls(target);
    const held = await createSocialTweet(db, { authorUsername: target, text: 'while leased' });
    await sleep(1500);
    expect(polls(target)).toBe(before);
    expect(await db.hit.count({ where: { monitorId: m.id } })).toBe(0);
    // the lease is released: the next committed tweet wakes one of them, which reads both
    await leases.release(target, token!);
    const next = await createSocialTweet(db, { authorUsername: target, text: 'after the lease' });
    await waitFor(async () => (await db.hit.count({ where: { monitorId: m.id } })) === 2, 10_000);
    const hits = await db.hit.findMany({ where: { monitorId: m.id } });
    expect(hits.map((h) => h.tweetId).sort()).toEqual([held.id, next.id].sort());
  });

  it('a Free-only target is not pushed: it stays on its plan interval', async () => {
    const target = await newTarget();
    const m = await monitor(target, free);
    await startPoller();
    await firstPolled(target);
    const row = await schedule(target);
    expect(row.pushed).toBe(false);
    const cursor = await db.pollCursor.findUniqueOrThrow({ where: { targetKey: target } });
    // next due = last poll + the Free interval (300 s)
    expect(row.nextDueAt.getTime() - cursor.lastPolledAt!.getTime()).toBe(300_000);
    const before = polls(target);
    await createSocialTweet(db, { authorUsername: target, text: 'not pushed' });
    await sleep(1500);
    expect(polls(target)).toBe(before);
    expect(await db.hit.count({ where: { monitorId: m.id } })).toBe(0);
    // a Starter monitor on the same target: re-evaluated at the next tick, then pushed
    await monitor(target, starter);
    await waitFor(async () => (await schedule(target)).pushed, 10_000);
    const pushed = await createSocialTweet(db, { authorUsername: target, text: 'now pushed' });
    await waitFor(async () => (await db.hit.count({ where: { monitorId: m.id, tweetId: pushed.id } })) === 1, 10_000);
  });

  it('bursts coalesce: many notifications for one target, one poll in flight and one follow-up', async () => {
    const target = await newTarget();
    await monitor(target, starter);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const slow: SocialSource = {
      ...source,
      pollTweets: async (username, request) => {
        await gate;
        return source.pollTweets(username, request);
      },
    };
    const poller = makePoller({ source: slow });
    running.push(poller);
    const before = polls(target);
    for (let i = 0; i < 50; i++) poller.push.wake(target, 1n);
    release();
    await waitFor(() => poller.push.idle(), 10_000);
    // the first wake-up's poll, then one follow-up for the 49 that came while it ran
    expect(polls(target) - before).toBe(2);
  });

  it('push after a slow writer: tweets behind an open transaction are recorded exactly once', async () => {
    const target = await newTarget();
    const authorId = (await db.socialUser.findUniqueOrThrow({ where: { usernameKey: target } })).id;
    const m = await monitor(target, starter);
    await startPoller();
    await startPoller();
    await firstPolled(target);
    const c = new Client({ connectionString: bed.dbUrl });
    await c.connect();
    const posted: string[] = [];
    try {
      await c.query('BEGIN');
      const slowId = snowflakeId();
      await c.query('INSERT INTO social_tweets (id, author_id, text) VALUES ($1, $2, $3)', [slowId, authorId, 'slow']);
      posted.push(slowId);
      for (let i = 0; i < 3; i++) {
        posted.push((await createSocialTweet(db, { authorUsername: target, text: `fast ${i}` })).id);
        await sleep(300);
      }
      await sleep(1000);
      await c.query('COMMIT');
    } finally {
      await c.end();
    }
    await waitFor(async () => (await db.hit.count({ where: { monitorId: m.id } })) === posted.length, 20_000);
    await sleep(1000);
    const hits = await db.hit.findMany({ where: { monitorId: m.id } });
    expect(hits.map((h) => h.tweetId).sort()).toEqual([...posted].sort());
  });

  describe('schedule', () => {
    /** a schedule store that remembers what each tick read as due */
    function recording(): { store: ScheduleStore; read: string[][] } {
      const inner = createScheduleStore(db);
      const read: string[][] = [];
      return {
        read,
        store: {
          ...inner,
          claimDue: async (limit, ttlMs) => {
            const due = await inner.claimDue(limit, ttlMs);
            read.push(due.targets.map((t) => t.targetKey));
            return due;
          },
        },
      };
    }

    it('follows create, pause, resume, delete and plan changes; a tick reads only due targets', async () => {
      const target = await newTarget();
      const account = (await db.account.create({ data: { email: 'rt-schedule@example.com' } })).id;
      const { store, read } = recording();
      const poller = makePoller({ schedule: store });
      // the tick's read time is PostgreSQL's clock, in microseconds like the triggers' stamps: a
      // change made right before a tick (even in the same millisecond) is settled by that tick
      const tick = () => poller.runCycle();
      await poller.runCycle(); // everything new is due once
      read.length = 0;
      calls = [];

      // create: due at once, polled by the next tick; then not read again until due
      const m = await monitor(target, account);
      let row = await schedule(target);
      expect(row.activeMonitors).toBe(1);
      expect(row.nextDueAt.getTime()).toBeLessThanOrEqual(Date.now());
      await tick();
      expect(read.at(-1)).toEqual([target]);
      expect(calls).toEqual([target]);
      row = await schedule(target);
      const polledAt = (await db.pollCursor.findUniqueOrThrow({ where: { targetKey: target } })).lastPolledAt!;
      expect(row.nextDueAt.getTime()).toBe(polledAt.getTime() + 300_000);
      await tick();
      expect(read.at(-1)).toEqual([]);

      // plan change (Free → Starter): re-evaluated, not polled again (polled just now), rescheduled at +60 s
      await db.account.update({ where: { id: account }, data: { plan: 'starter' } });
      expect((await schedule(target)).nextDueAt.getTime()).toBeLessThanOrEqual(Date.now());
      await tick();
      expect(read.at(-1)).toEqual([target]);
      expect(calls).toEqual([target]);
      row = await schedule(target);
      expect(row.nextDueAt.getTime()).toBe(polledAt.getTime() + 60_000);
      expect(row.pushed).toBe(true);
      await db.account.update({ where: { id: account }, data: { plan: 'free' } });
      await tick();
      row = await schedule(target);
      expect(row.nextDueAt.getTime()).toBe(polledAt.getTime() + 300_000);
      expect(row.pushed).toBe(false);

      // pause: never due; resume: due at once
      await db.monitor.update({ where: { id: m.id }, data: { isActive: false } });
      row = await schedule(target);
      expect(row.activeMonitors).toBe(0);
      expect(row.nextDueAt.getTime()).toBe(NEVER.getTime());
      await tick();
      expect(read.at(-1)).toEqual([]);
      await db.monitor.update({ where: { id: m.id }, data: { isActive: true } });
      expect((await schedule(target)).activeMonitors).toBe(1);
      await tick();
      expect(read.at(-1)).toEqual([target]);

      // delete: never due again
      await db.monitor.delete({ where: { id: m.id } });
      row = await schedule(target);
      expect(row.activeMonitors).toBe(0);
      expect(row.nextDueAt.getTime()).toBe(NEVER.getTime());
      calls = [];
      await tick();
      expect(read.at(-1)).toEqual([]);
      expect(calls).toEqual([]);
    });

    it('a change stamped while a poll ran makes the target due again at once', async () => {
      const target = await newTarget();
      await monitor(target, free);
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      let started!: () => void;
      const inPoll = new Promise<void>((r) => (started = r));
      const paused: SocialSource = {
        ...source,
        pollTweets: async (username, request) => {
          started();
          await gate;
          return source.pollTweets(username, request);
        },
      };
      const cycle = makePoller({ source: paused }).runCycle();
      await inPoll;
      await monitor(target, starter); // the poll read the target before this monitor existed
      release();
      await cycle;
      expect((await schedule(target)).nextDueAt.getTime()).toBeLessThanOrEqual(Date.now());
      await makePoller().runCycle();
      const row = await schedule(target);
      expect(row.pushed).toBe(true);
      expect(row.nextDueAt.getTime()).toBeGreaterThan(Date.now() + 30_000);
    });
  });
});
