/**
 * Streamed posts recorded through RabbitMQ (stream/handoff.ts → stream/recording.ts) on the real
 * PostgreSQL and RabbitMQ (a vhost per test) against the fake X: two replicas share the
 * recording, one target's posts are recorded in order, a consumer killed mid-way loses and
 * doubles nothing, and a full queue holds the holder back (its saved position included) without
 * losing a post; posts waiting on several queues are recorded together, and acknowledged only
 * once their batch is written; a replica cut off from its database hands its posts to another.
 */
import { capturingLogger, createAccount, createTestVhost, TcpProxy, waitFor } from '@sts/testing';
import type { AmqpClient } from '@sts/messaging';
import { createDbClient, type Db } from '@sts/db';
import { Client } from 'pg';
import { fromStreamPost, partitionOf } from '@sts/x-stream/src/domain/streamPost';
import { parseRule } from '@sts/x-stream/src/domain/streamRules';
import { Limiter } from '@sts/x-stream/src/limiter';
import { createStreamRepository } from '@sts/x-stream/src/repository';
import { StreamRecording } from '@sts/x-stream/src/recording';
import { createHitWriter, type HitWriter } from '../../adapters/hitWriter';
import { createProfileRepository } from '../../adapters/profiles';
import { createScheduleStore } from '../../adapters/scheduleStore';
import { OUTBOX_CHANNEL } from '../../domain/pipeline';
import { recordPosts } from '../../record/posts';
import { useStreamHarness } from '../../../test/streamMode';
import { createStreamPort } from './port';

const h = useStreamHarness('stream-recording-test');
let db: Db;
beforeEach(() => ({ db } = h));

const proxies: TcpProxy[] = [];
// after the harness's own afterEach (hooks run in the order they are registered): the modes and
// their clients are stopped by then
afterEach(async () => {
  for (const p of proxies.splice(0)) await p.close();
});

const NAMES = Array.from({ length: 12 }, (_, i) => `rec${i}`);

async function watchAll(): Promise<void> {
  const account = await createAccount(db, 'starter');
  for (const u of NAMES) {
    h.fake.state.addUser({ username: u });
    await db.monitor.create({ data: { accountId: account.id, targetUsername: u, targetKey: u, keywords: [] } });
  }
}

const ruled = () => new Set(h.stream.rules().flatMap((r) => parseRule({ value: r.value, tag: r.tag }) ?? []));
const connected = () => h.stream.connections() === 1 && NAMES.every((n) => ruled().has(n));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `perSecond` posts a second over NAMES for `seconds`; their ids */
async function post(perSecond: number, seconds: number, prefix: string): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < perSecond * seconds; i++) {
    ids.push(h.fake.state.post({ author: NAMES[i % NAMES.length]!, text: `${prefix} ${i}` }).id);
    await sleep(1000 / perSecond);
  }
  return ids;
}

/** every post exactly one hit (one monitor per target), one event per hit */
async function expectEachOnce(ids: string[]): Promise<void> {
  await waitFor(async () => (await db.hit.count({ where: { tweetId: { in: ids } } })) >= ids.length, 30_000);
  await sleep(500);
  const hits = await db.hit.findMany({ select: { tweetId: true } });
  expect(hits.map((x) => x.tweetId).sort()).toEqual([...ids].sort());
  expect(await db.outboxEvent.count()).toBe(hits.length);
}

/** counts a replica's recording transactions (recordMany, recordBatch), optionally slowing each */
function counting(counter: { n: number }, delayMs = 0) {
  const slow = async () => {
    counter.n++;
    if (delayMs > 0) await sleep(delayMs);
  };
  return (r: HitWriter): HitWriter => ({
    ...r,
    async recordBatch(...args) {
      await slow();
      return r.recordBatch(...args);
    },
    async recordMany(...args) {
      await slow();
      return r.recordMany(...args);
    },
  });
}

/** the poller's side of the stream on `db`, recording through `writer` */
function portOf(db: Db, writer: HitWriter) {
  const logger = capturingLogger('rec-port').logger;
  return createStreamPort({ schedule: createScheduleStore(db), writer, profiles: createProfileRepository(db), logger });
}

/** an X stream post of `target` made now */
function streamPost(target: string, id: string, text: string) {
  const tweet = { id, text, authorId: `id-${target}`, authorUsername: target, authorName: target };
  return { target, tweet: { ...tweet, createdAt: new Date().toISOString(), lang: 'en' } };
}

/** two posts to each target (X stream posts, on their targets' queues); their ids */
async function publishPosts(publisher: AmqpClient, partitions: number): Promise<string[]> {
  const ids: string[] = [];
  for (let round = 0; round < 2; round++)
    for (const u of NAMES) {
      const id = String(BigInt(Date.now()) * 1000n + BigInt(ids.length));
      ids.push(id);
      const post = streamPost(u, id, `batched ${round}`);
      const partition = partitionOf(u, partitions);
      await publisher.publish('x.stream.post', post, { messageId: id, headers: {}, partition, requireRoute: true });
    }
  return ids;
}

describe('X stream recording through RabbitMQ', () => {
  it('two replicas share the recording, and one target’s posts are recorded in order', async () => {
    const vhost = await createTestVhost();
    await watchAll();
    const queues = { rebalanceMs: 400 };
    const hits = { a: 0, b: 0 };
    const a = h.startMode({}, undefined, {
      amqp: await h.amqpClient(vhost.url, 'rec-a'),
      recordQueues: queues,
      hits: (n) => (hits.a += n),
    });
    await waitFor(() => a.isHolder() && connected(), 15_000);
    h.startMode({}, undefined, {
      amqp: await h.amqpClient(vhost.url, 'rec-b'),
      recordQueues: queues,
      hits: (n) => (hits.b += n),
    });
    // under load the first subscriber gives up what is beyond its share
    const shared = await post(40, 5, 'shared');
    await expectEachOnce(shared);
    expect(hits.a).toBeGreaterThan(0);
    expect(hits.b).toBeGreaterThan(0);
    // a burst of ten posts per target, settled shares: each target's in post order. No backfill
    // is owed (a backfill's search could record a later post before the queue brings an earlier one)
    await waitFor(async () => (await db.$queryRaw<unknown[]>`SELECT 1 FROM x_stream_owed`).length === 0);
    await sleep(1500);
    const burst: string[] = [];
    for (let round = 0; round < 10; round++)
      for (const u of NAMES) burst.push(h.fake.state.post({ author: u, text: `burst ${round}` }).id);
    await expectEachOnce([...shared, ...burst]);
    const rows = await db.hit.findMany({
      where: { tweetId: { in: burst } },
      select: { tweetId: true, tweetAuthorUsername: true, detectedAt: true },
    });
    // in the order they were posted (ids made in one millisecond are not in that order: their
    // snowflake's worker bits are random)
    const posted = new Map(burst.map((id, i) => [id, i]));
    for (const u of NAMES) {
      const mine = rows
        .filter((r) => r.tweetAuthorUsername === u)
        .sort((x, y) => posted.get(x.tweetId)! - posted.get(y.tweetId)!);
      expect(mine).toHaveLength(10);
      for (let i = 1; i < mine.length; i++)
        expect(mine[i]!.detectedAt.getTime()).toBeGreaterThanOrEqual(mine[i - 1]!.detectedAt.getTime());
    }
  });

  it('a consumer killed mid-way loses nothing and records nothing twice', async () => {
    const vhost = await createTestVhost();
    await watchAll();
    const proxy = TcpProxy.forAmqpUrl(vhost.url);
    proxies.push(proxy);
    await proxy.listen();
    const bCalls = { n: 0 };
    const aCalls = { n: 0 };
    // B subscribes first (the active consumer of every queue) and records slowly: posts in flight when it dies
    const b = h.startMode({}, undefined, {
      amqp: await h.amqpClient(proxy.urlFor(vhost.url), 'rec-b'),
      recordQueues: { rebalanceMs: 60_000 },
      wrapWriter: counting(bCalls, 300),
    });
    await waitFor(() => b.isHolder() && connected(), 15_000);
    h.startMode({}, undefined, {
      amqp: await h.amqpClient(vhost.url, 'rec-a'),
      recordQueues: { rebalanceMs: 60_000 },
      wrapWriter: counting(aCalls),
    });
    const ids = await post(50, 2, 'killed');
    await waitFor(() => bCalls.n >= 3);
    // B's RabbitMQ connection dies with posts unacknowledged: the broker hands them to A
    proxy.cut();
    const more = await post(20, 1, 'after');
    await expectEachOnce([...ids, ...more]);
    expect(aCalls.n).toBeGreaterThan(0);
  });

  it('a full queue holds the holder back: its position stays behind what waits, and nothing is lost', async () => {
    const vhost = await createTestVhost();
    await watchAll();
    const queues = { partitions: 1, maxLength: 3, retryMs: 120_000, rebalanceMs: 60_000 };
    const amqp = await h.amqpClient(vhost.url, 'rec-holder');
    // the queue exists (declared by a consumer that then leaves): the holder's posts are routable
    const { logger } = capturingLogger('rec-declare');
    const declare = (client: AmqpClient) =>
      new StreamRecording({
        amqp: client,
        port: { recordPosts: () => Promise.reject(new Error('this replica does not record')) },
        ping: () => Promise.resolve(),
        owe: () => Promise.resolve(),
        logger,
        partitions: 1,
        queuePrefix: 'poller.stream.record',
        maxLength: 3,
        overlapMs: 0,
      });
    const first = declare(await h.amqpClient(vhost.url, 'rec-declare'));
    await first.start();
    await first.stop();
    const holder = h.startMode({}, undefined, { amqp, recordQueues: { ...queues, consume: false } });
    await waitFor(() => holder.isHolder() && connected(), 15_000);
    // the new rules' own backfill is done: only the stream can bring the posts below
    await waitFor(async () => (await db.$queryRaw<unknown[]>`SELECT 1 FROM x_stream_owed`).length === 0);
    await sleep(300);
    const posts: { id: string; at: Date }[] = [];
    for (let i = 0; i < 10; i++) {
      const t = h.fake.state.post({ author: NAMES[i]!, text: `held ${i}` });
      posts.push({ id: t.id, at: new Date(t.created_at) });
      await sleep(30);
    }
    await sleep(1500);
    // at most 4 taken by the queue: the 5th post still waits, and the saved position is behind it
    const [state] = await db.$queryRaw<{ alive_at: Date }[]>`SELECT alive_at FROM x_stream_state`;
    expect(state!.alive_at.getTime()).toBeLessThanOrEqual(posts[4]!.at.getTime());
    expect(await db.hit.count()).toBe(0);
    // a replica that records comes up: everything is recorded once, nothing was owed
    h.startMode({}, undefined, { amqp: await h.amqpClient(vhost.url, 'rec-b'), recordQueues: queues });
    await expectEachOnce(posts.map((p) => p.id));
    expect(await db.$queryRaw<unknown[]>`SELECT 1 FROM x_stream_owed WHERE reason = 'lost'`).toEqual([]);
    await waitFor(async () => {
      const [s] = await db.$queryRaw<{ alive_at: Date }[]>`SELECT alive_at FROM x_stream_state`;
      return s!.alive_at > posts[9]!.at;
    });
  });

  it('records posts waiting on several queues together, acknowledged only once written: a replica cut before loses and doubles nothing', async () => {
    const vhost = await createTestVhost();
    await watchAll();
    const { logger } = capturingLogger('rec-batch');
    const partitions = 4;
    const recording = (client: AmqpClient, writer: HitWriter) =>
      new StreamRecording({
        amqp: client,
        port: portOf(db, writer),
        ping: () => Promise.resolve(),
        owe: () => Promise.reject(new Error('nothing may be owed')),
        logger,
        partitions,
        queuePrefix: 'poller.stream.record',
        maxLength: 1000,
        rebalanceMs: 60_000,
        overlapMs: 0,
      });
    const real = createHitWriter(db);
    // B takes every delivery and never gets its first batch written (it dies mid-write)
    const proxy = TcpProxy.forAmqpUrl(vhost.url);
    proxies.push(proxy);
    await proxy.listen();
    const writing: string[][] = [];
    // B's write never ends until the test is over (then it fails: B's deliveries settle, on a closed channel)
    let die: (err: Error) => void = () => undefined;
    const never = new Promise<never>((_, reject) => (die = reject));
    const stuck: HitWriter = {
      ...real,
      recordMany: (batches) => {
        writing.push(batches.map((b) => b.targetKey));
        return never;
      },
    };
    const b = recording(await h.amqpClient(proxy.urlFor(vhost.url), 'rec-b'), stuck);
    await b.start();
    let a: StreamRecording | undefined;
    try {
      // two posts to each of the twelve targets, over every queue
      const publisher = await h.amqpClient(vhost.url, 'rec-publisher');
      const ids = await publishPosts(publisher, partitions);
      expect(new Set(NAMES.map((u) => partitionOf(u, partitions))).size).toBeGreaterThan(1);
      await waitFor(() => writing.length > 0);
      await sleep(500);
      // every post delivered to B and none acknowledged: none ready, none recorded
      for (let k = 0; k < partitions; k++)
        expect((await publisher.queueStats(`poller.stream.record.${k}`)).messages).toBe(0);
      expect(await db.hit.count()).toBe(0);
      // B's connection dies before its write (and stays down): the broker delivers every post again, to A
      await proxy.close();
      const statements: string[][] = [];
      const allDelivered = async () => {
        for (let k = 0; k < partitions; k++)
          if ((await publisher.queueStats(`poller.stream.record.${k}`)).messages > 0) return false;
        return true;
      };
      // A's first write waits until every post is delivered to A: the next batch takes all the rest
      a = recording(await h.amqpClient(vhost.url, 'rec-a'), {
        ...real,
        recordMany: async (batches, at) => {
          statements.push(batches.map((x) => x.targetKey));
          if (statements.length === 1) await waitFor(allDelivered);
          return real.recordMany(batches, at);
        },
      });
      await a.start();
      await expectEachOnce(ids);
      // batched across queues: what waited while the first write ran is one write, of every queue
      expect(statements.length).toBeLessThanOrEqual(2);
      const queuesOf = (keys: string[]) => new Set(keys.map((k) => partitionOf(k, partitions))).size;
      expect(queuesOf(statements.at(-1)!)).toBeGreaterThan(1);
    } finally {
      die(new Error('replica B is gone'));
      // B's connection is gone for good: its consumers are cancelled without the broker
      await b.stop().catch(() => undefined);
      await a?.stop();
    }
  });

  it('a replica whose database is unreachable steps out: the other records every post, once', async () => {
    const vhost = await createTestVhost();
    await watchAll();
    const { logger } = capturingLogger('rec-cutoff');
    const partitions = 4;
    // A's database goes through a proxy that drops what A sends (no socket closed)
    const proxy = new TcpProxy('127.0.0.1', Number(new URL(h.dbHandle.url).port || 5432));
    proxies.push(proxy);
    await proxy.listen();
    const cutDb = createDbClient({ url: proxy.urlFor(h.dbHandle.url), poolSize: 4 });
    const recording = (client: AmqpClient, base: Db, calls: { n: number }) => {
      const stream = createStreamRepository(base);
      return new StreamRecording({
        amqp: client,
        port: portOf(base, counting(calls)(createHitWriter(base))),
        ping: () => stream.position(),
        owe: (target, since) => stream.owe([target], since, new Date(), 'lost'),
        logger,
        partitions,
        queuePrefix: 'poller.stream.record',
        maxLength: 1000,
        rebalanceMs: 60_000,
        rejoinMs: 500,
        writeTimeoutMs: 3000,
        overlapMs: 0,
      });
    };
    const aCalls = { n: 0 };
    const bCalls = { n: 0 };
    // A subscribes first: the active consumer of every queue
    const a = recording(await h.amqpClient(vhost.url, 'rec-a'), cutDb, aCalls);
    await a.start();
    const b = recording(await h.amqpClient(vhost.url, 'rec-b'), db, bCalls);
    await b.start();
    try {
      const publisher = await h.amqpClient(vhost.url, 'rec-publisher');
      const first = await publishPosts(publisher, partitions);
      await expectEachOnce(first);
      expect(aCalls.n).toBeGreaterThan(0);
      expect(bCalls.n).toBe(0);
      // A's pooled connections now hang (nothing answers), new ones time out
      proxy.blackhole();
      const ids = await publishPosts(publisher, partitions);
      await expectEachOnce([...first, ...ids]);
      expect(bCalls.n).toBeGreaterThan(0);
      // posts after the hand-over go to B alike
      const attempts = bCalls.n;
      const more = await publishPosts(publisher, partitions);
      await expectEachOnce([...first, ...ids, ...more]);
      expect(bCalls.n).toBeGreaterThan(attempts);
    } finally {
      await b.stop();
      proxy.cut();
      await a.stop();
      await cutDb.$disconnect().catch(() => undefined);
    }
  });

  it('one statement records many targets’ posts and wakes the outbox relay only when it added a hit', async () => {
    await watchAll();
    const listener = new Client({ connectionString: h.dbHandle.url });
    await listener.connect();
    let woken = 0;
    listener.on('notification', (n) => (woken += n.channel === OUTBOX_CHANNEL ? 1 : 0));
    await listener.query(`LISTEN ${OUTBOX_CHANNEL}`);
    try {
      const tweets = NAMES.map((u, i) => fromStreamPost(streamPost(u, String(9_000_000_000n + BigInt(i)), 'one')));
      const statements = { n: 0 };
      const real = createHitWriter(db);
      const writer = { ...real, recordMany: counting(statements)(real).recordMany };
      const deps = { schedule: createScheduleStore(db), writer };
      expect((await recordPosts(deps, tweets, new Limiter(4))).hits).toBe(NAMES.length);
      await waitFor(() => woken === 1);
      // the same posts again: no hit, no event, no wake-up; the cursors stay
      expect((await recordPosts(deps, tweets, new Limiter(4))).hits).toBe(0);
      await sleep(300);
      expect(woken).toBe(1);
      expect(statements.n).toBe(2);
      expect(await db.hit.count()).toBe(NAMES.length);
      expect(await db.outboxEvent.count()).toBe(NAMES.length);
      const cursors = await db.pollCursor.findMany({ where: { targetKey: { in: NAMES } } });
      expect(cursors.map((c) => c.lastTweetId).sort()).toEqual(tweets.map((t) => t.id).sort());
    } finally {
      await listener.end();
    }
  });
});
