/**
 * Query monitors on the local store, on real PostgreSQL and Redis: a committed post is matched at
 * once against every active query monitor (the tweet trigger's "q <xid>" notification wakes the
 * query intake, no interval involved); each hit is recorded with its monitor.hit event in the
 * outbox (payload monitor.query set, targetUsername null), exactly once however often the post
 * is read; a paused query monitor and a post from before a monitor existed fire nothing.
 */
import type { Redis } from 'ioredis';
import { createLogger } from '@sts/common';
import { QUERY_CURSOR_KEY, type Db } from '@sts/db';
import { createLocalSource, createSocialTweet, createSocialUser } from '@sts/social';
import { waitFor, openTestStore, type TestStore } from '@sts/testing';
import type { Poller } from '../../poller';
import { testPoller } from '../../../test/poller';

const logger = createLogger({ service: 'poller-query-test', level: 'error' });

describe('query intake (local store)', () => {
  let bed: TestStore;
  let db: Db;
  let redis: Redis;
  let free: string;
  let poller: Poller;

  beforeAll(async () => {
    bed = await openTestStore({ poolSize: 8 });
    ({ db, redis } = bed);
    free = (await db.account.create({ data: { email: 'q-free@example.com' } })).id;
    for (const username of ['acme', 'spammer', 'acme_de']) await createSocialUser(db, { username, name: username });
    poller = testPoller(
      { db, redis },
      {
        source: createLocalSource({ db }),
        logger,
        // the tick would take minutes (Free: 300 s): only the query intake can be fast here
        tickMs: 60_000,
        // and no safety-net run: only the tweet trigger's notification wakes the query intake
        queryIntervalMs: 600_000,
        databaseUrl: bed.dbUrl,
      },
    );
  });

  afterAll(async () => {
    await poller.stop();
    await bed.close();
  });

  const hitsOf = (monitorId: string) => db.hit.findMany({ where: { monitorId }, orderBy: { tweetId: 'asc' } });
  const eventsOf = (monitorId: string) =>
    db.outboxEvent.findMany({ where: { payload: { path: ['monitor', 'id'], equals: monitorId } } });

  it('a committed post fires every matching query monitor at once, with the query in the payload', async () => {
    const q = await db.monitor.create({
      data: { accountId: free, query: '"new release" OR launch -giveaway lang:en' },
    });
    const fromAcme = await db.monitor.create({ data: { accountId: free, query: 'from:acme launch' } });
    const paused = await db.monitor.create({ data: { accountId: free, query: 'launch', isActive: false } });
    // a username monitor of the same author is the push's business, not the query intake's
    await poller.start();

    const t1 = await createSocialTweet(db, { authorUsername: 'acme', text: 'Launch day!', lang: 'en' });
    const t2 = await createSocialTweet(db, { authorUsername: 'spammer', text: 'launch giveaway', lang: 'en' });
    const t3 = await createSocialTweet(db, { authorUsername: 'acme_de', text: 'The new release', lang: 'en' });
    const t4 = await createSocialTweet(db, { authorUsername: 'acme_de', text: 'launch heute', lang: 'de' });
    // no tick and no safety net in this test: the notification woke it
    await waitFor(async () => (await hitsOf(q.id)).length === 2 && (await hitsOf(fromAcme.id)).length === 1, 20_000);

    expect((await hitsOf(q.id)).map((h) => h.tweetId).sort()).toEqual([t1.id, t3.id].sort());
    expect((await hitsOf(fromAcme.id)).map((h) => h.tweetId)).toEqual([t1.id]);
    expect(await hitsOf(paused.id)).toHaveLength(0);
    void t2;
    void t4;

    const events = await eventsOf(q.id);
    expect(events).toHaveLength(2);
    const payload = events.find((e) => (e.payload as { tweet: { id: string } }).tweet.id === t1.id)!.payload;
    expect(payload).toMatchObject({
      event: 'monitor.hit',
      monitor: { id: q.id, targetUsername: null, query: '"new release" OR launch -giveaway lang:en', keywords: null },
      tweet: { id: t1.id, text: 'Launch day!', authorUsername: 'acme' },
    });
    expect(events.every((e) => e.routingKey === 'monitor.hit')).toBe(true);

    // the cursor is the monitors' last check; reading everything again records nothing twice
    expect(
      (await db.pollCursor.findUniqueOrThrow({ where: { targetKey: QUERY_CURSOR_KEY } })).lastPolledAt,
    ).not.toBeNull();
    await db.pollCursor.update({ where: { targetKey: QUERY_CURSOR_KEY }, data: { position: null } });
    await poller.queries!.runOnce();
    expect(await hitsOf(q.id)).toHaveLength(2);
    expect(await eventsOf(q.id)).toHaveLength(2);
  });

  it('a monitor created after a post does not fire for it; a post after it does', async () => {
    const before = await createSocialTweet(db, { authorUsername: 'acme', text: 'rocket early', lang: 'en' });
    await new Promise((r) => setTimeout(r, 20));
    const m = await db.monitor.create({ data: { accountId: free, query: 'rocket' } });
    const after = await createSocialTweet(db, { authorUsername: 'acme', text: 'rocket late', lang: 'en' });
    await waitFor(async () => (await hitsOf(m.id)).length === 1, 20_000);
    await poller.queries!.runOnce();
    expect((await hitsOf(m.id)).map((h) => h.tweetId)).toEqual([after.id]);
    void before;
  });
});
