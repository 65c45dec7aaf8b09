/**
 * The gateway's request metrics: route templates (bounded label values) and, on the real gateway
 * and read-api processes, the latency histogram by route and status class and the 429 counters by
 * plan and reason, read from the gateway's /metrics on OPS_PORT.
 */
import http from 'node:http';
import client from 'prom-client';
import { createDbClient } from '@sts/db';
import { createSocialUser } from '@sts/social';
import { createAccountWithKey, createTestDatabase, createTestRedis, spawnService, waitFor } from '@sts/testing';
import { gatewayEnv, listening, spawnReadApi } from '../test/processes';
import { createGatewayMetrics, OTHER_ROUTE } from './metrics';

function get(
  port: number,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path, headers }, (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      })
      .on('error', reject);
  });
}

/** The value of one sample of a Prometheus text exposition (0 when absent); `labels` must all match. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  let total = 0;
  let found = false;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const ok = Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`));
    if (!ok) continue;
    if (found) throw new Error(`more than one ${name} sample matches ${JSON.stringify(labels)}`);
    found = true;
    total = Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return total;
}

describe('gateway metrics: route templates', () => {
  const m = createGatewayMetrics(new client.Registry());

  it.each([
    ['/api/v1/users/alice', '/api/v1/users/:username'],
    ['/api/v1/users/alice/', '/api/v1/users/:username'],
    ['/api/v1/users/alice/tweets', '/api/v1/users/:username/tweets'],
    ['/api/v1/users/%61lice/tweets', '/api/v1/users/:username/tweets'],
    ['/api/v1/%75sers/alice', '/api/v1/users/:username'],
    ['/api/v1/tweets', '/api/v1/tweets'],
    ['/api/v1/tweets/', '/api/v1/tweets'],
    ['/api/v1/tweets/123', '/api/v1/tweets/:id'],
    ['/api/v1/search', '/api/v1/search'],
    ['/api/v1/monitors', '/api/v1/monitors'],
    ['/api/v1/monitors/0b3e/hits', '/api/v1/monitors/:id/hits'],
    ['/api/v1/openapi.json', '/api/v1/openapi.json'],
    ['/api/v1/users', OTHER_ROUTE],
    ['/api/v1/users/', OTHER_ROUTE],
    ['/api/v1/users//tweets', OTHER_ROUTE],
    ['/api/v1/users/alice/tweets/x', OTHER_ROUTE],
    ['/api/v1/userss/alice', OTHER_ROUTE],
    ['/api/v1/users/%zz', OTHER_ROUTE],
    ['/api/v2/users/alice', OTHER_ROUTE],
    ['/', OTHER_ROUTE],
    ['/metrics', OTHER_ROUTE],
  ])('%s → %s', (path, route) => {
    expect(m.routeOf(path)).toBe(route);
  });

  it('keeps the series bounded whatever paths clients send', async () => {
    const registry = new client.Registry();
    const metrics = createGatewayMetrics(registry);
    for (let i = 0; i < 2000; i++) metrics.answered(`/api/v1/users/user${i}/tweets`, 200, performance.now());
    for (let i = 0; i < 2000; i++) metrics.answered(`/random/${i}`, 404, performance.now());
    const text = await registry.metrics();
    expect(text).not.toContain('user1');
    expect(text).not.toContain('random');
    const values = (await registry.getMetricsAsJSON()).find(
      (x) => x.name === 'gateway_http_request_duration_seconds',
    )!.values;
    // two series (route × status class), each with its buckets, sum and count
    expect(new Set(values.map((v) => `${v.labels.route} ${v.labels.status_class}`))).toEqual(
      new Set(['/api/v1/users/:username/tweets 2xx', 'other 4xx']),
    );
    expect(
      sample(text, 'gateway_http_request_duration_seconds_count', {
        route: '/api/v1/users/:username/tweets',
        status_class: '2xx',
      }),
    ).toBe(2000);
    expect(
      sample(text, 'gateway_http_request_duration_seconds_count', { route: OTHER_ROUTE, status_class: '4xx' }),
    ).toBe(2000);
  });
});

describe('gateway metrics on the running gateway', () => {
  it('counts answers by route and status class and 429s by plan and reason', async () => {
    const dbHandle = await createTestDatabase();
    const redisHandle = createTestRedis();
    const db = createDbClient({ url: dbHandle.url, poolSize: 2 });
    const keyFor = async (plan: 'free' | 'starter') => ({
      authorization: `Bearer ${(await createAccountWithKey(db, plan)).key}`,
    });
    const free = await keyFor('free');
    const starter = await keyFor('starter');
    await createSocialUser(db, { username: 'mainuser', name: 'Main' });
    const { proc: readApi, url: readApiUrl } = await spawnReadApi(dbHandle.url);
    const gateway = spawnService('services/gateway/src/main.ts', {
      ...gatewayEnv({ dbUrl: dbHandle.url, redis: redisHandle, readApiUrl }),
      PLAN_FREE_MONTHLY_QUOTA: '2',
      PLAN_FREE_PER_MINUTE: '1000',
      PLAN_STARTER_PER_MINUTE: '2',
    });
    try {
      const { port, opsPort } = await listening(gateway, /gateway listening/);
      await waitFor(async () => (await get(opsPort, '/readyz')).status === 200, 10_000);
      const scrape = async () => (await get(opsPort, '/metrics')).body;
      const count = (text: string, route: string, statusClass: string) =>
        sample(text, 'gateway_http_request_duration_seconds_count', { route, status_class: statusClass });
      const before = await scrape();
      expect(count(before, '/api/v1/users/:username', '2xx')).toBe(0);

      // free: a monthly quota of 2, so calls 3 and 4 are refused for the month
      const freeStatuses: number[] = [];
      for (let i = 0; i < 4; i++) freeStatuses.push((await get(port, '/api/v1/users/mainuser', free)).status);
      expect(freeStatuses).toEqual([200, 200, 429, 429]);
      // starter: 2 a minute; 5 calls are refused at least once even across a minute's end
      const starterStatuses: number[] = [];
      for (let i = 0; i < 5; i++)
        starterStatuses.push((await get(port, '/api/v1/users/mainuser/tweets', starter)).status);
      const starter429 = starterStatuses.filter((s) => s === 429).length;
      expect(starter429).toBeGreaterThanOrEqual(1);
      // other routes and classes: a 404 from read-api under a template, unknown paths, a 401
      expect((await get(port, '/api/v1/users/nobody-here', free)).status).toBe(429); // quota spent: still 429
      expect((await get(port, '/api/v1/openapi.json')).status).toBe(200);
      expect((await get(port, '/not/an/api/path')).status).toBe(404);
      expect((await get(port, '/api/v1/users/mainuser')).status).toBe(401);

      const after = await scrape();
      expect(count(after, '/api/v1/users/:username', '2xx')).toBe(2);
      // 2 quota refusals + the call after the quota was spent, + the 401
      expect(count(after, '/api/v1/users/:username', '4xx')).toBe(4);
      expect(count(after, '/api/v1/users/:username/tweets', '4xx')).toBe(starter429);
      expect(
        count(after, '/api/v1/users/:username/tweets', '2xx') + count(after, '/api/v1/users/:username/tweets', '4xx'),
      ).toBe(5);
      expect(count(after, '/api/v1/openapi.json', '2xx')).toBe(1);
      expect(count(after, OTHER_ROUTE, '4xx')).toBe(1);
      expect(sample(after, 'gateway_quota_rejections_total', { plan: 'free', reason: 'monthly_quota' })).toBe(3);
      expect(sample(after, 'gateway_quota_rejections_total', { plan: 'free', reason: 'rate_limit' })).toBe(0);
      expect(sample(after, 'gateway_quota_rejections_total', { plan: 'starter', reason: 'rate_limit' })).toBe(
        starter429,
      );
      expect(sample(after, 'gateway_quota_rejections_total', { plan: 'starter', reason: 'monthly_quota' })).toBe(0);
      // raw paths never become label values
      expect(after).not.toContain('mainuser');
      expect(after).not.toContain('/not/an');
      // latency: a histogram with the sum of the observed durations
      expect(
        sample(after, 'gateway_http_request_duration_seconds_sum', {
          route: '/api/v1/users/:username',
          status_class: '2xx',
        }),
      ).toBeGreaterThan(0);
      expect(
        sample(after, 'gateway_http_request_duration_seconds_bucket', {
          route: '/api/v1/users/:username',
          status_class: '2xx',
          le: '+Inf',
        }),
      ).toBe(2);
    } finally {
      gateway.child.kill('SIGTERM');
      readApi.child.kill('SIGTERM');
      await Promise.all([gateway.exited, readApi.exited]);
      await db.$disconnect();
      await redisHandle.cleanup();
      await dbHandle.drop();
    }
  });
});
