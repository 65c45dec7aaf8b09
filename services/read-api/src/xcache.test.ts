/**
 * read-api on the X source (the fake X, real Redis, composed as main.ts does): reads cached in
 * Redis and shared by replicas, identical concurrent reads sharing one upstream call, and a read
 * the fleet's X budget cannot afford answered 503 UPSTREAM_BUSY with Retry-After, never sent.
 */
import { Registry } from 'prom-client';
import { createLogger, createRedis } from '@sts/common';
import { createDbClient, type Db } from '@sts/db';
import { createXBilling } from '@sts/social';
import { createTestDatabase, createTestRedis, rawRequest, startFakeX, waitFor, type FakeX } from '@sts/testing';
import { createReadApi, type ReadApi } from './app';
import { loadReadApiEnv } from './env';
import { buildSource } from './main';

const TOKEN = 'internal-token-for-tests-0123456789';
const logger = createLogger({ service: 'read-api-test', level: 'error' });
const headers = { 'x-internal-token': TOKEN };

describe('read-api on X: read cache, single-flight, UPSTREAM_BUSY', () => {
  let testDb: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;
  let fake: FakeX;
  let redis: ReturnType<typeof createTestRedis>;
  const running: Array<{ api: ReadApi; stop: () => Promise<void> }> = [];

  beforeAll(async () => {
    testDb = await createTestDatabase();
    db = createDbClient({ url: testDb.url });
  });
  afterAll(async () => {
    await db.$disconnect();
    await testDb.drop();
  });
  beforeEach(async () => {
    redis = createTestRedis();
    fake = await startFakeX({ limits: { tweets: 3 }, windowMs: 60_000 });
    fake.state.addUser({ username: 'alice', followers: 7 });
  });
  afterEach(async () => {
    for (const r of running.splice(0)) {
      await r.api.close();
      await r.stop();
    }
    await fake.stop();
    await redis.cleanup();
  });

  /** one read-api replica, wired as main.ts wires it */
  async function replica(extra: Record<string, string> = {}) {
    const env = loadReadApiEnv({
      INTERNAL_TOKEN: TOKEN,
      DATABASE_URL: testDb.url,
      SOCIAL_SOURCE: 'x',
      X_BEARER_TOKEN: 't',
      X_API_BASE_URL: fake.url,
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: redis.prefix,
      X_RATE_LIMITS: 'tweets=3',
      ...extra,
    });
    const registry = new Registry();
    const client = createRedis(env, { maxRetriesPerRequest: 2, logger });
    const billing = createXBilling({ db, registry, logger });
    const source = buildSource(env, { db, logger, registry, redis: client, billing });
    const api = createReadApi({ db, source, internalToken: TOKEN, logger, userCacheTtlMs: 0 });
    running.push({ api, stop: async () => (await billing.close(), client.disconnect()) });
    return { port: await api.listen(0, '127.0.0.1'), registry, billing };
  }

  it('caches profile, timeline first page, tweet and search in Redis, shared by replicas', async () => {
    const tweet = fake.state.post({ author: 'alice', text: 'hello cache' });
    const a = await replica();
    const b = await replica();
    const paths = [
      '/api/v1/users/alice',
      '/api/v1/users/alice/tweets?limit=5',
      `/api/v1/tweets/${tweet.id}`,
      '/api/v1/search?q=hello',
    ];
    for (const path of paths) expect((await rawRequest(a.port, 'GET', path, { headers })).status).toBe(200);
    const upstream = fake.requests.log.length;
    for (const path of paths) {
      const r = await rawRequest(b.port, 'GET', path, { headers });
      expect(r.status).toBe(200);
      expect(JSON.stringify(r.json)).toMatch(/alice|hello cache/);
    }
    expect(fake.requests.log.length).toBe(upstream); // every read came from Redis
    // a later timeline page is not cached: each read of it goes upstream
    fake.state.post({ author: 'alice', text: 'second post' });
    const first = await rawRequest(a.port, 'GET', '/api/v1/users/alice/tweets?limit=1', { headers });
    const cursor = (first.json as { meta: { next_cursor: string } }).meta.next_cursor;
    const before = fake.requests.count({ family: 'timeline' });
    for (const r of [a, b]) {
      const page = await rawRequest(r.port, 'GET', `/api/v1/users/alice/tweets?limit=1&cursor=${cursor}`, { headers });
      expect(page.status).toBe(200);
    }
    expect(fake.requests.count({ family: 'timeline' })).toBe(before + 2);
    const metrics = await a.registry.metrics();
    expect(metrics).toMatch(/x_requests_total\{family="tweets",status="200"\} 1/);
    expect(metrics).toMatch(/x_budget_remaining\{family="tweets"\} 2/);
    // what X billed: alice once, each post once, whichever replica read it and however often
    await Promise.all([a.billing.flush(), b.billing.flush()]);
    const alice = fake.state.user('alice')!;
    const posts = fake.state.tweets.map((t) => t.id).sort();
    // every billed resource is one row (unique per day): wait for all of them, then compare the rows
    const rows = () => db.xBillableRead.findMany({ orderBy: [{ resource: 'asc' }, { resourceId: 'asc' }] });
    const billed = await waitFor(async () => {
      const found = await rows();
      if (found.length >= posts.length + 1) return found;
      await Promise.all([a.billing.flush(), b.billing.flush()]);
      return null;
    }, 10_000).catch(async (err: unknown) => {
      // what reached X, to tell a read that was never made from a read that was not billed
      const calls = fake.requests.log.map((r) => `${r.family} ${r.status} ${r.path}`);
      throw new Error(`${String(err)}; rows ${JSON.stringify(await rows())}; X calls ${JSON.stringify(calls)}`);
    });
    expect(billed.map((r) => [r.resource, r.resourceId, r.account])).toEqual([
      ...posts.map((id) => ['post_read', id, 'alice']),
      ['user_read', alice.id, 'alice'],
    ]);
    const counted = async (r: Registry) =>
      ((await r.getSingleMetric('x_billable_total')!.get()).values as { value: number }[]).reduce(
        (n, v) => n + v.value,
        0,
      );
    expect((await counted(a.registry)) + (await counted(b.registry))).toBe(billed.length);
  });

  it('N identical concurrent reads make one upstream call', async () => {
    const tweet = fake.state.post({ author: 'alice', text: 'busy post' });
    const a = await replica();
    fake.latencyMs = 300;
    const answers = await Promise.all(
      Array.from({ length: 12 }, () => rawRequest(a.port, 'GET', `/api/v1/tweets/${tweet.id}`, { headers })),
    );
    expect(answers.every((r) => r.status === 200)).toBe(true);
    expect(fake.requests.count({ family: 'tweets' })).toBe(1);
    const searches = await Promise.all(
      Array.from({ length: 8 }, () => rawRequest(a.port, 'GET', '/api/v1/search?q=busy&limit=3', { headers })),
    );
    expect(new Set(searches.map((r) => JSON.stringify(r.json))).size).toBe(1);
    expect(fake.requests.count({ family: 'search' })).toBe(1);
  });

  it('a read the budget cannot afford is 503 UPSTREAM_BUSY with Retry-After, and is never sent', async () => {
    const ids = [1, 2, 3, 4].map((i) => fake.state.post({ author: 'alice', text: `t${i}` }).id);
    const a = await replica();
    for (const id of ids.slice(0, 3)) {
      expect((await rawRequest(a.port, 'GET', `/api/v1/tweets/${id}`, { headers })).status).toBe(200);
    }
    const busy = await rawRequest(a.port, 'GET', `/api/v1/tweets/${ids[3]}`, { headers });
    expect(busy.status).toBe(503);
    expect(busy.json).toMatchObject({ code: 'UPSTREAM_BUSY', retry_after: expect.any(Number) });
    const after = Number(busy.headers['retry-after']);
    expect(after).toBeGreaterThanOrEqual(1);
    expect(after).toBeLessThanOrEqual(61);
    expect(fake.requests.count({ family: 'tweets' })).toBe(3);
    expect(fake.requests.count({ status: 429 })).toBe(0);
    // cached reads still answer; other families are not stopped
    expect((await rawRequest(a.port, 'GET', `/api/v1/tweets/${ids[0]}`, { headers })).status).toBe(200);
    expect((await rawRequest(a.port, 'GET', '/api/v1/users/alice', { headers })).status).toBe(200);
    // X's own 429 (another app spent the window) is a 503 too, and stops the family for every replica
    fake.limits.spend('search');
    const limited = await rawRequest(a.port, 'GET', '/api/v1/search?q=t1', { headers });
    expect(limited.status).toBe(503);
    expect(limited.json).toMatchObject({ code: 'UPSTREAM_BUSY' });
    const b = await replica();
    expect((await rawRequest(b.port, 'GET', '/api/v1/search?q=t2', { headers })).status).toBe(503);
    expect(fake.requests.count({ family: 'search' })).toBe(1);
  });

  it('a TTL of 0 turns a kind off', async () => {
    const tweet = fake.state.post({ author: 'alice', text: 'uncached' });
    const a = await replica({ READ_CACHE_TWEET_TTL_MS: '0', X_RATE_LIMITS: '' });
    await rawRequest(a.port, 'GET', `/api/v1/tweets/${tweet.id}`, { headers });
    await rawRequest(a.port, 'GET', `/api/v1/tweets/${tweet.id}`, { headers });
    expect(fake.requests.count({ family: 'tweets' })).toBe(2);
  });
});
