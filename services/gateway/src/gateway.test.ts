/**
 * The gateway against real PostgreSQL and Redis and a RUNNING read-api (its composition root as a
 * child process, as in production). Stand-in upstreams (small local HTTP servers) are used only
 * where read-api cannot be made to misbehave on demand: hanging, answering 500, holding a call.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { createLogger } from '@sts/common';
import { generateApiKey, periodResetEpoch, plansFromEnv, usagePeriod } from '@sts/core';
import { createDbClient, type Db } from '@sts/db';
import { createSocialTweet, createSocialUser } from '@sts/social';
import {
  createAccountWithKey,
  createTestDatabase,
  createTestRedis,
  type ServiceProcess,
  spawnService,
  waitFor,
} from '@sts/testing';
import { apiKeyCacheKey } from '@sts/common';
import { createKeyStore } from './adapters/keys';
import { createQuotaStore } from './adapters/leasedQuota';
import { createGateway, type Gateway } from './app';
import type { openApiDocument } from './http/openapi';
import { validate } from '../test/schemaCheck';

const logger = createLogger({ service: 'gateway-test', level: 'error' });
const TOKEN = 'internal-token-for-tests-0123456789';
const LIMIT_HEADERS = [
  'x-quota-limit',
  'x-quota-remaining',
  'x-quota-reset',
  'x-ratelimit-limit',
  'x-ratelimit-remaining',
  'x-ratelimit-reset',
  'ratelimit',
  'ratelimit-policy',
];

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

/** A local HTTP server standing in for read-api where it must misbehave on purpose (it echoes x-request-id, as read-api does). */
async function standIn(handler: http.RequestListener) {
  const server = http.createServer((req, res) => {
    const id = req.headers['x-request-id'];
    if (id !== undefined) res.setHeader('x-request-id', id);
    handler(req, res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

type Doc = typeof openApiDocument;
type Operation = { responses: Record<string, { content?: { 'application/json': { schema: unknown } } }> };
const operation = (doc: Doc, path: string, method = 'get'): Operation =>
  (doc.paths as unknown as Record<string, Record<string, Operation>>)[path]![method]!;

describe('gateway', () => {
  let dbHandle: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;
  let redisHandle: ReturnType<typeof createTestRedis>;
  let redis: Redis;
  let readApi: ServiceProcess;
  let readApiUrl: string;
  const gateways: Gateway[] = [];

  async function startGateway(
    opts: {
      perMinute?: number;
      quota?: number;
      readApiUrl?: string;
      keyTtlMs?: number;
      timeoutMs?: number;
      now?: () => Date;
    } = {},
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
      readApiUrl: opts.readApiUrl ?? readApiUrl,
      internalToken: TOKEN,
      logger,
      upstreamTimeoutMs: opts.timeoutMs ?? 5000,
      flushIntervalMs: 100,
      ...(opts.now ? { now: opts.now } : {}),
    });
    gateways.push(gw);
    return { gw, port: await gw.listen(0, '127.0.0.1') };
  }

  const account = (plan: 'free' | 'starter' = 'starter') => createAccountWithKey(db, plan);

  const usage = async (accountId: string) =>
    (
      await db.usageMonthly.findUnique({
        where: { accountId_period: { accountId, period: usagePeriod() } },
      })
    )?.used ?? 0;

  beforeAll(async () => {
    dbHandle = await createTestDatabase();
    db = createDbClient({ url: dbHandle.url, poolSize: 10 });
    redisHandle = createTestRedis();
    redis = new Redis(redisHandle.url, { keyPrefix: redisHandle.prefix });
    await createSocialUser(db, { username: 'alice', name: 'Alice', followersCount: 10, verified: true });
    for (let i = 0; i < 25; i++)
      await createSocialTweet(db, {
        authorUsername: 'alice',
        text: `tweet number ${i} about gateways`,
        createdAt: new Date(Date.now() - (25 - i) * 1000),
      });
    readApi = spawnService('services/read-api/src/main.ts', {
      DATABASE_URL: dbHandle.url,
      INTERNAL_TOKEN: TOKEN,
      LOG_LEVEL: 'error',
      READ_API_PORT: '0',
      READ_API_HOST: '127.0.0.1',
    });
    const { port } = JSON.parse(await readApi.waitForLine(/read-api listening/)) as { port: number };
    readApiUrl = `http://127.0.0.1:${port}`;
  });

  afterAll(async () => {
    for (const g of gateways) await g.close().catch(() => undefined);
    readApi.child.kill('SIGTERM');
    await readApi.exited;
    redis.disconnect();
    await redisHandle.cleanup();
    await db.$disconnect();
    await dbHandle.drop();
  });

  it('accepts the key in Authorization: Bearer and in X-API-Key, with the limit headers and a request id', async () => {
    const { port } = await startGateway();
    const a = await account();
    const r1 = await call(port, '/api/v1/users/alice', { authorization: `Bearer ${a.key}` });
    expect(r1.status).toBe(200);
    expect(r1.body.data).toMatchObject({ username: 'alice', name: 'Alice', followers_count: 10, verified: true });
    expect(r1.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    const r2 = await call(port, '/api/v1/users/alice', { 'x-api-key': a.key, 'x-request-id': 'my-req-1' });
    expect(r2.status).toBe(200);
    expect(r2.headers['x-request-id']).toBe('my-req-1');
    for (const h of LIMIT_HEADERS) expect([h, r2.headers[h]]).toEqual([h, expect.any(String)]);
    expect(Number(r1.headers['x-quota-remaining']) - Number(r2.headers['x-quota-remaining'])).toBe(1);
    expect(r2.headers['x-quota-limit']).toBe('150000');
    expect(r2.headers['x-quota-remaining']).toBe('149998');
    expect(r2.headers['x-quota-reset']).toBe(String(periodResetEpoch()));
    expect(r2.headers['x-ratelimit-limit']).toBe('10000');
    expect(Number(r2.headers['x-ratelimit-reset']) % 60).toBe(0);
    expect(r2.headers['ratelimit-policy']).toMatch(/^"minute";q=10000;w=60, "month";q=150000;w=\d+$/);
    expect(r2.headers.ratelimit).toMatch(/^"minute";r=\d+;t=\d+, "month";r=149998;t=\d+$/);
    // an invalid client request id is replaced, not echoed
    const r3 = await call(port, '/api/v1/users/alice', { 'x-api-key': a.key, 'x-request-id': 'bad id\twith tab' });
    expect(r3.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('refuses missing, malformed, unknown and revoked keys with 401 JSON (no account headers)', async () => {
    const { port } = await startGateway({ keyTtlMs: 2000 });
    const missing = await call(port, '/api/v1/users/alice');
    expect(missing.status).toBe(401);
    expect(missing.body).toMatchObject({ code: 'UNAUTHORIZED', error: expect.stringMatching(/missing API key/) });
    expect(missing.body.request_id).toBe(missing.headers['x-request-id']);
    const valid = generateApiKey().key;
    const last = valid.at(-1) === 'A' ? 'B' : 'A';
    const bad = await call(port, '/api/v1/users/alice', { authorization: `Bearer ${valid.slice(0, -1)}${last}` });
    expect(bad.body).toMatchObject({ code: 'UNAUTHORIZED', error: 'malformed API key' });
    expect((await call(port, '/api/v1/users/alice', { authorization: 'Basic abc' })).body.error).toBe(
      'malformed API key',
    );
    expect((await call(port, '/api/v1/users/alice', { 'x-api-key': 'sts_live_short' })).status).toBe(401);
    const unknown = await call(port, '/api/v1/users/alice', { authorization: `Bearer ${valid}` });
    expect(unknown.status).toBe(401);
    expect(unknown.body).toMatchObject({ code: 'UNAUTHORIZED', error: 'unknown or revoked API key' });
    for (const r of [missing, bad, unknown]) for (const h of LIMIT_HEADERS) expect(r.headers[h]).toBeUndefined();

    // revoked in the database only (no one evicts any cache): stops within 5 s with every cache warm
    const a = await account();
    expect((await call(port, '/api/v1/users/alice', { 'x-api-key': a.key })).status).toBe(200);
    const row = await db.apiKey.findUniqueOrThrow({ where: { prefix: a.prefix } });
    expect(await redis.get(apiKeyCacheKey(row.keyHash))).toContain(a.accountId);
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
    for (const r of refused) expect(r.body.code).toBe('QUOTA_EXCEEDED');
    expect(refused[0]!.body).toMatchObject({ limit: 50, remaining: 0 });
    const retryAfter = Number(refused[0]!.headers['retry-after']);
    expect(Math.abs(retryAfter - (periodResetEpoch() - Date.now() / 1000))).toBeLessThan(5);
    expect(refused[0]!.body.retry_after).toBe(retryAfter);
    expect(refused[0]!.headers['x-quota-remaining']).toBe('0');
    await gw.flush();
    expect(await usage(a.accountId)).toBe(50);
  });

  it('404s, 400s, 405s, read-api errors and an unreachable read-api consume nothing', async () => {
    const { port } = await startGateway();
    const a = await account();
    const h = { 'x-api-key': a.key };
    const first = await call(port, '/api/v1/users/alice', h);
    const before = Number(first.headers['x-quota-remaining']);
    const nf = await call(port, '/api/v1/users/nobody_here', h);
    expect(nf.status).toBe(404);
    expect(nf.body.code).toBe('USER_NOT_FOUND');
    expect(Number(nf.headers['x-quota-remaining'])).toBe(before);
    expect((await call(port, '/api/v1/search?q=', h)).status).toBe(400);
    const wrongMethod = await call(port, '/api/v1/monitors', h, 'DELETE');
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.allow).toBeDefined();
    expect((await call(port, '/api/v1/nothing/here', h)).status).toBe(404);

    // read-api answering 500
    const failing = await standIn((_req, res) => {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end('{"error":"internal error","code":"INTERNAL","request_id":"x"}');
    });
    const viaFailing = await startGateway({ readApiUrl: failing.url });
    // each gateway leases quota units; unused ones go back to Redis after idleReturnMs (250 ms),
    // and until then another gateway's remaining count sees them as held
    const settle = () => new Promise((res) => setTimeout(res, 400));
    await settle();
    const f = await call(viaFailing.port, '/api/v1/users/alice', h);
    expect(f.status).toBe(500);
    expect(Number(f.headers['x-quota-remaining'])).toBe(before);
    await failing.close();

    // nothing listening: 503 at once, with the limit headers
    const down = await startGateway({ readApiUrl: 'http://127.0.0.1:1' });
    await settle();
    const t0 = Date.now();
    const r = await call(down.port, '/api/v1/users/alice', h);
    expect(Date.now() - t0).toBeLessThan(3000);
    expect(r.status).toBe(503);
    expect(r.body).toMatchObject({ code: 'SERVICE_UNAVAILABLE', request_id: r.headers['x-request-id'] });
    expect(Number(r.headers['x-quota-remaining'])).toBe(before);

    await settle();
    const again = await call(port, '/api/v1/users/alice', h);
    expect(Number(again.headers['x-quota-remaining'])).toBe(before - 1);
    await down.gw.flush();
    await new Promise((res) => setTimeout(res, 250)); // the first gateway's own flush timer
    expect(await usage(a.accountId)).toBe(2);
  });

  it('an upstream that accepts but never answers is a 504 UPSTREAM_ERROR, not a hang', async () => {
    const hanging = await standIn(() => undefined);
    try {
      const { port } = await startGateway({ readApiUrl: hanging.url, timeoutMs: 300 });
      const a = await account();
      const r = await call(port, '/api/v1/users/alice', { 'x-api-key': a.key });
      expect(r.status).toBe(504);
      expect(r.body.code).toBe('UPSTREAM_ERROR');
      expect(r.headers['x-quota-remaining']).toBe('150000');
    } finally {
      await hanging.close();
    }
  });

  it("a Redis flush (every key of the prefix deleted) keeps the month's count, including calls in flight", async () => {
    // a stand-in read-api that holds /api/v1/users/held until told to answer
    let releaseHeld: (() => void) | undefined;
    const upstream = await standIn((req, res) => {
      const answer = () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"data":{}}');
      };
      if (req.url === '/api/v1/users/held') releaseHeld = answer;
      else answer();
    });
    try {
      const { gw, port } = await startGateway({ readApiUrl: upstream.url, quota: 1000 });
      const a = await account();
      const h = { 'x-api-key': a.key };
      for (let i = 0; i < 5; i++) expect((await call(port, '/api/v1/users/alice', h)).status).toBe(200);
      const held = call(port, '/api/v1/users/held', h);
      await waitFor(() => Promise.resolve(releaseHeld !== undefined), 5000, 10);
      // counters, key cache: all gone (other tests' keys are under other accounts, unaffected)
      await redisHandle.cleanup();
      const next = await call(port, '/api/v1/users/alice', h);
      expect(next.status).toBe(200);
      // 5 done + 1 in flight + this one
      expect(next.headers['x-quota-remaining']).toBe(String(1000 - 7));
      releaseHeld!();
      expect((await held).status).toBe(200);
      const last = await call(port, '/api/v1/users/alice', h);
      expect(last.headers['x-quota-remaining']).toBe(String(1000 - 8));
      await gw.flush();
      expect(await usage(a.accountId)).toBe(8);

      // and a flush after everything was written through starts from PostgreSQL alone
      await redisHandle.cleanup();
      const after = await call(port, '/api/v1/users/alice', h);
      expect(after.headers['x-quota-remaining']).toBe(String(1000 - 9));
    } finally {
      await upstream.close();
    }
  });

  it('the per-minute limit answers 429 RATE_LIMIT_EXCEEDED with Retry-After until the minute ends', async () => {
    // a clock held 42 s into a minute, moved on by hand
    let clock = Math.floor(Date.now() / 60_000) * 60_000 + 42_000;
    const { port } = await startGateway({ perMinute: 3, now: () => new Date(clock) });
    const a = await account();
    const h = { 'x-api-key': a.key };
    const statuses: number[] = [];
    let last: Res | undefined;
    for (let i = 0; i < 5; i++) {
      last = await call(port, '/api/v1/users/alice', h);
      statuses.push(last.status);
    }
    expect(statuses).toEqual([200, 200, 200, 429, 429]);
    expect(last!.body).toMatchObject({ code: 'RATE_LIMIT_EXCEEDED', limit: 3, remaining: 0, retry_after: 18 });
    expect(last!.headers['retry-after']).toBe('18');
    expect(last!.headers['x-ratelimit-remaining']).toBe('0');
    expect(last!.headers['x-ratelimit-reset']).toBe(String((clock + 18_000) / 1000));
    expect(last!.headers.ratelimit).toMatch(/^"minute";r=0;t=18, /);
    // refused calls used no quota: 3 units used
    expect(last!.headers['x-quota-remaining']).toBe(String(150_000 - 3));
    clock += 18_000; // the next minute
    expect((await call(port, '/api/v1/users/alice', h)).status).toBe(200);
  });

  it('serves every endpoint through the gateway, and the OpenAPI document matches the real answers', async () => {
    const { port } = await startGateway();
    const a = await account();
    const spec = await call(port, '/api/v1/openapi.json');
    expect(spec.status).toBe(200);
    expect(spec.body.openapi).toBe('3.1.0');
    for (const hname of LIMIT_HEADERS) expect(spec.headers[hname]).toBeUndefined();
    const doc = spec.body as Doc;
    const monitor = await db.monitor.create({
      data: { accountId: a.accountId, targetUsername: 'alice', targetKey: 'alice', keywords: ['gateways'] },
    });
    await db.monitor.create({ data: { accountId: a.accountId, targetUsername: 'bob', targetKey: 'bob' } });
    const tweet = await db.socialTweet.findFirstOrThrow({ where: { author: { usernameKey: 'alice' } } });
    await db.hit.create({
      data: {
        monitorId: monitor.id,
        tweetId: String(tweet.id),
        tweetText: tweet.text,
        tweetAuthorId: String(tweet.authorId),
        tweetAuthorUsername: 'alice',
        tweetCreatedAt: tweet.createdAt,
      },
    });
    // a filled gap and an open one, so the coverage answer carries both shapes
    await db.coverageGap.createMany({
      data: [
        { targetKey: 'alice', startsAt: new Date(Date.now() - 60_000), reason: 'source_error' },
        {
          targetKey: 'alice',
          startsAt: new Date(Date.now() - 600_000),
          endsAt: new Date(Date.now() - 500_000),
          reason: 'stream_down',
          filledAt: new Date(Date.now() - 400_000),
        },
      ],
    });
    const h = { 'x-api-key': a.key };
    const cases: [string, string, number][] = [
      ['/api/v1/users/alice', '/api/v1/users/{username}', 200],
      ['/api/v1/users/alice/tweets?limit=5', '/api/v1/users/{username}/tweets', 200],
      [`/api/v1/tweets/${tweet.id}`, '/api/v1/tweets/{id}', 200],
      ['/api/v1/search?q=gateways&limit=3', '/api/v1/search', 200],
      ['/api/v1/monitors', '/api/v1/monitors', 200],
      ['/api/v1/monitors?include_hits=1&hit_limit=2', '/api/v1/monitors', 200],
      [`/api/v1/monitors/${monitor.id}/hits`, '/api/v1/monitors/{id}/hits', 200],
      [`/api/v1/monitors/${monitor.id}/coverage`, '/api/v1/monitors/{id}/coverage', 200],
      ['/api/v1/users/nobody_here', '/api/v1/users/{username}', 404],
      ['/api/v1/tweets/123', '/api/v1/tweets/{id}', 404],
      ['/api/v1/monitors/00000000-0000-4000-8000-000000000000/hits', '/api/v1/monitors/{id}/hits', 404],
      ['/api/v1/monitors/00000000-0000-4000-8000-000000000000/coverage', '/api/v1/monitors/{id}/coverage', 404],
      ['/api/v1/search?limit=0&q=x', '/api/v1/search', 400],
      ['/api/v1/users/alice/tweets?limit=1e3', '/api/v1/users/{username}/tweets', 400],
    ];
    for (const [url, path, status] of cases) {
      const r = await call(port, url, h);
      expect([url, r.status]).toEqual([url, status]);
      const schema = operation(doc, path).responses[String(status)]!.content!['application/json'].schema;
      expect([url, validate(schema, r.body, doc)]).toEqual([url, []]);
      if (status === 200) expect(r.body.data).toBeDefined();
    }
    // monitors with their hits
    const monitors = await call(port, '/api/v1/monitors?include_hits=1', h);
    expect(monitors.body.meta.count).toBe(2);
    expect(monitors.body.data).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          id: monitor.id,
          keywords: ['gateways'],
          recent_hits: [expect.objectContaining({ tweet_id: String(tweet.id) })],
        }),
        expect.objectContaining({ target_username: 'bob', keywords: null }),
      ]),
    );
    // POST /api/v1/tweets: 501 coming soon, 400 without text, 415 for another content type
    const post = (body: string, type = 'application/json') =>
      call(port, '/api/v1/tweets', { ...h, 'content-type': type }, 'POST', body);
    const postCases: [Res, number][] = [
      [await post(JSON.stringify({ text: 'hi' })), 501],
      [await post(JSON.stringify({})), 400],
      [await post('{not json'), 400],
      [await post('text=hi', 'application/x-www-form-urlencoded'), 415],
    ];
    for (const [r, status] of postCases) {
      expect(r.status).toBe(status);
      const schema = operation(doc, '/api/v1/tweets', 'post').responses[String(status)]!.content!['application/json']
        .schema;
      expect(validate(schema, r.body, doc)).toEqual([]);
    }
    // HEAD answers the GET's headers without a body; a chunked POST body is forwarded too
    const get = await call(port, '/api/v1/users/alice', h);
    const head = await call(port, '/api/v1/users/alice', h, 'HEAD');
    expect(head.status).toBe(200);
    expect(head.text).toBe('');
    expect(head.headers['content-length']).toBe(get.headers['content-length']);
    const chunked = await new Promise<number>((resolve, reject) => {
      const req = http.request(
        {
          host: '127.0.0.1',
          port,
          path: '/api/v1/tweets',
          method: 'POST',
          headers: { ...h, 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', reject);
      req.write('{"text":');
      req.end('"hello"}');
    });
    expect(chunked).toBe(501);
    // the gateway's own answers fit the document too: 401 and 429
    const unauthorised = await call(port, '/api/v1/users/alice');
    expect(
      validate(
        operation(doc, '/api/v1/users/{username}').responses['401']!.content!['application/json'].schema,
        unauthorised.body,
        doc,
      ),
    ).toEqual([]);
    // the document names every endpoint of docs/api.md, both key schemes and the quota headers
    expect(Object.keys(doc.paths).sort()).toEqual(
      [
        '/api/v1/monitors',
        '/api/v1/monitors/{id}/hits',
        '/api/v1/monitors/{id}/coverage',
        '/api/v1/openapi.json',
        // the management endpoints (manage.test.ts holds their answers to the document)
        '/api/v1/monitors/preview',
        '/api/v1/monitors/{id}',
        '/api/v1/monitors/{id}/pause',
        '/api/v1/monitors/{id}/resume',
        '/api/v1/monitors/{id}/webhook',
        '/api/v1/monitors/{id}/webhook/test',
        '/api/v1/monitors/{id}/webhook/rotate',
        '/api/v1/monitors/{id}/webhook/enable',
        '/api/v1/monitors/{id}/deliveries',
        '/api/v1/monitors/{id}/events',
        '/api/v1/monitors/{id}/recover',
        '/api/v1/deliveries/{id}/redeliver',
        '/api/v1/search',
        '/api/v1/stream',
        '/api/v1/tweets',
        '/api/v1/tweets/{id}',
        '/api/v1/users/{username}',
        '/api/v1/users/{username}/tweets',
      ].sort(),
    );
    expect(Object.keys(doc.components.securitySchemes).sort()).toEqual(['apiKeyHeader', 'bearerAuth']);
    expect(doc.paths['/api/v1/openapi.json'].get.security).toEqual([]);
    // the validator is not a rubber stamp
    expect(validate({ $ref: '#/components/schemas/User' }, { id: 'x', username: 'a' }, doc).length).toBeGreaterThan(0);
    expect(
      validate({ $ref: '#/components/schemas/Error' }, { error: 'e', code: 'NOPE', request_id: 'r' }, doc),
    ).toEqual([expect.stringContaining('must be equal to one of the allowed values')]);
    const user = { id: '1', username: 'a', name: 'A', followers_count: 0, verified: false };
    expect(validate({ $ref: '#/components/schemas/User' }, user, doc)).toEqual([]);
    expect(validate({ $ref: '#/components/schemas/User' }, { ...user, extra: 1 }, doc)).toEqual([
      '$.extra: not in the document',
    ]);
  });

  it('cursors page through a timeline, a search and a monitor’s hits without gaps or repeats', async () => {
    const { port } = await startGateway();
    const a = await account();
    const h = { 'x-api-key': a.key };
    async function pages(base: string, limit: number): Promise<string[]> {
      const seen: string[] = [];
      let next: string | null = null;
      for (let guard = 0; guard < 50; guard++) {
        const sep = base.includes('?') ? '&' : '?';
        const r: Res = await call(
          port,
          `${base}${sep}limit=${limit}${next ? `&cursor=${encodeURIComponent(next)}` : ''}`,
          h,
        );
        expect(r.status).toBe(200);
        expect(r.body.meta.count).toBe(r.body.data.length);
        seen.push(...(r.body.data as { id: string }[]).map((t) => t.id));
        next = r.body.meta.next_cursor as string | null;
        if (!next) return seen;
      }
      throw new Error('paging did not end');
    }
    const all = (
      await db.socialTweet.findMany({ where: { author: { usernameKey: 'alice' } }, orderBy: { id: 'desc' } })
    ).map((t) => String(t.id));
    expect(all).toHaveLength(25);
    expect(await pages('/api/v1/users/alice/tweets', 7)).toEqual(all);
    expect(await pages('/api/v1/search?q=gateways', 4)).toEqual(all);

    const monitor = await db.monitor.create({
      data: { accountId: a.accountId, targetUsername: 'alice', targetKey: 'alice' },
    });
    const tweets = await db.socialTweet.findMany({ where: { author: { usernameKey: 'alice' } }, take: 11 });
    for (const [i, t] of tweets.entries())
      await db.hit.create({
        data: {
          monitorId: monitor.id,
          tweetId: String(t.id),
          tweetText: t.text,
          tweetAuthorId: String(t.authorId),
          tweetAuthorUsername: 'alice',
          tweetCreatedAt: t.createdAt,
          detectedAt: new Date(Date.now() - i * 1000),
        },
      });
    const hitIds = await pages(`/api/v1/monitors/${monitor.id}/hits`, 3);
    expect(hitIds).toHaveLength(11);
    expect(new Set(hitIds).size).toBe(11);
    const stored = await db.hit.findMany({ where: { monitorId: monitor.id }, select: { id: true } });
    expect([...hitIds].sort()).toEqual(stored.map((s) => String(s.id)).sort());
  });

  it("strips client-sent internal headers: another account's monitor stays a 404", async () => {
    const { port } = await startGateway();
    const a = await account();
    const other = await account();
    const m = await db.monitor.create({
      data: { accountId: other.accountId, targetUsername: 'alice', targetKey: 'alice' },
    });
    const r = await call(port, `/api/v1/monitors/${m.id}/hits`, {
      'x-api-key': a.key,
      'x-account-id': other.accountId,
      'x-account-plan': 'starter',
      'x-internal-token': 'guess',
    });
    expect(r.status).toBe(404);
    expect((await call(port, `/api/v1/monitors/${m.id}/hits`, { 'x-api-key': other.key })).status).toBe(200);
    // the coverage of another account's monitor: 404, its own: 200
    expect((await call(port, `/api/v1/monitors/${m.id}/coverage`, { 'x-api-key': a.key })).status).toBe(404);
    const own = await call(port, `/api/v1/monitors/${m.id}/coverage`, { 'x-api-key': other.key });
    expect(own.status).toBe(200);
    expect(own.body.data).toMatchObject({ monitor_id: m.id, covered_until: null });
  });

  it('answers unknown paths with JSON 404 (ops paths included: they live on OPS_PORT), and records last use in batches', async () => {
    const { gw, port } = await startGateway();
    const nf = await call(port, '/nope');
    expect(nf.status).toBe(404);
    expect(nf.body).toMatchObject({ code: 'NOT_FOUND', request_id: nf.headers['x-request-id'] });
    expect((await call(port, '/api/v1/openapi.json', {}, 'POST', '{}')).status).toBe(404);
    for (const ops of ['/healthz', '/readyz', '/metrics']) expect((await call(port, ops)).status).toBe(404);

    const a = await account();
    expect((await db.apiKey.findUniqueOrThrow({ where: { prefix: a.prefix } })).lastUsedAt).toBeNull();
    // a key written straight to the database is taken once the gateway's live-key filter has it
    const deadline = Date.now() + 15_000;
    let first = await call(port, '/api/v1/users/alice', { 'x-api-key': a.key });
    while (first.status !== 200 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
      first = await call(port, '/api/v1/users/alice', { 'x-api-key': a.key });
    }
    expect(first.status).toBe(200);
    await gw.flush();
    const used = (await db.apiKey.findUniqueOrThrow({ where: { prefix: a.prefix } })).lastUsedAt;
    expect(used!.getTime()).toBeGreaterThan(Date.now() - 10_000);
    // throttled: not rewritten for every call (at most once a minute per key)
    await new Promise((r) => setTimeout(r, 20));
    await call(port, '/api/v1/users/alice', { 'x-api-key': a.key });
    await gw.flush();
    expect((await db.apiKey.findUniqueOrThrow({ where: { prefix: a.prefix } })).lastUsedAt).toEqual(used);
  });
});
