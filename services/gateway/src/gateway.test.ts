import http from 'node:http';
import { Redis } from 'ioredis';
import { createLogger } from '@sts/common';
import { generateApiKey, plansFromEnv, usagePeriod } from '@sts/core';
import { createDbClient, type Db } from '@sts/db';
import { createReadApi, type ReadApi } from '@sts/read-api';
import { createLocalSource, createSocialTweet, createSocialUser } from '@sts/social';
import { createTestDatabase, createTestRedis, waitFor } from '@sts/testing';
import { apiKeyCacheKey, createKeyStore } from './adapters/keys';
import { createQuotaStore } from './adapters/quota';
import { createGateway, type Gateway } from './app';
import { type openApiDocument } from './http/openapi';
import { validate } from './http/schemaCheck';

const logger = createLogger({ service: 'gateway-test', level: 'error' });
const TOKEN = 'internal-token-for-tests-0123456789';

interface Res {
  status: number;
  headers: http.IncomingHttpHeaders;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON answers of many shapes
  body: any;
  text: string;
}

function call(
  port: number,
  path: string,
  headers: Record<string, string> = {},
  method = 'GET',
  body?: string,
): Promise<Res> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, method, headers }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => {
        let parsed: unknown;
        try {
          parsed = text ? JSON.parse(text) : undefined;
        } catch {
          parsed = undefined;
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: parsed, text });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('gateway', () => {
  let dbHandle: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;
  let redisHandle: ReturnType<typeof createTestRedis>;
  let redis: Redis;
  let readApi: ReadApi;
  let readApiPort: number;
  const gateways: Gateway[] = [];

  async function startGateway(
    opts: { perMinute?: number; quota?: number; readApiUrl?: string; keyTtlMs?: number; timeoutMs?: number } = {},
  ) {
    const plans = plansFromEnv({
      PLAN_FREE_MONTHLY_QUOTA: opts.quota ?? 1000,
      PLAN_FREE_PER_MINUTE: opts.perMinute ?? 10_000,
      PLAN_FREE_POLL_INTERVAL_SECONDS: 300,
      PLAN_STARTER_MONTHLY_QUOTA: opts.quota ?? 150_000,
      PLAN_STARTER_PER_MINUTE: opts.perMinute ?? 10_000,
      PLAN_STARTER_POLL_INTERVAL_SECONDS: 60,
    });
    const gw = createGateway({
      keys: createKeyStore({ db, redis, ttlMs: opts.keyTtlMs ?? 2000 }),
      quota: createQuotaStore({ db, redis }),
      plans,
      readApiUrl: opts.readApiUrl ?? `http://127.0.0.1:${readApiPort}`,
      internalToken: TOKEN,
      logger,
      upstreamTimeoutMs: opts.timeoutMs ?? 5000,
      flushIntervalMs: 100,
    });
    gateways.push(gw);
    return { gw, port: await gw.listen(0, '127.0.0.1') };
  }

  async function account(plan: 'free' | 'starter' = 'starter') {
    const a = await db.account.create({ data: { email: `${Math.random().toString(36).slice(2)}@example.com`, plan } });
    const k = generateApiKey();
    await db.apiKey.create({ data: { accountId: a.id, keyHash: k.hash, prefix: k.prefix } });
    return { accountId: a.id, key: k.key, prefix: k.prefix };
  }

  beforeAll(async () => {
    dbHandle = await createTestDatabase();
    db = createDbClient({ url: dbHandle.url, poolSize: 10 });
    redisHandle = createTestRedis();
    redis = new Redis(redisHandle.url, { keyPrefix: redisHandle.prefix });
    readApi = createReadApi({ db, source: createLocalSource({ db }), internalToken: TOKEN, logger, userCacheTtlMs: 0 });
    readApiPort = await readApi.listen(0, '127.0.0.1');
    await createSocialUser(db, { username: 'alice', name: 'Alice', followersCount: 10, verified: true });
    for (let i = 0; i < 25; i++)
      await createSocialTweet(db, {
        authorUsername: 'alice',
        text: `tweet number ${i} about gateways`,
        createdAt: new Date(Date.now() - (25 - i) * 1000),
      });
  });

  afterAll(async () => {
    for (const g of gateways) await g.close().catch(() => undefined);
    await readApi.close();
    redis.disconnect();
    await redisHandle.cleanup();
    await db.$disconnect();
    await dbHandle.drop();
  });

  it('accepts the key in Authorization: Bearer and in X-API-Key, forwarding the answer with quota headers', async () => {
    const { port } = await startGateway();
    const a = await account();
    const r1 = await call(port, '/api/v1/users/alice', { authorization: `Bearer ${a.key}` });
    expect(r1.status).toBe(200);
    expect(r1.body.data).toMatchObject({ username: 'alice', name: 'Alice', followers_count: 10, verified: true });
    const r2 = await call(port, '/api/v1/users/alice', { 'x-api-key': a.key, 'x-request-id': 'my-req-1' });
    expect(r2.status).toBe(200);
    expect(r2.headers['x-request-id']).toBe('my-req-1');
    for (const h of [
      'x-quota-limit',
      'x-quota-remaining',
      'x-quota-reset',
      'x-ratelimit-limit',
      'x-ratelimit-remaining',
      'x-ratelimit-reset',
      'ratelimit',
      'ratelimit-policy',
    ]) {
      expect(r2.headers[h]).toBeDefined();
    }
    expect(Number(r1.headers['x-quota-remaining']) - Number(r2.headers['x-quota-remaining'])).toBe(1);
    expect(r2.headers['x-quota-limit']).toBe('150000');
    expect(r2.headers.ratelimit).toMatch(/^"minute";r=\d+;t=\d+, "month";r=\d+;t=\d+$/);
  });

  it('refuses missing, malformed, unknown and revoked keys with 401 JSON', async () => {
    const { port } = await startGateway({ keyTtlMs: 2000 });
    const missing = await call(port, '/api/v1/users/alice');
    expect(missing.status).toBe(401);
    expect(missing.body).toMatchObject({ code: 'UNAUTHORIZED', error: expect.stringMatching(/missing API key/) });
    expect(missing.body.request_id).toBeTruthy();
    const valid = generateApiKey().key;
    const bad = await call(port, '/api/v1/users/alice', { authorization: `Bearer ${valid.slice(0, -1)}x` });
    expect(bad.body).toMatchObject({ code: 'UNAUTHORIZED', error: 'malformed API key' });
    expect((await call(port, '/api/v1/users/alice', { authorization: 'Basic abc' })).body.error).toBe(
      'malformed API key',
    );
    const unknown = await call(port, '/api/v1/users/alice', { authorization: `Bearer ${valid}` });
    expect(unknown.body).toMatchObject({ code: 'UNAUTHORIZED', error: 'unknown or revoked API key' });
    expect(unknown.headers['x-quota-limit']).toBeUndefined();

    // revoked: stops within 5 s even with every cache warm, without anyone evicting anything
    const a = await account();
    expect((await call(port, '/api/v1/users/alice', { 'x-api-key': a.key })).status).toBe(200);
    await db.apiKey.update({ where: { prefix: a.prefix }, data: { revokedAt: new Date() } });
    const revokedAt = Date.now();
    await waitFor(
      async () => (await call(port, '/api/v1/users/alice', { 'x-api-key': a.key })).status === 401,
      6000,
      100,
    );
    expect(Date.now() - revokedAt).toBeLessThan(5000);
  });

  it('the quota is exact under concurrency: 200 calls against 50 give exactly 50 successes', async () => {
    const { gw, port } = await startGateway({ quota: 50 });
    const a = await account();
    const results = await Promise.all(
      Array.from({ length: 200 }, () => call(port, '/api/v1/users/alice', { 'x-api-key': a.key })),
    );
    expect(results.filter((r) => r.status === 200)).toHaveLength(50);
    const refused = results.filter((r) => r.status === 429);
    expect(refused).toHaveLength(150);
    expect(refused[0]!.body).toMatchObject({ code: 'QUOTA_EXCEEDED', limit: 50, remaining: 0 });
    expect(Number(refused[0]!.headers['retry-after'])).toBeGreaterThan(0);
    expect(refused[0]!.headers['x-quota-remaining']).toBe('0');
    await gw.flush();
    const usage = await db.usageMonthly.findUnique({
      where: { accountId_period: { accountId: a.accountId, period: usagePeriod() } },
    });
    expect(usage!.used).toBe(50);
  });

  it('404s and upstream failures consume nothing', async () => {
    const { port } = await startGateway();
    const a = await account();
    const first = await call(port, '/api/v1/users/alice', { 'x-api-key': a.key });
    const before = Number(first.headers['x-quota-remaining']);
    const nf = await call(port, '/api/v1/users/nobody_here', { 'x-api-key': a.key });
    expect(nf.status).toBe(404);
    expect(nf.body.code).toBe('USER_NOT_FOUND');
    expect(Number(nf.headers['x-quota-remaining'])).toBe(before);
    const badReq = await call(port, '/api/v1/search?q=', { 'x-api-key': a.key });
    expect(badReq.status).toBe(400);
    const after = await call(port, '/api/v1/users/alice', { 'x-api-key': a.key });
    expect(Number(after.headers['x-quota-remaining'])).toBe(before - 1);

    const down = await startGateway({ readApiUrl: 'http://127.0.0.1:1' });
    const t0 = Date.now();
    const r = await call(down.port, '/api/v1/users/alice', { 'x-api-key': a.key });
    expect(r.status).toBe(503);
    expect(r.body.code).toBe('SERVICE_UNAVAILABLE');
    expect(Date.now() - t0).toBeLessThan(3000);
    const again = await call(port, '/api/v1/users/alice', { 'x-api-key': a.key });
    expect(Number(again.headers['x-quota-remaining'])).toBe(before - 2);
  });

  it('an upstream that hangs is a 504, not a hang', async () => {
    const hanging = http.createServer(() => undefined);
    await new Promise<void>((r) => hanging.listen(0, '127.0.0.1', r));
    try {
      const { port } = await startGateway({
        readApiUrl: `http://127.0.0.1:${(hanging.address() as { port: number }).port}`,
        timeoutMs: 300,
      });
      const a = await account();
      const r = await call(port, '/api/v1/users/alice', { 'x-api-key': a.key });
      expect(r.status).toBe(504);
      expect(r.body.code).toBe('UPSTREAM_ERROR');
    } finally {
      hanging.closeAllConnections();
      hanging.close();
    }
  });

  it("a Redis flush keeps the month's count (re-initialised from PostgreSQL)", async () => {
    const { gw, port } = await startGateway();
    const a = await account();
    for (let i = 0; i < 7; i++)
      expect((await call(port, '/api/v1/users/alice', { 'x-api-key': a.key })).status).toBe(200);
    await gw.flush();
    await redisHandle.cleanup(); // every key of this test's prefix: counters and caches
    const r = await call(port, '/api/v1/users/alice', { 'x-api-key': a.key });
    expect(r.status).toBe(200);
    expect(r.headers['x-quota-remaining']).toBe(String(150_000 - 8));
  });

  it('the per-minute limit answers 429 RATE_LIMIT_EXCEEDED with Retry-After', async () => {
    const { port } = await startGateway({ perMinute: 3 });
    const a = await account();
    const statuses: number[] = [];
    let last: Res | undefined;
    for (let i = 0; i < 5; i++) {
      last = await call(port, '/api/v1/users/alice', { 'x-api-key': a.key });
      statuses.push(last.status);
    }
    // unless the minute turned over mid-test, exactly 3 pass
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(3);
    expect(statuses).toContain(429);
    const limited = last!.status === 429 ? last! : undefined;
    if (limited) {
      expect(limited.body.code).toBe('RATE_LIMIT_EXCEEDED');
      expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(Number(limited.headers['retry-after'])).toBeLessThanOrEqual(60);
      expect(limited.headers['x-ratelimit-remaining']).toBe('0');
    }
  });

  it('serves every endpoint through the gateway, and the OpenAPI document matches the real answers', async () => {
    const { port } = await startGateway();
    const a = await account();
    const spec = await call(port, '/api/v1/openapi.json');
    expect(spec.status).toBe(200);
    expect(spec.body.openapi).toBe('3.1.0');
    const monitor = await db.monitor.create({
      data: { accountId: a.accountId, targetUsername: 'alice', targetKey: 'alice', keywords: ['gateways'] },
    });
    const tweet = await db.socialTweet.findFirstOrThrow({ where: { author: { usernameKey: 'alice' } } });
    await db.hit.create({
      data: {
        monitorId: monitor.id,
        tweetId: tweet.id,
        tweetText: tweet.text,
        tweetAuthorId: tweet.authorId,
        tweetAuthorUsername: 'alice',
        tweetCreatedAt: tweet.createdAt,
      },
    });
    const h = { 'x-api-key': a.key };
    const cases: [string, string, number][] = [
      ['/api/v1/users/alice', '/api/v1/users/{username}', 200],
      ['/api/v1/users/alice/tweets?limit=5', '/api/v1/users/{username}/tweets', 200],
      [`/api/v1/tweets/${tweet.id}`, '/api/v1/tweets/{id}', 200],
      ['/api/v1/search?q=gateways&limit=3', '/api/v1/search', 200],
      ['/api/v1/monitors?include_hits=1&hit_limit=2', '/api/v1/monitors', 200],
      [`/api/v1/monitors/${monitor.id}/hits`, '/api/v1/monitors/{id}/hits', 200],
      ['/api/v1/users/nobody_here', '/api/v1/users/{username}', 404],
      ['/api/v1/search?limit=0&q=x', '/api/v1/search', 400],
    ];
    const doc = spec.body as typeof openApiDocument;
    for (const [url, path, status] of cases) {
      const r = await call(port, url, h);
      expect([url, r.status]).toEqual([url, status]);
      const op = (
        doc.paths as unknown as Record<
          string,
          { get: { responses: Record<string, { content: { 'application/json': { schema: unknown } } }> } }
        >
      )[path]!.get;
      const schema = op.responses[String(status)]!.content['application/json'].schema;
      expect([url, validate(schema, r.body, doc)]).toEqual([url, []]);
    }
    const monitors = await call(port, '/api/v1/monitors?include_hits=1', h);
    expect(monitors.body.data[0]).toMatchObject({
      id: monitor.id,
      keywords: ['gateways'],
      recent_hits: [expect.objectContaining({ tweet_id: tweet.id })],
    });
    const post = await call(
      port,
      '/api/v1/tweets',
      { ...h, 'content-type': 'application/json' },
      'POST',
      JSON.stringify({ text: 'hi' }),
    );
    expect(post.status).toBe(501);
    expect(validate((doc.components.schemas as Record<string, unknown>).Error, post.body, doc)).toEqual([]);
    // the validator is not a rubber stamp
    expect(validate({ $ref: '#/components/schemas/User' }, { id: 'x', username: 'a' }, doc).length).toBeGreaterThan(0);
  });

  it('cursors page through a timeline without gaps or repeats', async () => {
    const { port } = await startGateway();
    const a = await account();
    const seen: string[] = [];
    let next: string | null = null;
    do {
      const r: Res = await call(
        port,
        `/api/v1/users/alice/tweets?limit=7${next ? `&cursor=${encodeURIComponent(next)}` : ''}`,
        { 'x-api-key': a.key },
      );
      expect(r.status).toBe(200);
      seen.push(...(r.body.data as { id: string }[]).map((t) => t.id));
      next = r.body.meta.next_cursor as string | null;
    } while (next);
    const all = await db.socialTweet.findMany({
      where: { author: { usernameKey: 'alice' } },
      orderBy: { createdAt: 'desc' },
    });
    expect(seen).toEqual(all.map((t) => t.id));
  });

  it('strips client-sent internal headers and answers unknown paths with JSON 404', async () => {
    const { port } = await startGateway();
    const a = await account();
    const other = await account();
    const m = await db.monitor.create({
      data: { accountId: other.accountId, targetUsername: 'alice', targetKey: 'alice' },
    });
    const r = await call(port, `/api/v1/monitors/${m.id}/hits`, {
      'x-api-key': a.key,
      'x-account-id': other.accountId,
    });
    expect(r.status).toBe(404);
    const nf = await call(port, '/nope');
    expect(nf.status).toBe(404);
    expect(nf.body.code).toBe('NOT_FOUND');
    expect((await call(port, '/healthz')).status).toBe(200);
  });

  it('caches key lookups in Redis under the configured prefix', async () => {
    const { port } = await startGateway();
    const a = await account();
    await call(port, '/api/v1/users/alice', { 'x-api-key': a.key });
    const row = await db.apiKey.findUniqueOrThrow({ where: { prefix: a.prefix } });
    expect(await redis.get(apiKeyCacheKey(row.keyHash))).toContain(a.accountId);
  });
});
