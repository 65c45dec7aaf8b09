import net from 'node:net';
import type { Redis } from 'ioredis';
import { createLogger } from '@sts/common';
import { withLastCheck, type Db } from '@sts/db';
import { AmqpClient, contracts, monitorHitPayload, monitorRef, type Envelope } from '@sts/messaging';
import { createLocalSource, createSocialTweet, createSocialUser, type SocialSource } from '@sts/social';
import { createTestVhost, waitFor, openTestStore, type TestStore } from '@sts/testing';
import { createOutboxRelay } from './relay/relay';
import { createScheduleStore } from './adapters/scheduleStore';
import { createHitWriter } from './adapters/hitWriter';
import { intervalFor } from './domain/schedule';
import { plans, smallPoller, testPoller, type TestPollerOptions } from '../test/poller';

const logger = createLogger({ service: 'poller-test', level: 'error' });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A TCP proxy in front of RabbitMQ that the test can cut (broker unreachable) and restore. */
class TcpProxy {
  private readonly server: net.Server;
  private readonly sockets = new Set<net.Socket>();
  private up = true;
  constructor(private readonly target: { host: string; port: number }) {
    this.server = net.createServer((client) => {
      if (!this.up) return void client.destroy();
      const upstream = net.connect(this.target.port, this.target.host);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => (client.destroy(), upstream.destroy()));
      }
      client.pipe(upstream).pipe(client);
    });
  }
  async listen(): Promise<number> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    return (this.server.address() as net.AddressInfo).port;
  }
  cut(): void {
    this.up = false;
    for (const s of this.sockets) s.destroy();
  }
  restore(): void {
    this.up = true;
  }
  close(): Promise<void> {
    this.cut();
    return new Promise((r) => this.server.close(() => r()));
  }
}

describe('poller', () => {
  let bed: TestStore;
  let db: Db;
  let redis: Redis;
  let amqpUrl: string;
  let amqp: AmqpClient;
  const received: Envelope<'monitor.hit'>[] = [];
  let calls: string[];
  let source: SocialSource;
  let accountId: string;
  let seq = 0;

  /** counts source calls, and the most calls for one user that were ever in flight at once */
  function countingSource(inner: SocialSource, delayMs = 0) {
    const active = new Map<string, number>();
    const stats = { maxConcurrentPerTarget: 0, positions: [] as (string | null)[] };
    const src: SocialSource = {
      ...inner,
      name: inner.name,
      pollTweets: async (username, request) => {
        calls.push(username);
        stats.positions.push(request.position);
        const key = username.toLowerCase();
        active.set(key, (active.get(key) ?? 0) + 1);
        stats.maxConcurrentPerTarget = Math.max(stats.maxConcurrentPerTarget, active.get(key)!);
        try {
          if (delayMs) await sleep(delayMs);
          return await inner.pollTweets(username, request);
        } finally {
          active.set(key, active.get(key)! - 1);
        }
      },
    };
    return { source: src, stats };
  }

  function makePoller(src: SocialSource = source, extra: Partial<TestPollerOptions> = {}) {
    return testPoller(
      { db, redis },
      {
        source: src,
        logger,
        ...smallPoller,
        ...extra,
      },
    );
  }

  async function newTarget(): Promise<string> {
    const username = `User_${++seq}_${Math.random().toString(36).slice(2, 6)}`;
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

  /** the monitor's last check and error as the API and dashboard show them (its target's cursor) */
  async function shown(monitorId: string) {
    return (await withLastCheck(db, [await db.monitor.findUniqueOrThrow({ where: { id: monitorId } })]))[0]!;
  }

  async function eventsOf(monitorId: string) {
    return db.outboxEvent.findMany({ where: { payload: { path: ['monitor', 'id'], equals: monitorId } } });
  }

  beforeAll(async () => {
    bed = await openTestStore({ poolSize: 8 });
    ({ db, redis } = bed);
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
    await bed.close();
  });

  it('records a hit, its outbox event and publishes the exact webhook payload (docs/webhooks.md)', async () => {
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
    expect(outbox[0]!.routingKey).toBe('monitor.hit');
    expect(outbox[0]!.messageId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(outbox[0]!.publishedAt).toBeNull();

    const relay = createOutboxRelay({ db, publisher: amqp, logger });
    expect(await relay.runOnce()).toBeGreaterThanOrEqual(1);
    const env = await waitFor(() => received.find((e) => e.headers.hitId === hit!.id));
    expect(env.routingKey).toBe('monitor.hit');
    expect(env.messageId).toBe(outbox[0]!.messageId);
    expect(env.headers).toEqual({ accountId, hitId: hit!.id });
    expect(env.payload).toEqual({
      event: 'monitor.hit',
      monitor: { id: m.id, targetUsername: target, query: null, keywords: null },
      tweet: { id: t.id, text: 'hello world', authorUsername: target, createdAt: t.createdAt.toISOString() },
      detectedAt: hit!.detectedAt.toISOString(),
      sequence: 1,
    });
    expect(env.payload.tweet.createdAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect((await db.outboxEvent.findUnique({ where: { id: outbox[0]!.id } }))!.publishedAt).toBeInstanceOf(Date);
    const checked = await shown(m.id);
    expect(checked.lastCheckAt).toBeInstanceOf(Date);
    expect(checked.lastError).toBeNull();
  });

  it('applies keywords: whole words, phrases across spaces, case, accents kept; no keywords = every tweet', async () => {
    const target = await newTarget();
    const word = await monitor(target, ['cat']);
    const phrase = await monitor(target, ['new release']);
    const accent = await monitor(target, ['café']);
    const plain = await monitor(target, ['CRÈME brûlée']);
    const all = await monitor(target, []);
    const texts = [
      'concatenate this',
      'my CAT sleeps',
      'our new    release is out',
      'new and release',
      'meet at the CAFE',
      'meet at the CAFÉ',
      'cafeteria food',
      'Crème Brûlée tonight',
    ];
    for (const text of texts) await tweet(target, text);
    await makePoller().runCycle({ force: true });
    expect((await hitsOf(word.id)).map((h) => h.tweetText)).toEqual(['my CAT sleeps']);
    expect((await hitsOf(phrase.id)).map((h) => h.tweetText)).toEqual(['our new    release is out']);
    // accents are kept (packages/core keywords.ts): café ≠ cafe
    expect((await hitsOf(accent.id)).map((h) => h.tweetText)).toEqual(['meet at the CAFÉ']);
    expect((await hitsOf(plain.id)).map((h) => h.tweetText)).toEqual(['Crème Brûlée tonight']);
    expect((await hitsOf(all.id)).map((h) => h.tweetText)).toEqual(texts);
    const [event] = await eventsOf(phrase.id);
    expect((event!.payload as { monitor: { keywords: unknown } }).monitor.keywords).toEqual(['new release']);
  });

  it('calls the source once per target however many monitors (and accounts) watch it', async () => {
    const target = await newTarget();
    const other = (await db.account.create({ data: { email: `other${seq}@example.com` } })).id;
    const monitors = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        monitor(i % 2 ? target : target.toUpperCase(), [], undefined, i % 3 ? accountId : other),
      ),
    );
    await tweet(target, 'one');
    const { source: counted } = countingSource(source);
    await makePoller(counted).runCycle({ force: true });
    expect(calls.filter((c) => c.toLowerCase() === target.toLowerCase())).toHaveLength(1);
    for (const m of monitors) expect(await hitsOf(m.id)).toHaveLength(1);
  });

  it('two replicas in one cycle: the target is polled by one of them, each hit and event recorded once', async () => {
    const target = await newTarget();
    const m = await monitor(target);
    for (let i = 0; i < 12; i++) await tweet(target, `tweet ${i}`);
    const { source: slow, stats } = countingSource(source, 30);
    const [a, b] = await Promise.all([
      makePoller(slow).runCycle({ force: true }),
      makePoller(slow).runCycle({ force: true }),
    ]);
    expect(stats.maxConcurrentPerTarget).toBe(1);
    // 12 tweets in pages of 5: 3 calls, all by the replica that held the lease; the other one
    // skipped it (lease held, or polled since it looked)
    expect(calls.filter((c) => c === target)).toHaveLength(3);
    expect(a.skipped + b.skipped).toBeGreaterThanOrEqual(1);
    expect(await hitsOf(m.id)).toHaveLength(12);
    expect(await eventsOf(m.id)).toHaveLength(12);
  });

  it('a replica that read the targets before another one polled them does not poll them again', async () => {
    const target = await newTarget();
    const m = await monitor(target);
    await tweet(target, 'once');
    const { source: counted } = countingSource(source);
    // B reads the due targets, then waits until A has polled and released the target
    let aDone!: () => void;
    let snapped!: () => void;
    const aFinished = new Promise<void>((r) => (aDone = r));
    const snapshotTaken = new Promise<void>((r) => (snapped = r));
    const schedule = createScheduleStore(db);
    const stale = {
      ...schedule,
      claimDue: async (limit: number, ttlMs: number) => {
        const snapshot = await schedule.claimDue(limit, ttlMs);
        // B's claim lapses (a stalled replica): A may claim the target and poll it meanwhile
        await db.pollTarget.updateMany({ where: { targetKey: target.toLowerCase() }, data: { nextDueAt: new Date() } });
        snapped();
        await aFinished;
        return snapshot;
      },
    };
    const b = makePoller(counted, { schedule: stale }).runCycle();
    await snapshotTaken;
    await makePoller(counted).runCycle();
    aDone();
    const rb = await b;
    expect(calls.filter((c) => c === target)).toHaveLength(1);
    expect(rb.skipped).toBeGreaterThanOrEqual(1);
    expect(await hitsOf(m.id)).toHaveLength(1);
  });

  it('two running replicas over several targets while tweets arrive: no overlap, every tweet once', async () => {
    const targets = await Promise.all(Array.from({ length: 5 }, () => newTarget()));
    const monitors = await Promise.all(targets.flatMap((t) => [monitor(t), monitor(t, ['ping'])]));
    const { source: slow, stats } = countingSource(source, 5);
    const replicas = [makePoller(slow, { tickMs: 20 }), makePoller(slow, { tickMs: 20 })];
    for (const r of replicas) await r.start();
    const posted: string[] = [];
    try {
      for (let round = 0; round < 4; round++) {
        for (const t of targets) posted.push((await tweet(t, `round ${round} ping`)).id);
        await sleep(400);
      }
      await waitFor(
        async () => (await db.hit.count({ where: { tweetId: { in: posted } } })) === posted.length * 2,
        20_000,
      );
    } finally {
      await Promise.all(replicas.map((r) => r.stop()));
    }
    expect(stats.maxConcurrentPerTarget).toBe(1);
    for (const m of monitors) {
      const hits = await hitsOf(m.id);
      expect(hits).toHaveLength(4);
      expect(new Set(hits.map((h) => h.tweetId)).size).toBe(4);
      expect(await eventsOf(m.id)).toHaveLength(4);
    }
  });

  it('a restarted poller neither misses nor repeats tweets', async () => {
    const target = await newTarget();
    const m = await monitor(target);
    const first = makePoller(source, { tickMs: 20 });
    await first.start();
    try {
      for (let i = 0; i < 7; i++) await tweet(target, `before ${i}`);
      await waitFor(async () => (await hitsOf(m.id)).length === 7);
    } finally {
      await first.stop();
    }
    for (let i = 0; i < 8; i++) await tweet(target, `while stopped ${i}`);
    const second = makePoller(source, { tickMs: 20 });
    await second.start();
    try {
      await waitFor(async () => (await hitsOf(m.id)).length >= 15);
      for (let i = 0; i < 3; i++) await tweet(target, `after ${i}`);
      await waitFor(async () => (await hitsOf(m.id)).length >= 18);
      await sleep(1200); // at least one more poll of the target
    } finally {
      await second.stop();
    }
    const hits = await hitsOf(m.id);
    expect(hits).toHaveLength(18);
    expect(new Set(hits.map((h) => h.tweetId)).size).toBe(18);
    expect(await eventsOf(m.id)).toHaveLength(18);
  });

  it("writes each event as @sts/messaging's payload builder would (monitor ref built in PostgreSQL)", async () => {
    const target = await newTarget();
    const withWords = await monitor(target, ['hello', '-spam']);
    const without = await monitor(target);
    const t = await tweet(target, 'hello there');
    expect((await makePoller().runCycle({ force: true })).hits).toBeGreaterThanOrEqual(2);
    for (const m of [withWords, without]) {
      const [hit] = await hitsOf(m.id);
      const [event] = await eventsOf(m.id);
      const row = await db.monitor.findUniqueOrThrow({ where: { id: m.id } });
      const ref = { id: t.id, text: t.text, authorUsername: target, createdAt: t.createdAt.toISOString() };
      // the monitor's first event: sequence 1
      expect(event!.payload).toEqual(monitorHitPayload(monitorRef(row), ref, hit!.detectedAt.toISOString(), 1));
      expect(hit!.sequence).toBe(1n);
      expect(event!.headers).toEqual({ accountId, hitId: hit!.id });
      expect(contracts['monitor.hit'].payload.parse(event!.payload)).toEqual(event!.payload);
    }
  });

  it('a duplicate hit is recorded once and produces one event', async () => {
    const target = await newTarget();
    const m = await monitor(target);
    const t = await tweet(target, 'only once');
    const repo = createHitWriter(db);
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
        monitor: { id: m.id, targetUsername: target, query: null, keywords: null },
        tweet: { id: t.id, text: t.text, authorUsername: target, createdAt: t.createdAt.toISOString() },
        detectedAt: detectedAt.toISOString(),
      },
    };
    const cursor = { lastTweetId: t.id, lastTweetAt: t.createdAt, position: null };
    expect(await repo.recordBatch(target.toLowerCase(), [hit], cursor, new Date())).toHaveLength(1);
    expect(await repo.recordBatch(target.toLowerCase(), [hit], cursor, new Date())).toHaveLength(0);
    expect(await hitsOf(m.id)).toHaveLength(1);
    expect(await eventsOf(m.id)).toHaveLength(1);
    // and a poll that reads the same tweet again adds nothing either
    await db.pollCursor.delete({ where: { targetKey: target.toLowerCase() } });
    await makePoller().runCycle({ force: true });
    expect(await hitsOf(m.id)).toHaveLength(1);
    expect(await eventsOf(m.id)).toHaveLength(1);
  });

  it('the cursor only moves forward (a replica whose lease lapsed cannot move it back)', async () => {
    const target = await newTarget();
    await monitor(target);
    const older = await tweet(target, 'older');
    const newer = await tweet(target, 'newer');
    const repo = createHitWriter(db);
    const key = target.toLowerCase();
    const at = (id: string, position: string) => ({ lastTweetId: id, lastTweetAt: new Date(), position });
    await repo.recordBatch(key, [], { ...at(newer.id, 'l.100.9'), lastTweetAt: newer.createdAt }, new Date());
    await repo.recordBatch(key, [], { ...at(older.id, 'l.99.10'), lastTweetAt: older.createdAt }, new Date());
    let c = await db.pollCursor.findUniqueOrThrow({ where: { targetKey: key } });
    expect(c.lastTweetId).toBe(newer.id);
    expect(c.lastTweetAt!.getTime()).toBe(newer.createdAt.getTime());
    // positions compare as numbers, field by field (100 > 99 though "99" > "100" as text)
    expect(c.position).toBe('l.100.9');
    await repo.recordBatch(key, [], at(newer.id, 'l.100.10'), new Date());
    c = await db.pollCursor.findUniqueOrThrow({ where: { targetKey: key } });
    expect(c.position).toBe('l.100.10');
    // another provider's position replaces it (SOCIAL_SOURCE changed)
    await repo.recordBatch(key, [], at(newer.id, 'x.5'), new Date());
    c = await db.pollCursor.findUniqueOrThrow({ where: { targetKey: key } });
    expect(c.position).toBe('x.5');
  });

  it('a new target starts at its monitor; a new monitor never fires on tweets older than itself', async () => {
    const target = await newTarget();
    await tweet(target, 'long before any monitor', new Date(Date.now() - 7200_000));
    const old = await monitor(target, [], new Date(Date.now() - 3600_000));
    await tweet(target, 'old news', new Date(Date.now() - 60_000));
    const fresh = await monitor(target);
    await tweet(target, 'fresh news');
    await makePoller().runCycle({ force: true });
    expect((await hitsOf(old.id)).map((h) => h.tweetText).sort()).toEqual(['fresh news', 'old news']);
    expect((await hitsOf(fresh.id)).map((h) => h.tweetText)).toEqual(['fresh news']);

    // on a target already polled: a tweet posted before a monitor's creation but read after it
    await tweet(target, 'posted before the newest monitor');
    await sleep(5);
    const newest = await monitor(target);
    await tweet(target, 'posted after');
    await makePoller().runCycle({ force: true });
    expect((await hitsOf(newest.id)).map((h) => h.tweetText)).toEqual(['posted after']);
    expect((await hitsOf(fresh.id)).map((h) => h.tweetText)).toEqual([
      'fresh news',
      'posted before the newest monitor',
      'posted after',
    ]);
  });

  it('a stale cursor is not paged through when the only monitor is newer than it', async () => {
    const target = await newTarget();
    const first = await monitor(target);
    await makePoller().runCycle({ force: true }); // cursor set
    await db.monitor.delete({ where: { id: first.id } });
    for (let i = 0; i < 20; i++) await tweet(target, `nobody watching ${i}`);
    await sleep(5);
    const second = await monitor(target);
    await tweet(target, 'watched');
    const { source: counted } = countingSource(source);
    await makePoller(counted).runCycle({ force: true });
    expect(calls.filter((c) => c === target)).toHaveLength(1); // not 5 pages of old tweets
    expect((await hitsOf(second.id)).map((h) => h.tweetText)).toEqual(['watched']);
  });

  it('records last_check_at and last_error: unknown target, upstream failure, cleared on success', async () => {
    const ghostName = `ghost_${seq++}`;
    const ghost = await monitor(ghostName);
    const target = await newTarget();
    const ok = await monitor(target);
    await tweet(target, 'still works');
    const r = await makePoller().runCycle({ force: true });
    expect(r.failed).toBeGreaterThanOrEqual(1);
    const g = await shown(ghost.id);
    expect(g.lastError).toBe(`target user @${ghostName} not found`);
    expect(g.lastCheckAt).toBeInstanceOf(Date);
    expect(await hitsOf(ok.id)).toHaveLength(1);

    // the user appears: the next poll clears the error and records its tweets
    await createSocialUser(db, { username: ghostName, name: 'Ghost' });
    await tweet(ghostName, 'boo');
    await makePoller().runCycle({ force: true });
    const cleared = await shown(ghost.id);
    expect(cleared.lastError).toBeNull();
    expect(cleared.lastCheckAt!.getTime()).toBeGreaterThan(g.lastCheckAt!.getTime());
    expect((await hitsOf(ghost.id)).map((h) => h.tweetText)).toEqual(['boo']);

    // the source fails: the error is recorded and the cursor stays, so nothing is lost
    const cursorBefore = await db.pollCursor.findUniqueOrThrow({ where: { targetKey: target.toLowerCase() } });
    await tweet(target, 'during the outage');
    const failing: SocialSource = {
      ...source,
      name: 'local',
      pollTweets: () => Promise.reject(new Error('upstream answered 503')),
    };
    await makePoller(failing).runCycle({ force: true });
    const failed = await shown(ok.id);
    expect(failed.lastError).toBe('upstream answered 503');
    const cursorAfter = await db.pollCursor.findUniqueOrThrow({ where: { targetKey: target.toLowerCase() } });
    expect(cursorAfter.lastTweetId).toBe(cursorBefore.lastTweetId);
    expect(cursorAfter.lastError).toBe('upstream answered 503');
    await makePoller().runCycle({ force: true });
    expect((await hitsOf(ok.id)).map((h) => h.tweetText)).toEqual(['still works', 'during the outage']);
    expect((await shown(ok.id)).lastError).toBeNull();
    await db.monitor.updateMany({ where: { id: { in: [ghost.id, ok.id] } }, data: { isActive: false } });
  });

  it('a source that hangs fails the poll at the poll timeout and frees the lease', async () => {
    const target = await newTarget();
    const m = await monitor(target);
    await tweet(target, 'eventually');
    const hanging: SocialSource = { ...source, name: 'local', pollTweets: () => new Promise(() => undefined) };
    await makePoller(hanging, { pollTimeoutMs: 200 }).runCycle({ force: true });
    expect((await shown(m.id)).lastError).toMatch(/did not answer within 200 ms/);
    expect(await redis.exists(`poll:lease:${target.toLowerCase()}`)).toBe(0);
    await makePoller().runCycle({ force: true });
    expect(await hitsOf(m.id)).toHaveLength(1);
    await db.monitor.update({ where: { id: m.id }, data: { isActive: false } });
  });

  it('only due targets are polled, at the overridden interval', async () => {
    const target = await newTarget();
    await monitor(target);
    const { source: counted } = countingSource(source);
    const poller = makePoller(counted);
    await poller.runCycle();
    await poller.runCycle(); // within the 1 s interval: not due again
    expect(calls.filter((c) => c === target)).toHaveLength(1);
    await sleep(1100);
    await poller.runCycle();
    expect(calls.filter((c) => c === target)).toHaveLength(2);
  });

  it('reads each target with the plans of the accounts watching it (shortest interval wins)', async () => {
    const free = (await db.account.create({ data: { email: `free${seq}@example.com` } })).id;
    const trial = (
      await db.account.create({
        data: { email: `trial${seq}@example.com`, trialEndsAt: new Date(Date.now() + 86_400_000) },
      })
    ).id;
    const freeOnly = await newTarget();
    const mixed = await newTarget();
    const onTrial = await newTarget();
    await monitor(freeOnly, [], undefined, free);
    await monitor(mixed, [], undefined, free);
    await monitor(mixed, [], undefined, accountId);
    await monitor(onTrial, [], undefined, trial);
    await monitor(onTrial, [], undefined, free);
    const targets = await createScheduleStore(db).targets();
    const interval = (name: string) =>
      intervalFor(
        targets.find((t) => t.targetKey === name.toLowerCase())!,
        { plans },
        new Date(),
      );
    expect(interval(freeOnly)).toBe(300);
    expect(interval(mixed)).toBe(60);
    expect(interval(onTrial)).toBe(60);
  });

  it('the relay publishes in outbox id order', async () => {
    const target = await newTarget();
    const m = await monitor(target);
    for (let i = 0; i < 6; i++) await tweet(target, `ordered ${i}`);
    await makePoller().runCycle({ force: true });
    const rows = await db.outboxEvent.findMany({
      where: { payload: { path: ['monitor', 'id'], equals: m.id } },
      orderBy: { id: 'asc' },
    });
    expect(rows).toHaveLength(6);
    await createOutboxRelay({ db, publisher: amqp, logger }).runOnce();
    await waitFor(() => received.filter((e) => e.payload.monitor.id === m.id).length === 6);
    expect(received.filter((e) => e.payload.monitor.id === m.id).map((e) => e.messageId)).toEqual(
      rows.map((r) => r.messageId),
    );
  });

  it('the outbox keeps events while the broker is unreachable (closed port) and publishes them later', async () => {
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

  it('a running relay holds events while RabbitMQ is cut off and publishes them when it is back', async () => {
    const u = new URL(amqpUrl);
    const proxy = new TcpProxy({ host: u.hostname, port: Number(u.port || 5672) });
    u.port = String(await proxy.listen());
    u.hostname = '127.0.0.1';
    const client = new AmqpClient({
      url: u.toString(),
      logger,
      name: 'poller-proxied',
      publishTimeoutMs: 300,
      reconnectDelayMs: { initial: 50, max: 200 },
    });
    await client.start();
    const relay = createOutboxRelay({ db, publisher: client, logger, databaseUrl: bed.dbUrl, idleMs: 100 });
    await relay.start();
    try {
      proxy.cut();
      await waitFor(() => !client.isConnected());
      const target = await newTarget();
      const m = await monitor(target);
      await tweet(target, 'during the cut');
      await makePoller().runCycle({ force: true });
      const [hit] = await hitsOf(m.id);
      const failed = await waitFor(async () => {
        const r = await db.outboxEvent.findFirst({ where: { headers: { path: ['hitId'], equals: hit!.id } } });
        return r && r.attempts >= 1 && r.lastError ? r : null;
      });
      expect(failed.publishedAt).toBeNull();
      expect(received.find((e) => e.headers.hitId === hit!.id)).toBeUndefined();

      proxy.restore();
      const env = await waitFor(() => received.find((e) => e.headers.hitId === hit!.id), 20_000);
      expect(env.messageId).toBe(failed.messageId);
      await waitFor(async () => (await db.outboxEvent.findUniqueOrThrow({ where: { id: failed.id } })).publishedAt);
    } finally {
      await relay.stop();
      await client.stop().catch(() => undefined);
      await proxy.close();
    }
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
    expect((await db.outboxEvent.findUniqueOrThrow({ where: { id: row.id } })).publishedAt).toBeNull();
    await createOutboxRelay({ db, publisher: amqp, logger }).runOnce();
    await waitFor(() => received.filter((e) => e.messageId === row.messageId).length === 2);
    const copies = received.filter((e) => e.messageId === row.messageId);
    expect(copies.every((e) => e.headers.hitId === hit!.id)).toBe(true);
    expect(copies[1]!.payload).toEqual(copies[0]!.payload);
    expect((await db.outboxEvent.findUniqueOrThrow({ where: { id: row.id } })).publishedAt).toBeInstanceOf(Date);
  });

  it('the running relay wakes on new outbox rows without waiting for its poll', async () => {
    const relay = createOutboxRelay({ db, publisher: amqp, logger, databaseUrl: bed.dbUrl, idleMs: 60_000 });
    await relay.start();
    try {
      await sleep(100); // its first (empty) round is done; the next poll would be a minute away
      const target = await newTarget();
      const m = await monitor(target);
      await tweet(target, 'wake up');
      await makePoller().runCycle({ force: true });
      const [hit] = await hitsOf(m.id);
      await waitFor(() => received.find((e) => e.headers.hitId === hit!.id), 20_000);
    } finally {
      await relay.stop();
    }
  });
});
