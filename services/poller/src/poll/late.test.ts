/**
 * A tweet that becomes visible late is still recorded, exactly once.
 * - local store: slow-committing writers (a transaction that inserts a tweet, sleeps 2.5 s, then
 *   commits) beside fast ones, several rounds, two running poller replicas;
 * - X: a fake X API v2 timeline that shows an older tweet after a newer one was already polled.
 */
import { Client } from 'pg';
import type { Redis } from 'ioredis';
import { createLogger } from '@sts/common';
import { snowflakeId } from '@sts/core';
import type { Db } from '@sts/db';
import { createLocalSource, createSocialTweet, createSocialUser, createXSource, type SocialSource } from '@sts/social';
import { startFakeX, waitFor, openTestStore, type TestStore } from '@sts/testing';
import { smallPoller, testPoller, type TestPollerOptions } from '../../test/poller';

const logger = createLogger({ service: 'poller-late-test', level: 'error' });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('poller: late-visible tweets', () => {
  let bed: TestStore;
  let db: Db;
  let redis: Redis;
  let accountId: string;

  beforeAll(async () => {
    bed = await openTestStore({ poolSize: 8 });
    ({ db, redis } = bed);
    accountId = (await db.account.create({ data: { email: 'late@example.com', plan: 'starter' } })).id;
  });

  afterAll(() => bed.close());

  function makePoller(source: SocialSource, extra: Partial<TestPollerOptions> = {}) {
    return testPoller(
      { db, redis },
      {
        source,
        logger,
        ...smallPoller,
        ...extra,
      },
    );
  }

  async function monitorOn(target: string, createdAt = new Date(Date.now() - 60_000)) {
    return db.monitor.create({
      data: { accountId, targetUsername: target, targetKey: target.toLowerCase(), keywords: [], createdAt },
    });
  }

  /** Inserts a tweet in its own transaction and commits it `holdMs` later; resolves to its id. */
  async function slowTweet(authorId: string, text: string, holdMs: number): Promise<string> {
    const c = new Client({ connectionString: bed.dbUrl });
    await c.connect();
    try {
      await c.query('BEGIN');
      const id = snowflakeId();
      await c.query('INSERT INTO social_tweets (id, author_id, text) VALUES ($1, $2, $3)', [id, authorId, text]);
      await sleep(holdMs);
      await c.query('COMMIT');
      return id;
    } finally {
      await c.end();
    }
  }

  it('local store: slow writers beside fast ones, two replicas, several rounds: every tweet exactly one hit', async () => {
    const targets = ['slow_a', 'slow_b'];
    const authors = new Map<string, string>();
    for (const t of targets) authors.set(t, (await createSocialUser(db, { username: t, name: t })).id);
    const monitors = await Promise.all(targets.map((t) => monitorOn(t)));
    const source = createLocalSource({ db });
    const replicas = [makePoller(source, { tickMs: 50 }), makePoller(source, { tickMs: 50 })];
    for (const r of replicas) await r.start();
    const posted: string[] = [];
    try {
      for (let round = 0; round < 3; round++) {
        // each target: one writer holds its transaction 2.5 s while newer tweets commit at once
        const slow = targets.map((t) => slowTweet(authors.get(t)!, `round ${round} slow ${t}`, 2500));
        for (let i = 0; i < 3; i++) {
          for (const t of targets) {
            posted.push((await createSocialTweet(db, { authorUsername: t, text: `round ${round} fast ${i} ${t}` })).id);
          }
          await sleep(400);
        }
        posted.push(...(await Promise.all(slow)));
      }
      // the snapshot horizon is cluster-wide: other sessions' open transactions can delay, never lose
      await waitFor(async () => (await db.hit.count({ where: { tweetId: { in: posted } } })) === posted.length, 60_000);
      await sleep(1500); // a few more cycles: nothing is recorded twice
    } finally {
      await Promise.all(replicas.map((r) => r.stop()));
    }
    expect(posted).toHaveLength(2 * 3 * 4);
    for (const [i, m] of monitors.entries()) {
      const hits = await db.hit.findMany({ where: { monitorId: m.id } });
      expect(hits).toHaveLength(12);
      expect(new Set(hits.map((h) => h.tweetId)).size).toBe(12);
      expect(hits.every((h) => h.tweetAuthorUsername === targets[i])).toBe(true);
      expect(hits.filter((h) => h.tweetText.includes(' slow '))).toHaveLength(3);
      const events = await db.outboxEvent.findMany({ where: { payload: { path: ['monitor', 'id'], equals: m.id } } });
      expect(events).toHaveLength(12);
    }
  });

  it('X: a timeline that shows an older tweet after a newer one: both become exactly one hit and one event', async () => {
    // the fake X of @sts/testing (X's response format and limits)
    const fake = await startFakeX();
    const user = fake.state.addUser({ id: '4242', username: 'LateOnX', name: 'Late on X' });
    const post = (at: number, text: string) => fake.state.post({ author: user.id, text, createdAt: new Date(at) });
    const timelineCalls = () => fake.requests.count({ family: 'timeline' });
    try {
      const baseUrl = fake.url;
      const source = createXSource({ baseUrl, bearerToken: 't', timeoutMs: 5000, overlapMs: 30_000 });
      const m = await monitorOn(user.username, new Date(Date.now() - 3600_000));
      const poller = makePoller(source);
      const now = Date.now();
      post(now - 2_000, 'newer, shown at once');
      await poller.runCycle({ force: true });
      post(now - 10_000, 'older, shown late'); // behind the cursor
      fake.requests.clear();
      await poller.runCycle({ force: true });
      expect(timelineCalls()).toBe(1); // the window needs no extra call
      await poller.runCycle({ force: true }); // both seen again through the window: nothing new
      const hits = await db.hit.findMany({ where: { monitorId: m.id }, orderBy: { tweetCreatedAt: 'asc' } });
      expect(hits.map((h) => h.tweetText)).toEqual(['older, shown late', 'newer, shown at once']);
      const events = await db.outboxEvent.findMany({ where: { payload: { path: ['monitor', 'id'], equals: m.id } } });
      expect(events).toHaveLength(2);
    } finally {
      await fake.stop();
    }
  });
});
