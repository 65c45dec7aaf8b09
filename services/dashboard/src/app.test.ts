/**
 * The dashboard over plain HTTP (no browser) on the real PostgreSQL, Redis and RabbitMQ: the
 * security settings (headers, cookie flags, session in Redis and regenerated at sign-in, sign
 * out), the ops port, and that odd input never produces a 500 or a stack trace.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { createDbClient } from '@sts/db';
import { ConfigError } from '@sts/common';
import { createTestDatabase, createTestRedis, createTestVhost, waitFor } from '@sts/testing';
import { parseDashboardEnv } from './env';
import { start, type RunningDashboard } from './testing';

let dbHandle: { url: string; drop(): Promise<void> };
let redisHandle: { url: string; prefix: string; cleanup(): Promise<void> };
let dash: RunningDashboard;
let base = '';

beforeAll(async () => {
  dbHandle = await createTestDatabase();
  redisHandle = createTestRedis();
  const vhost = await createTestVhost();
  dash = await start({
    DATABASE_URL: dbHandle.url,
    REDIS_URL: redisHandle.url,
    REDIS_KEY_PREFIX: redisHandle.prefix,
    AMQP_URL: vhost.url,
    DASHBOARD_PORT: '0',
    DASHBOARD_HOST: '127.0.0.1',
    OPS_PORT: '0',
    SESSION_SECRET: randomBytes(32).toString('base64url'),
    SECRETS_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    TRUST_PROXY: '1',
    LOG_LEVEL: 'error',
  });
  base = `http://127.0.0.1:${dash.port}`;
});

afterAll(async () => {
  await dash?.stop();
  await redisHandle?.cleanup();
  await dbHandle?.drop();
});

/** a tiny cookie-keeping client */
function client(headers: Record<string, string> = {}) {
  let cookie = '';
  const c = {
    setCookies: [] as string[],
    async req(path: string, form?: Record<string, string | string[]>, extra: RequestInit = {}) {
      let body: string | undefined;
      if (form) {
        const p = new URLSearchParams();
        for (const [k, v] of Object.entries(form)) for (const one of [v].flat()) p.append(k, one);
        body = p.toString();
      }
      const res = await fetch(base + path, {
        method: form ? 'POST' : 'GET',
        redirect: 'manual',
        headers: { ...headers, cookie, ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) },
        body,
        ...extra,
      });
      const set = res.headers.getSetCookie();
      c.setCookies.push(...set);
      if (set[0]) cookie = set[0].split(';')[0]!;
      return {
        status: res.status,
        headers: res.headers,
        text: await res.text(),
        location: res.headers.get('location'),
      };
    },
    cookie: () => cookie,
    csrf: (text: string) => /name="_csrf" value="([^"]+)"/.exec(text)?.[1] ?? '',
  };
  return c;
}

describe('dashboard over HTTP', () => {
  it('serves health, readiness and metrics on the ops port only', async () => {
    const ops = `http://127.0.0.1:${dash.opsPort}`;
    expect((await fetch(`${ops}/healthz`)).status).toBe(200);
    const ready = await waitFor(async () => {
      const res = await fetch(`${ops}/readyz`);
      return res.status === 200 ? res : null;
    }, 15_000);
    expect(await ready.json()).toEqual({
      status: 'ok',
      checks: { migrations: 'ok', postgres: 'ok', redis: 'ok' },
    });
    // HTTP metrics like the gateway's: route templates and status classes, never raw paths
    await client().req('/signin');
    await client().req('/no/such/page/12345');
    const metrics = await (await fetch(`${ops}/metrics`)).text();
    expect(metrics).toMatch(/service="dashboard"/);
    expect(metrics).toMatch(
      /dashboard_http_request_duration_seconds_count\{[^}]*route="\/signin"[^}]*status_class="2xx"[^}]*\} [1-9]/,
    );
    expect(metrics).toMatch(/dashboard_http_request_duration_seconds_count\{[^}]*route="other"[^}]*\} [1-9]/);
    expect(metrics).not.toContain('12345');
    for (const path of ['/healthz', '/readyz', '/metrics']) {
      const res = await client().req(path);
      expect(res.status).not.toBe(200);
      expect(res.text).not.toMatch(/"status":"ok"|process_cpu/);
    }
  });

  it('sends a strict CSP and the other security headers; assets come from the service', async () => {
    const res = await client().req('/signin');
    const csp = res.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("style-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toMatch(/unsafe-inline|unsafe-eval|https:|\*/);
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('x-powered-by')).toBeNull();
    expect(res.text).not.toMatch(/<script>|style=|https?:\/\/(?!127\.0\.0\.1)[^"]*\.(js|css)/);
    for (const asset of ['/static/app.css', '/static/app.js', '/static/favicon.svg']) {
      expect((await fetch(base + asset)).status).toBe(200);
    }
  });

  it('keeps the session in Redis, regenerates its id at sign-in, sets HttpOnly/SameSite=Lax, Secure only over TLS', async () => {
    const c = client();
    const page = await c.req('/signup');
    const before = c.cookie();
    expect(before).toMatch(/^sts_dash=/);
    const signup = await c.req('/signup', {
      _csrf: c.csrf(page.text),
      email: 'cookie@example.com',
      password: 'a good long password',
    });
    expect(signup.status).toBe(303);
    expect(c.cookie()).not.toBe(before);
    const setCookie = c.setCookies.at(-1) ?? '';
    expect(setCookie).toMatch(/HttpOnly/);
    expect(setCookie).toMatch(/SameSite=Lax/);
    expect(setCookie).not.toMatch(/Secure/);

    const sid = decodeURIComponent(c.cookie().slice('sts_dash='.length)).slice(2).split('.')[0]!;
    const redis = new Redis(redisHandle.url, { keyPrefix: redisHandle.prefix });
    try {
      const stored = JSON.parse((await redis.get(`dashboard:sess:${sid}`)) ?? '{}') as { email?: string };
      expect(stored.email).toBe('cookie@example.com');
      expect(await redis.ttl(`dashboard:sess:${sid}`)).toBeGreaterThan(0);
    } finally {
      redis.disconnect();
    }

    // sign out: the old cookie no longer signs anyone in
    const overview = await c.req('/');
    expect(overview.status).toBe(200);
    const old = c.cookie();
    expect((await c.req('/signout', { _csrf: c.csrf(overview.text) })).location).toBe('/signin');
    const replay = await fetch(`${base}/`, { redirect: 'manual', headers: { cookie: old } });
    expect(replay.status).toBe(303);

    // behind a TLS-terminating proxy (TRUST_PROXY=1 here): Secure
    const tls = client({ 'x-forwarded-proto': 'https' });
    await tls.req('/signin');
    expect(tls.setCookies[0]).toMatch(/; Secure/);
  });

  it('answers odd input with a 4xx page, never a 500 or a stack trace', async () => {
    const c = client();
    const page = await c.req('/signup');
    const csrf = c.csrf(page.text);
    await c.req('/signup', { _csrf: csrf, email: 'odd@example.com', password: 'a good long password' });
    const token = c.csrf((await c.req('/')).text);
    const cases: [string, Record<string, string | string[]> | undefined][] = [
      ['/monitors/%E0%A4%A', undefined],
      ['/monitors/not-a-uuid', undefined],
      ['/monitors/00000000-0000-0000-0000-000000000000/hits?cursor=%00%00', undefined],
      ['/monitors/00000000-0000-0000-0000-000000000000/deliveries?cursor=abc&cursor=def', undefined],
      ['/keys', { _csrf: token, name: ['a', 'b'] }],
      ['/keys', { _csrf: token, name: 'x'.repeat(5000) }],
      ['/keys', { _csrf: [token, token], name: 'twice' }],
      ['/monitors', { _csrf: token, target: '<script>alert(1)</script>', intervalSec: '-5', keywords: '"' }],
      ['/monitors', { _csrf: token, target: 'fine', intervalSec: '99999999999999999999' }],
      ['/deliveries/zzz/redeliver', { _csrf: token }],
      ['/plan/trial', { _csrf: token, extra: 'x'.repeat(40_000) }],
      ['/signin', { _csrf: token, email: ['a@b.c', 'd@e.f'], password: '' }],
    ];
    for (const [path, form] of cases) {
      const res = await c.req(path, form);
      expect({ path, status: res.status >= 500 }).toEqual({ path, status: false });
      expect(res.text).not.toMatch(/at [\w.<>]+ \(|node_modules|Error:/);
      expect(res.text).not.toContain('<script>alert(1)</script>');
    }
    const malformed = await fetch(`${base}/keys`, {
      method: 'POST',
      headers: { cookie: c.cookie(), 'content-type': 'application/x-www-form-urlencoded', 'content-length': '5' },
      body: 'a=%ZZ',
    });
    expect(malformed.status).toBeLessThan(500);
  });

  it('labels a Discord webhook and never shows its token; the verification snippet is on the page', async () => {
    const c = client();
    const page = await c.req('/signup');
    await c.req('/signup', {
      _csrf: c.csrf(page.text),
      email: 'discord@example.com',
      password: 'a good long password',
    });
    const token = c.csrf((await c.req('/monitors/new')).text);
    const discord = 'https://discord.com/api/webhooks/123456789012345678/SeCrEtToKeN-abcdefghijklmnop';
    const created = await c.req('/monitors', {
      _csrf: token,
      target: 'someone',
      keywords: '',
      intervalSec: '',
      webhookUrl: discord,
    });
    expect(created.status).toBe(303);
    const shown = await c.req(created.location ?? '');
    expect(shown.text).toMatch(/<span class="badge kind">Discord<\/span>/);
    expect(shown.text).toContain('https://discord.com/api/webhooks/123456789012345678/…');
    expect(shown.text).toMatch(/whsec_/); // the signing secret, once
    expect(shown.text).toContain('verify({ secret: process.env.WEBHOOK_SECRET, body: rawBody, headers: req.headers })');
    const again = await c.req(created.location ?? '');
    expect(again.text).not.toContain('SeCrEtToKeN');
    expect(again.text).not.toMatch(/whsec_/);
  });

  it('pages the hit history with cursors, newest first; the fragment is the table only', async () => {
    const c = client();
    const page = await c.req('/signup');
    await c.req('/signup', { _csrf: c.csrf(page.text), email: 'pages@example.com', password: 'a good long password' });
    const token = c.csrf((await c.req('/monitors/new')).text);
    const created = await c.req('/monitors', { _csrf: token, target: 'pager', keywords: '', intervalSec: '' });
    const monitorId = (created.location ?? '').split('/').pop() ?? '';
    const db = createDbClient({ url: dbHandle.url, poolSize: 1 });
    try {
      const t0 = Date.parse('2026-01-01T00:00:00Z');
      await db.hit.createMany({
        data: Array.from({ length: 27 }, (_, i) => ({
          monitorId,
          tweetId: String(1000 + i),
          tweetText: `post number ${i}`,
          tweetAuthorId: '1',
          tweetAuthorUsername: 'pager',
          tweetCreatedAt: new Date(t0 + i * 1000),
          detectedAt: new Date(t0 + i * 1000),
        })),
      });
    } finally {
      await db.$disconnect();
    }
    const ids = (html: string) => [...html.matchAll(/data-hit="(\d+)"/g)].map((m) => Number(m[1]));
    const first = await c.req(`/monitors/${monitorId}/hits`);
    expect(ids(first.text)).toEqual(Array.from({ length: 25 }, (_, i) => 1026 - i));
    expect(first.text).toContain('data-live-src=');
    const older = /href="([^"]+)" rel="next"/.exec(first.text)?.[1]?.replace(/&amp;/g, '&') ?? '';
    expect(older).toMatch(/\?cursor=/);
    const second = await c.req(older);
    expect(ids(second.text)).toEqual([1001, 1000]);
    expect(second.text).not.toContain('rel="next"');
    expect(second.text).not.toContain('data-live-src='); // older pages do not refresh
    const fragment = await c.req(`/monitors/${monitorId}/hits?fragment=1`);
    expect(fragment.text.trimStart()).toMatch(/^<div class="table-wrap">/);
    expect(fragment.text).not.toContain('<html');
    expect(ids(fragment.text)).toHaveLength(25);
  });

  it('starts, serves pages and stays ready while RabbitMQ is unreachable (readiness is not tied to the broker)', async () => {
    const down = await start({
      DATABASE_URL: dbHandle.url,
      REDIS_URL: redisHandle.url,
      REDIS_KEY_PREFIX: redisHandle.prefix,
      AMQP_URL: 'amqp://guest:guest@127.0.0.1:1/',
      DASHBOARD_PORT: '0',
      DASHBOARD_HOST: '127.0.0.1',
      OPS_PORT: '0',
      SESSION_SECRET: randomBytes(32).toString('base64url'),
      LOG_LEVEL: 'error',
    });
    try {
      expect((await fetch(`http://127.0.0.1:${down.port}/signin`)).status).toBe(200);
      const ready = await waitFor(async () => {
        const res = await fetch(`http://127.0.0.1:${down.opsPort}/readyz`);
        return res.status === 200 ? res : null;
      }, 15_000);
      const body = (await ready.json()) as { checks: Record<string, string> };
      expect(body.checks).toEqual({ migrations: 'ok', postgres: 'ok', redis: 'ok' });
    } finally {
      await down.stop();
    }
  });

  it('names every bad setting at start', () => {
    let err: unknown;
    try {
      parseDashboardEnv({ SESSION_SECRET: 'short', DASHBOARD_PORT: 'x', COOKIE_SECURE: 'maybe' });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const message = (err as Error).message;
    for (const name of ['SESSION_SECRET', 'DASHBOARD_PORT', 'COOKIE_SECURE']) expect(message).toContain(name);
    expect(() => parseDashboardEnv({})).toThrow(/SESSION_SECRET is required/);
    const env = parseDashboardEnv({ SESSION_SECRET: 'a'.repeat(32), TRUST_PROXY: '10.0.0.0/8, 127.0.0.1' });
    expect(env.DASHBOARD_PORT).toBe(3001);
    expect(env.OPS_PORT).toBe(3101);
    expect(env.TRUST_PROXY).toEqual(['10.0.0.0/8', '127.0.0.1']);
  });
});
