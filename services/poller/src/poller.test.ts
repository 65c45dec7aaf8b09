import { Redis } from 'ioredis';
import { createLogger } from '@sts/common';
import { createDbClient, type Db } from '@sts/db';
import { AmqpClient, type Envelope } from '@sts/messaging';
import { createLocalSource, createSocialTweet, createSocialUser, type SocialSource } from '@sts/social';
import { createTestDatabase, createTestRedis, createTestVhost, waitFor } from '@sts/testing';
import { createRedisLeases } from './adapters/lease';
import { createOutboxRelay } from './adapters/relay';
import { createPollerRepository } from './adapters/repository';
import { createPoller } from './poller';

const logger = createLogger({ service: 'poller-test', level: 'error' });

describe('poller', () => {
  let dbHandle: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;
  let redisHandle: ReturnType<typeof createTestRedis>;
  let redis: Redis;
  let amqpUrl: string;
  let amqp: AmqpClient;
  const received: Envelope<'monitor.hit'>[] = [];
  let calls: string[];
  let source: SocialSource;
  let accountId: string;
  let seq = 0;

  function countingSource(inner: SocialSource): SocialSource {
    return {
      ...inner,
      name: inner.name,
      getTweetsSince: (username, sinceId, limit) => {
        calls.push(username);
        return inner.getTweetsSince(username, sinceId, limit);
      },
    };
  }

  function makePoller(src: SocialSource = source) {
    return createPoller({
      repository: createPollerRepository(db),
      source: src,
      leases: createRedisLeases(redis),
      logger,
      intervals: { freeSec: 300, starterSec: 60, overrideSec: 1 },
      concurrency: 4,
      batchSize: 5,
    });
  }

  async function newTarget(): Promise<string> {
    const username = `user_${++seq}_${Math.random().toString(36).slice(2, 6)}`;
    await createSocialUser(db, { username, name: username });
    return username;
  }

  async function monitor(target: string, keywords: string[] = [], createdAt?: Date, account = accountId) {
    return db.monitor.create({
      data: {
        accountId: account,
        targetUsername: target,
        targetKey: target.toLowerCase(),
        keywords,
        ...(createdAt ? { createdAt } : {}),
      },
    });
  }

  async function tweet(author: string, text: string, createdAt?: Date) {
    return createSocialTweet(db, { authorUsername: author, text, ...(createdAt ? { createdAt } : {}) });
  }

  async function hitsOf(monitorId: string) {
    return db.hit.findMany({ where: { monitorId }, orderBy: { tweetId: 'asc' } });
  }

  beforeAll(async () => {
    dbHandle = await createTestDatabase();
    db = createDbClient({ url: dbHandle.url, poolSize: 5 });
    redisHandle = createTestRedis();
    redis = new Redis(redisHandle.url, { keyPrefix: redisHandle.prefix });
    amqpUrl = (await createTestVhost()).url;
    amqp = new AmqpClient({ url: amqpUrl, logger, name: 'poller-test' });
    await amqp.start();
    await amqp.consume({
      queue: 'test-hits',
      bindings: ['monitor.hit'],
      handler: (env) => {
        received.push(env);
        return Promise.resolve('ack' as const);
      },
    });
    accountId = (await db.account.create({ data: { email: 'poller@example.com', plan: 'starter' } })).id;
    source = createLocalSource({ db });
  });

  beforeEach(() => {
    calls = [];
  });

  afterAll(async () => {
    await amqp.stop();
    redis.disconnect();
    await redisHandle.cleanup();
    await db.$disconnect();
    await dbHandle.drop();
  });

  it('records a hit, its outbox event and publishes the exact SPEC payload', async () => {
    const target = await newTarget();
    const m = await monitor(target);
    const t = await tweet(target, 'hello world');
    const poller = makePoller();
    const cycle = await poller.runCycle({ force: true });
    expect(cycle.hits).toBeGreaterThanOrEqual(1);
    const [hit] = await hitsOf(m.id);
    expect(hit).toMatchObject({ tweetId: t.id, tweetText: 'hello world', tweetAuthorUsername: target });
    const outbox = await db.outboxEvent.findMany({ where: { headers: { path: ['hitId'], equals: hit!.id } } });
    expect(outbox).toHaveLength(1);

    const relay = createOutboxRelay({ db, publisher: amqp, logger });
    expect(await relay.runOnce()).toBeGreaterThanOrEqual(1);
    const env = await waitFor(() => received.find((e) => e.headers.hitId === hit!.id));
    expect(env.messageId).toBe(outbox[0]!.messageId);
    expect(env.headers).toEqual({ accountId, hitId: hit!.id });
    expect(env.payload).toEqual({
      event: 'monitor.hit',
      monitor: { id: m.id, targetUsername: target, keywords: null },
      tweet: { id: t.id, text: 'hello world', authorUsername: target, createdAt: t.createdAt.toISOString() },
      detectedAt: hit!.detectedAt.toISOString(),
    });
    expect((await db.outboxEvent.findUnique({ where: { id: outbox[0]!.id } }))!.publishedAt).toBeInstanceOf(Date);
    const checked = await db.monitor.findUnique({ where: { id: m.id } });
    expect(checked!.lastCheckAt).toBeInstanceOf(Date);
    expect(checked!.lastError).toBeNull();
  });

  it('applies keywords: whole words, phrases across spaces, case and accents', async () => {
    const target = await newTarget();
    const word = await monitor(target, ['cat']);
    const phrase = await monitor(target, ['new release']);
    const accent = await monitor(target, ['café']);
    const texts = [
      'concatenate this',
      'my CAT sleeps',
      'our new    release is out',
      'new and release',
      'meet at the CAFE',
      'cafeteria food',
    ];
    const ids: Record<string, string> = {};
    for (const text of texts) ids[text] = (await tweet(target, text)).id;
    await makePoller().runCycle({ force: true });
    expect((await hitsOf(word.id)).map((h) => h.tweetText)).toEqual(['my CAT sleeps']);
    expect((await hitsOf(phrase.id)).map((h) => h.tweetText)).toEqual(['our new    release is out']);
    expect((await hitsOf(accent.id)).map((h) => h.tweetText)).toEqual(['meet at the CAFE']);
  });

  it('calls the source once per target however many monitors watch it', async () => {
    const target = await newTarget();
    const monitors = await Promise.all(Array.from({ length: 12 }, () => monitor(target)));
    await tweet(target, 'one');
    await makePoller(countingSource(source)).runCycle({ force: true });
    expect(calls.filter((c) => c === target)).toHaveLength(1);
    for (const m of monitors) expect(await hitsOf(m.id)).toHaveLength(1);
  });

  it('two replicas polling concurrently record each hit and event once', async () => {
    const target = await newTarget();
    const m = await monitor(target);
    for (let i = 0; i < 12; i++) await tweet(target, `tweet ${i}`);
    const slow: SocialSource = {
      ...source,
      name: 'local',
      getTweetsSince: async (u, s, l) => {
        calls.push(u);
        await new Promise((r) => setTimeout(r, 30));
        return source.getTweetsSince(u, s, l);
      },
    };
    await Promise.all([makePoller(slow).runCycle({ force: true }), makePoller(slow).runCycle({ force: true })]);
    const hits = await hitsOf(m.id);
    expect(hits).toHaveLength(12);
    const events = await db.outboxEvent.findMany({ where: { payload: { path: ['monitor', 'id'], equals: m.id } } });
    expect(events).toHaveLength(12);
    // 12 tweets in pages of 5: 3 calls by whichever replica held the lease; a second replica may
    // poll again only after the first released it, and then reads nothing new
    expect(calls.filter((c) => c === target).length).toBeLessThanOrEqual(4);
  });

  it('a restarted poller neither misses nor repeats tweets', async () => {
    const target = await newTarget();
    const m = await monitor(target);
    for (let i = 0; i < 7; i++) await tweet(target, `before ${i}`);
    const first = makePoller();
    await first.runCycle({ force: true });
    await first.stop();
    for (let i = 0; i < 8; i++) await tweet(target, `after ${i}`);
    const second = makePoller();
    await second.runCycle({ force: true });
    await second.runCycle({ force: true });
    const hits = await hitsOf(m.id);
    expect(hits).toHaveLength(15);
    expect(new Set(hits.map((h) => h.tweetId)).size).toBe(15);
  });

  it('a duplicate hit is recorded once and produces one event', async () => {
    const target = await newTarget();
    const m = await monitor(target);
    const t = await tweet(target, 'only once');
    const repo = createPollerRepository(db);
    const detectedAt = new Date();
    const hit = {
      monitorId: m.id,
      accountId,
      tweetId: t.id,
      tweetText: t.text,
      tweetAuthorId: t.authorId,
      tweetAuthorUsername: target,
      tweetCreatedAt: t.createdAt,
      detectedAt,
      event: {
        event: 'monitor.hit' as const,
        monitor: { id: m.id, targetUsername: target, keywords: null },
        tweet: { id: t.id, text: t.text, authorUsername: target, createdAt: t.createdAt.toISOString() },
        detectedAt: detectedAt.toISOString(),
      },
    };
    const cursor = { lastTweetId: t.id, lastTweetAt: t.createdAt };
    expect(await repo.recordBatch(target.toLowerCase(), [hit], cursor, new Date())).toBe(1);
    expect(await repo.recordBatch(target.toLowerCase(), [hit], cursor, new Date())).toBe(0);
    expect(await hitsOf(m.id)).toHaveLength(1);
    expect(await db.outboxEvent.count({ where: { payload: { path: ['monitor', 'id'], equals: m.id } } })).toBe(1);
  });

  it('a new monitor does not fire on tweets older than itself', async () => {
    const target = await newTarget();
    const old = await monitor(target, [], new Date(Date.now() - 3600_000));
    await tweet(target, 'old news', new Date(Date.now() - 60_000));
    const fresh = await monitor(target);
    await tweet(target, 'fresh news');
    await makePoller().runCycle({ force: true });
    expect((await hitsOf(old.id)).map((h) => h.tweetText).sort()).toEqual(['fresh news', 'old news']);
    expect((await hitsOf(fresh.id)).map((h) => h.tweetText)).toEqual(['fresh news']);
  });

  it('an unknown target records last_error and does not stop other targets', async () => {
    const ghost = await monitor('no_such_user_x');
    const target = await newTarget();
    const ok = await monitor(target);
    await tweet(target, 'still works');
    const r = await makePoller().runCycle({ force: true });
    expect(r.failed).toBeGreaterThanOrEqual(1);
    const g = await db.monitor.findUnique({ where: { id: ghost.id } });
    expect(g!.lastError).toMatch(/not found/);
    expect(g!.lastCheckAt).toBeInstanceOf(Date);
    expect(await hitsOf(ok.id)).toHaveLength(1);
    await db.monitor.update({ where: { id: ghost.id }, data: { isActive: false } });
  });

  it('only due targets are polled, at the overridden interval', async () => {
    const target = await newTarget();
    await monitor(target);
    const poller = makePoller(countingSource(source));
    await poller.runCycle();
    await poller.runCycle(); // within the 1 s interval: not due again
    expect(calls.filter((c) => c === target)).toHaveLength(1);
    await new Promise((r) => setTimeout(r, 1100));
    await poller.runCycle();
    expect(calls.filter((c) => c === target)).toHaveLength(2);
  });

  it('the outbox keeps events while the broker is unreachable and publishes them later', async () => {
    const target = await newTarget();
    const m = await monitor(target);
    await tweet(target, 'queued while down');
    await makePoller().runCycle({ force: true });
    const [hit] = await hitsOf(m.id);
    const down = new AmqpClient({ url: 'amqp://guest:guest@127.0.0.1:1', logger, name: 'down', publishTimeoutMs: 300 });
    const broken = createOutboxRelay({ db, publisher: down, logger });
    expect(await broken.runOnce()).toBe(0);
    const row = await db.outboxEvent.findFirstOrThrow({ where: { headers: { path: ['hitId'], equals: hit!.id } } });
    expect(row.publishedAt).toBeNull();
    expect(row.attempts).toBeGreaterThanOrEqual(1);
    expect(row.lastError).toBeTruthy();
    await down.stop().catch(() => undefined);
    await createOutboxRelay({ db, publisher: amqp, logger }).runOnce();
    await waitFor(() => received.find((e) => e.headers.hitId === hit!.id));
    expect((await db.outboxEvent.findUniqueOrThrow({ where: { id: row.id } })).publishedAt).toBeInstanceOf(Date);
  });

  it('a crash between publish and mark re-publishes with the same message id', async () => {
    const target = await newTarget();
    const m = await monitor(target);
    await tweet(target, 'at least once');
    await makePoller().runCycle({ force: true });
    const [hit] = await hitsOf(m.id);
    const row = await db.outboxEvent.findFirstOrThrow({ where: { headers: { path: ['hitId'], equals: hit!.id } } });
    const crashing = createOutboxRelay({
      db,
      logger,
      publisher: {
        publish: async (k, p, o) => {
          await amqp.publish(k, p, o);
          throw new Error('process died before marking');
        },
      },
    });
    await crashing.runOnce();
    await createOutboxRelay({ db, publisher: amqp, logger }).runOnce();
    await waitFor(() => received.filter((e) => e.messageId === row.messageId).length === 2);
    expect(received.filter((e) => e.messageId === row.messageId).every((e) => e.headers.hitId === hit!.id)).toBe(true);
  });

  it('the running relay wakes on new outbox rows without waiting for its poll', async () => {
    const relay = createOutboxRelay({ db, publisher: amqp, logger, databaseUrl: dbHandle.url, idleMs: 60_000 });
    await relay.start();
    try {
      const target = await newTarget();
      const m = await monitor(target);
      await tweet(target, 'wake up');
      await makePoller().runCycle({ force: true });
      const [hit] = await hitsOf(m.id);
      await waitFor(() => received.find((e) => e.headers.hitId === hit!.id), 5000);
    } finally {
      await relay.stop();
    }
  });
});
