/**
 * What X bills, counted on the answers of the fake X and kept in the real PostgreSQL
 * (x_billable_reads): a resource once per UTC day, across writers and restarts, and the metric
 * x_billable_total moving only for resources no writer had recorded that day.
 */
import { Registry } from 'prom-client';
import { createLogger } from '@sts/common';
import { createDbClient, type Db } from '@sts/db';
import { createTestDatabase, startFakeX, TcpProxy, waitFor, type FakeX, type FakeXTweet } from '@sts/testing';
import { createXSource } from './source';
import { billableReads, isBilledActivityEvent, type XBillableRead } from './billable';
import { createXBilling } from './billing';

const TOKEN = 'billing-token';

async function counted(registry: Registry): Promise<Record<string, number>> {
  const metric = registry.getSingleMetric('x_billable_total');
  if (!metric) throw new Error('x_billable_total is not registered');
  return Object.fromEntries((await metric.get()).values.map((v) => [String(v.labels.resource), v.value]));
}

describe('what X bills (x_billable_reads on the real PostgreSQL, the fake X)', () => {
  let t: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;
  let db2: Db;
  let fake: FakeX;
  let posts: FakeXTweet[];

  const rows = async () =>
    db.$queryRaw<{ day: string; resource: string; resource_id: string; account: string | null }[]>`
      SELECT day::text, resource, resource_id, account FROM x_billable_reads ORDER BY day, resource, resource_id`;

  beforeAll(async () => {
    t = await createTestDatabase();
    db = createDbClient({ url: t.url, poolSize: 2 });
    db2 = createDbClient({ url: t.url, poolSize: 2 });
    // Prisma ends the pool at $disconnect once it used it
    await db2.$queryRaw`SELECT 1`;
    fake = await startFakeX({ bearerToken: TOKEN });
    fake.state.addUser({ id: '101', username: 'Alice' });
    fake.state.addUser({ id: '102', username: 'bob' });
    posts = [1, 2, 3].map((i) => fake.state.post({ author: 'Alice', text: `post ${i}` }));
    fake.state.post({ author: 'bob', text: 'not asked for' });
  });
  afterAll(async () => {
    await fake.stop();
    await db.$disconnect();
    await db2.$disconnect();
    await t.drop();
  });
  beforeEach(async () => {
    await db.$executeRaw`TRUNCATE x_billable_reads`;
  });

  it('counts the posts and users X returned once per UTC day, however often they are read again', async () => {
    const registry = new Registry();
    const billing = createXBilling({ db, registry, flushMs: 5 });
    const source = createXSource({ baseUrl: fake.url, bearerToken: TOKEN, billing });
    expect(await counted(registry)).toEqual({ post_read: 0, user_read: 0, activity_event: 0 });
    const before = fake.requests.count({ family: 'search' });

    expect((await source.search('from:alice', { limit: 10 })).items).toHaveLength(3);
    await billing.flush();
    expect(await counted(registry)).toMatchObject({ post_read: 3 });
    // the same posts again (a search, a lookup by id) and the users twice: X bills nothing more
    await source.search('from:alice', { limit: 10 });
    await source.getTweet(posts[0]!.id);
    await source.users.resolve(['alice', 'bob']);
    await source.users.forget('alice');
    await source.users.forget('bob');
    await source.users.resolve(['alice', 'bob']);
    await billing.close();
    expect(fake.requests.count({ family: 'search' }) - before).toBe(2);

    const today = new Date().toISOString().slice(0, 10);
    expect(await rows()).toEqual([
      ...posts
        .map((p) => p.id)
        .sort()
        .map((id) => ({ day: today, resource: 'post_read', resource_id: id, account: 'alice' })),
      { day: today, resource: 'user_read', resource_id: '101', account: 'alice' },
      { day: today, resource: 'user_read', resource_id: '102', account: 'bob' },
    ]);
    expect(await counted(registry)).toEqual({ post_read: 3, user_read: 2, activity_event: 0 });
  });

  it("an account's timeline read (the stream backfill's other budget) bills its posts", async () => {
    const registry = new Registry();
    const billing = createXBilling({ db, registry, flushMs: 5 });
    const source = createXSource({ baseUrl: fake.url, bearerToken: TOKEN, billing });
    expect((await source.readAccountSince('101', { sinceId: '0' })).tweets).toHaveLength(3);
    await billing.close();
    expect((await rows()).map((r) => [r.resource, r.resource_id, r.account])).toEqual(
      posts.map((p) => ['post_read', p.id, 'alice']).sort((a, b) => a[1]!.localeCompare(b[1]!)),
    );
    expect(await counted(registry)).toMatchObject({ post_read: 3 });
  });

  it('bills a resource read again on the next UTC day again', async () => {
    const registry = new Registry();
    const clock = { t: new Date('2026-11-30T23:59:59.900Z') };
    const billing = createXBilling({ db, registry, flushMs: 5, now: () => clock.t });
    const read: XBillableRead = { resource: 'post_read', id: '1900000000000000001', account: 'alice' };
    billing.record([read, read]);
    await billing.flush();
    billing.record([read]);
    clock.t = new Date('2026-12-01T00:00:00.100Z');
    billing.record([read]);
    billing.record([{ resource: 'activity_event', id: 'uuid-1', account: 'alice' }]);
    await billing.close();
    expect((await rows()).map((r) => `${r.day} ${r.resource} ${r.resource_id}`)).toEqual([
      '2026-11-30 post_read 1900000000000000001',
      '2026-12-01 activity_event uuid-1',
      '2026-12-01 post_read 1900000000000000001',
    ]);
    expect(await counted(registry)).toEqual({ post_read: 2, user_read: 0, activity_event: 1 });
  });

  it('two replicas reading the same resources count each once between them, and a restart counts none again', async () => {
    const shared = Array.from({ length: 600 }, (_, i) => ({
      resource: 'post_read' as const,
      id: String(1_800_000_000_000_000_000n + BigInt(i)),
      account: 'alice',
    }));
    const own = (n: string) => [{ resource: 'user_read' as const, id: n, account: n }];
    const [r1, r2] = [new Registry(), new Registry()];
    const a = createXBilling({ db, registry: r1, batchSize: 100 });
    const b = createXBilling({ db: db2, registry: r2, batchSize: 100 });
    // the two write the same rows in interleaved batches, in opposite orders
    a.record([...shared, ...own('a1')]);
    b.record([...[...shared].reverse(), ...own('b1')]);
    await Promise.all([a.close(), b.close()]);
    const [c1, c2] = [await counted(r1), await counted(r2)];
    expect(c1.post_read! + c2.post_read!).toBe(600);
    expect([c1.user_read, c2.user_read]).toEqual([1, 1]);
    expect(await rows()).toHaveLength(602);

    // a restarted replica reads them all again the same day: nothing new to X, nothing counted
    const r3 = new Registry();
    const restarted = createXBilling({ db, registry: r3 });
    restarted.record([...shared, ...own('a1'), ...own('b1')]);
    await restarted.close();
    expect(await counted(r3)).toEqual({ post_read: 0, user_read: 0, activity_event: 0 });
    expect(await rows()).toHaveLength(602);
  });

  it('keeps what it could not write while PostgreSQL is cut off, writes it once it is back, drops the oldest past its bound', async () => {
    const u = new URL(t.url);
    const proxy = new TcpProxy(u.hostname, Number(u.port || 5432));
    await proxy.listen();
    const cutDb = createDbClient({ url: proxy.urlFor(t.url), poolSize: 1 });
    await cutDb.$queryRaw`SELECT 1`;
    const registry = new Registry();
    const logger = createLogger({ service: 'billing-test', level: 'error' });
    const billing = createXBilling({ db: cutDb, registry, flushMs: 20, maxPending: 3, logger });
    try {
      proxy.cut();
      billing.record([1, 2].map((i) => ({ resource: 'user_read' as const, id: String(i), account: null })));
      await billing.flush();
      billing.record([3, 4].map((i) => ({ resource: 'user_read' as const, id: String(i), account: null })));
      expect(await counted(registry)).toMatchObject({ user_read: 0 });
      expect(await rows()).toEqual([]);
      proxy.restore();
      // the timer retries: the three kept (the oldest, 1, dropped past maxPending) are written
      await waitFor(async () => (await rows()).length === 3 || undefined);
      expect((await rows()).map((r) => r.resource_id)).toEqual(['2', '3', '4']);
      await waitFor(async () => (await counted(registry)).user_read === 3 || undefined);
    } finally {
      await billing.close();
      await cutDb.$disconnect();
      await proxy.close();
    }
  });
});

describe('which answers bill what (X pricing: reads per resource returned, post.delete free)', () => {
  it('posts of search, timeline and lookups with their authors; users of users lookups; nothing else', () => {
    const body = {
      data: [
        { id: '1', author_id: '7' },
        { id: '2', author_id: '8' },
      ],
      includes: { users: [{ id: '7', username: 'Alice', name: 'A' }] },
    };
    expect(billableReads('search', body)).toEqual([
      { resource: 'post_read', id: '1', account: 'alice' },
      { resource: 'post_read', id: '2', account: null },
    ]);
    expect(billableReads('tweets', { data: { id: '3', author_id: '7' }, includes: body.includes })).toEqual([
      { resource: 'post_read', id: '3', account: 'alice' },
    ]);
    expect(billableReads('users', { data: [{ id: '7', username: 'Alice' }] })).toEqual([
      { resource: 'user_read', id: '7', account: 'alice' },
    ]);
    expect(billableReads('rules', { data: [{ id: '1' }] })).toEqual([]);
    expect(billableReads('timeline', { errors: [{ title: 'Not Found Error' }] })).toEqual([]);
    expect(['post.create', 'profile.update.bio'].map(isBilledActivityEvent)).toEqual([true, true]);
    expect(isBilledActivityEvent('post.delete')).toBe(false);
  });
});
