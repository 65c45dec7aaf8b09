/**
 * The gateway's edge against clients that do not play along, end to end (real PostgreSQL and
 * Redis; a node:http server with node's default limits stands in for read-api and records what
 * reaches it): methods refused at the gateway, forwarded heads bounded under read-api's head
 * limit, half-closed clients answered, pipelined reads forwarded together and answered in
 * order, and calls whose client left before forwarding neither forwarded nor charged.
 */
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { createLogger } from '@sts/common';
import { plansFromEnv, usagePeriod } from '@sts/core';
import { createDbClient, type Db } from '@sts/db';
import { createAccountWithKey, createTestDatabase, createTestRedis, waitFor } from '@sts/testing';
import { createKeyStore } from '../adapters/keys';
import { createQuotaStore } from '../adapters/leasedQuota';
import { createGateway, type Gateway } from '../app';

const logger = createLogger({ service: 'gateway-edge-test', level: 'error' });
const TOKEN = 'internal-token-for-tests-0123456789';

describe('gateway edge', () => {
  let dbHandle: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;
  let redisHandle: ReturnType<typeof createTestRedis>;
  let redis: Redis;
  let upstream: http.Server;
  /** requests that reached the stand-in read-api: method, url, head size */
  const reached: Array<{ method: string; url: string; headBytes: number }> = [];
  let gw: Gateway;
  let port: number;
  let upstreamUrl: string;
  /** answers the held call of the stand-in (GET /api/v1/users/held) */
  let releaseHeld: (() => void) | undefined;

  beforeAll(async () => {
    dbHandle = await createTestDatabase();
    db = createDbClient({ url: dbHandle.url, poolSize: 4 });
    redisHandle = createTestRedis();
    redis = new Redis(redisHandle.url, { keyPrefix: redisHandle.prefix });
    // node's defaults, like read-api: a head over 16 KiB would be a 431
    upstream = http.createServer((req, res) => {
      const headBytes = req.rawHeaders.reduce((n, v) => n + v.length + 2, req.url!.length + 16);
      reached.push({ method: req.method!, url: req.url!, headBytes });
      req.resume();
      req.on('end', () => {
        if (req.url === '/api/v1/users/held') {
          releaseHeld = () => res.writeHead(200, { 'x-request-id': req.headers['x-request-id'] ?? '' }).end('{}');
          return;
        }
        const body = JSON.stringify({ data: { url: req.url!.slice(0, 40) } });
        res.writeHead(200, {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          'x-request-id': req.headers['x-request-id'] ?? '',
          'server-timing': 'app;dur=0.1',
        });
        res.end(body);
      });
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    ({ gw, port } = await startGateway());
  });

  async function startGateway(upstreamMaxSockets?: number) {
    const g = createGateway({
      keys: createKeyStore({ db, redis, ttlMs: 2000 }),
      quota: createQuotaStore({ db, redis }),
      plans: plansFromEnv({
        PLAN_FREE_MONTHLY_QUOTA: 1000,
        PLAN_FREE_PER_MINUTE: 10_000,
        PLAN_FREE_POLL_INTERVAL_SECONDS: 300,
        PLAN_STARTER_MONTHLY_QUOTA: 150_000,
        PLAN_STARTER_PER_MINUTE: 10_000,
        PLAN_STARTER_POLL_INTERVAL_SECONDS: 60,
      }),
      readApiUrl: upstreamUrl,
      internalToken: TOKEN,
      logger,
      upstreamTimeoutMs: 5000,
      upstreamMaxSockets,
      flushIntervalMs: 100,
    });
    return { gw: g, port: await g.listen(0, '127.0.0.1') };
  }

  afterAll(async () => {
    await gw.close();
    upstream.closeAllConnections();
    await new Promise<void>((r) => upstream.close(() => r()));
    redis.disconnect();
    await redisHandle.cleanup();
    await db.$disconnect();
    await dbHandle.drop();
  });

  beforeEach(() => {
    reached.length = 0;
  });

  const account = () => createAccountWithKey(db, 'free');

  const usage = async (accountId: string) =>
    (await db.usageMonthly.findUnique({ where: { accountId_period: { accountId, period: usagePeriod() } } }))?.used ??
    0;

  /** one raw exchange: writes `text`, shuts the write side (half-close), reads until the close */
  async function raw(text: string, to = port): Promise<string> {
    const socket = net.connect(to, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', () => undefined);
    await new Promise((r) => socket.once('connect', r));
    socket.end(text);
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('no close')), 10_000);
      socket.on('close', () => {
        clearTimeout(t);
        resolve();
      });
    });
    return Buffer.concat(chunks).toString('latin1');
  }

  const statuses = (text: string) => [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]));

  it('allows only GET, HEAD, OPTIONS, POST to /api/v1/tweets and the management writes: others are a 405 with Allow that never reaches read-api', async () => {
    const a = await account();
    const key = `X-API-Key: ${a.key}\r\n`;
    const cases: Array<[string, string, string | null]> = [
      ['DELETE', '/api/v1/monitors', 'GET, HEAD, OPTIONS, POST'],
      ['PUT', '/api/v1/monitors/x/pause', 'GET, HEAD, OPTIONS, POST'],
      ['POST', '/api/v1/monitors/x/hits', 'GET, HEAD, OPTIONS'],
      ['PUT', '/api/v1/users/alice', 'GET, HEAD, OPTIONS'],
      ['PATCH', '/api/v1/tweets', 'GET, HEAD, OPTIONS, POST'],
      ['TRACE', '/api/v1/users/alice', 'GET, HEAD, OPTIONS'],
      ['POST', '/api/v1/users/alice', 'GET, HEAD, OPTIONS'],
    ];
    for (const [method, path, allow] of cases) {
      const text = await raw(`${method} ${path} HTTP/1.1\r\nHost: g\r\n${key}Content-Length: 0\r\n\r\n`);
      expect([method, statuses(text)]).toEqual([method, [405]]);
      expect(text.toLowerCase()).toContain(`allow: ${allow}\r\n`.toLowerCase());
      expect(text).toContain('"code":"METHOD_NOT_ALLOWED"');
    }
    // unknown methods: a 501 from the server itself
    expect(statuses(await raw(`PROPFIND /api/v1/users/alice HTTP/1.1\r\nHost: g\r\n${key}\r\n`))).toEqual([501]);
    expect(reached).toEqual([]);
    // the allowed ones do reach it
    const ok = await raw(
      `GET /api/v1/users/alice HTTP/1.1\r\nHost: g\r\n${key}\r\n` +
        `OPTIONS /api/v1/users/alice HTTP/1.1\r\nHost: g\r\n${key}\r\n` +
        `POST /api/v1/tweets HTTP/1.1\r\nHost: g\r\n${key}Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`,
    );
    expect(statuses(ok)).toEqual([200, 200, 200]);
    expect(reached.map((r) => r.method)).toEqual(['GET', 'OPTIONS', 'POST']);
  });

  it('forwards heads of bounded size: the largest request the gateway passes stays under read-api’s 16 KiB head limit', async () => {
    const a = await account();
    const target = `/api/v1/search?q=${'q'.repeat(8192 - 17)}`;
    expect(target.length).toBe(8192);
    const longest =
      `GET ${target} HTTP/1.1\r\nHost: g\r\nX-API-Key: ${a.key}\r\nAccept: ${'a'.repeat(1024)}\r\n` +
      `User-Agent: ${'u'.repeat(1024)}\r\nIdempotency-Key: ${'i'.repeat(1024)}\r\nX-Request-Id: ${'r'.repeat(128)}\r\n` +
      `X-Pad: ${'p'.repeat(4000)}\r\n\r\n`;
    expect(statuses(await raw(longest))).toEqual([200]);
    expect(reached).toHaveLength(1);
    expect(reached[0]!.headBytes).toBeGreaterThan(11 * 1024);
    expect(reached[0]!.headBytes).toBeLessThan(12 * 1024);
    // a forwarded header over its bound is refused here, naming it
    const ua = await raw(
      `GET /api/v1/users/alice HTTP/1.1\r\nHost: g\r\nX-API-Key: ${a.key}\r\nUser-Agent: ${'u'.repeat(16_000)}\r\n\r\n`,
    );
    expect(statuses(ua)).toEqual([431]);
    expect(ua).toContain('user-agent header is longer than 1024 bytes');
    expect(statuses(await raw(`GET /api/v1/${'x'.repeat(8200)} HTTP/1.1\r\nHost: g\r\n\r\n`))).toEqual([414]);
    expect(reached).toHaveLength(1);
  });

  it('a client that shuts its write side after its request gets the answer, then the end; the call is charged once', async () => {
    const a = await account();
    const text = await raw(`GET /api/v1/users/alice HTTP/1.1\r\nHost: g\r\nX-API-Key: ${a.key}\r\n\r\n`);
    expect(statuses(text)).toEqual([200]);
    expect(text).toContain('{"data":{"url":"/api/v1/users/alice"}}');
    await gw.flush();
    await waitFor(async () => (await usage(a.accountId)) === 1, 20_000);
  });

  it('a client that pipelines reads has them forwarded together and answered in order, each charged once', async () => {
    const a = await account();
    const key = `X-API-Key: ${a.key}\r\n`;
    releaseHeld = undefined;
    const text = raw(
      ['held', 'bob', 'carol'].map((u) => `GET /api/v1/users/${u} HTTP/1.1\r\nHost: g\r\n${key}\r\n`).join(''),
    );
    // the two behind the held one reach read-api while it is still unanswered
    await waitFor(() => Promise.resolve(reached.length === 3), 5000, 10);
    expect(reached.map((r) => r.url)).toEqual(['/api/v1/users/held', '/api/v1/users/bob', '/api/v1/users/carol']);
    releaseHeld!();
    const answers = await text;
    expect(statuses(answers)).toEqual([200, 200, 200]);
    const at = (s: string) => answers.indexOf(s);
    expect(at('\r\n\r\n{}')).toBeGreaterThan(-1);
    expect(at('\r\n\r\n{}')).toBeLessThan(at('/api/v1/users/bob'));
    expect(at('/api/v1/users/bob')).toBeLessThan(at('/api/v1/users/carol'));
    await gw.flush();
    await waitFor(async () => (await usage(a.accountId)) === 3, 20_000);
  });

  it('a call whose client is gone before it is forwarded is neither forwarded nor charged', async () => {
    // one upstream socket, held by a first call: the second call waits for it
    const one = await startGateway(1);
    try {
      const a = await account();
      const key = `X-API-Key: ${a.key}\r\n`;
      const first = raw(`GET /api/v1/users/held HTTP/1.1\r\nHost: g\r\n${key}\r\n`, one.port);
      await waitFor(() => Promise.resolve(releaseHeld !== undefined), 5000, 10);
      const socket = net.connect(one.port, '127.0.0.1');
      socket.on('error', () => undefined);
      await new Promise((r) => socket.once('connect', r));
      socket.write(`GET /api/v1/users/alice HTTP/1.1\r\nHost: g\r\n${key}\r\n`);
      await new Promise((r) => setTimeout(r, 300)); // admitted, waiting for the upstream socket
      socket.resetAndDestroy(); // gone
      await new Promise((r) => setTimeout(r, 300));
      releaseHeld!();
      expect(statuses(await first)).toEqual([200]);
      await new Promise((r) => setTimeout(r, 300));
      await one.gw.flush();
      expect(reached.map((r) => r.url)).toEqual(['/api/v1/users/held']);
      expect(await usage(a.accountId)).toBe(1); // the held call only
      // the key goes on, charged for what it gets
      const text = await raw(`GET /api/v1/users/alice HTTP/1.1\r\nHost: g\r\n${key}\r\n`, one.port);
      expect(statuses(text)).toEqual([200]);
      await one.gw.flush();
      expect(await usage(a.accountId)).toBe(2);
    } finally {
      await one.gw.close();
    }
  });
});
