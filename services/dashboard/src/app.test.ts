/**
 * The dashboard over plain HTTP (no browser) on the real PostgreSQL, Redis and RabbitMQ: the
 * security settings (headers, cookie flags, session in Redis and regenerated at sign-in, sign
 * out), the ops port, and that odd input never produces a 500 or a stack trace.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { createDbClient } from '@sts/db';
import { ConfigError } from '@sts/common';
import { waitFor } from '@sts/testing';
import { parseDashboardEnv } from './env';
import {
  createBackends,
  dashboardClient,
  dashboardEnv,
  start,
  type RunningDashboard,
  type TestBackends,
} from '../test/dashboard';

let backends: TestBackends;
let dbHandle: TestBackends['db'];
let redisHandle: TestBackends['redis'];
let dash: RunningDashboard;
let base = '';

beforeAll(async () => {
  backends = await createBackends();
  ({ db: dbHandle, redis: redisHandle } = backends);
  dash = await start({
    ...dashboardEnv(backends),
    TRUST_PROXY: '1',
    LOG_LEVEL: 'error',
    SIGNIN_MAX_PER_EMAIL_HOURLY: '15',
    WEBHOOK_TEST_MAX_PER_MIN: '3',
  });
  base = dash.base;
});

afterAll(async () => {
  await dash?.stop();
  await backends?.drop();
});

/** a cookie-keeping client of this file's dashboard */
const client = (headers: Record<string, string> = {}) => dashboardClient(base, headers);

/**
 * Signs up (the same "check your email" answer for everyone, no session), marks the address
 * verified as its link would (accounts.test.ts follows the real link), then signs in.
 */
async function join(c: ReturnType<typeof client>, email: string): Promise<{ status: number; location: string | null }> {
  const page = await c.req('/signup');
  const signup = await c.req('/signup', { _csrf: c.csrf(page.text), email, password: 'a good long password' });
  expect(signup.status).toBe(200);
  const db = createDbClient({ url: dbHandle.url, poolSize: 1 });
  try {
    // the sign-up's work runs after its answer (same time for taken and new addresses)
    const verified = async () =>
      (await db.account.updateMany({ where: { email }, data: { emailVerifiedAt: new Date() } })).count;
    await waitFor(async () => ((await verified()) > 0 ? true : null), 10_000);
  } finally {
    await db.$disconnect();
  }
  const signin = await c.req('/signin');
  return c.req('/signin', { _csrf: c.csrf(signin.text), email, password: 'a good long password' });
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
    // anonymous: a CSRF cookie, no session
    const before = c.cookie();
    expect(before).toBe('');
    expect(c.cookie('sts_csrf')).toMatch(/^sts_csrf=/);
    expect(page.status).toBe(200);
    const signin = await join(c, 'cookie@example.com');
    expect(signin.status).toBe(303);
    expect(c.cookie()).not.toBe(before);
    const setCookie = c.setCookies.find((x) => x.startsWith('sts_dash=')) ?? '';
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
    await join(c, 'odd@example.com');
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
      headers: { cookie: c.cookies(), 'content-type': 'application/x-www-form-urlencoded', 'content-length': '5' },
      body: 'a=%ZZ',
    });
    expect(malformed.status).toBeLessThan(500);
  });

  it('labels a Discord webhook and never shows its token; the verification snippet is on the page', async () => {
    const c = client();
    await join(c, 'discord@example.com');
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

  it("saves the webhook's delivery rules (retries, order); an unknown value is a 422 naming the field that changes nothing", async () => {
    const c = client();
    await join(c, 'rules@example.com');
    const created = await c.req('/monitors', {
      _csrf: c.csrf((await c.req('/monitors/new')).text),
      target: 'someone',
      keywords: '',
      intervalSec: '',
      webhookUrl: 'https://discord.com/api/webhooks/123456789012345676/TokenTokenTokenTokenToken',
    });
    const monitorPath = created.location ?? '';
    const page = await c.req(monitorPath);
    expect(page.text).toMatch(/<option value="none"\s+selected>/);
    expect(page.text).toMatch(/<option value="unordered"\s+selected>/);
    const saved = await c.req(`${monitorPath}/webhook/rules`, {
      _csrf: c.csrf(page.text),
      retryPolicy: 'standard',
      ordering: 'fifo',
    });
    expect(saved.status).toBe(303);
    const after = await c.req(monitorPath);
    expect(after.text).toMatch(/<option value="standard"\s+selected>/);
    expect(after.text).toMatch(/<option value="fifo"\s+selected>/);
    const db = createDbClient({ url: dbHandle.url, poolSize: 1 });
    try {
      const monitorId = monitorPath.split('/').pop()!;
      expect(await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId } })).toMatchObject({
        retryPolicy: 'standard',
        ordering: 'fifo',
      });
      const bad = await c.req(`${monitorPath}/webhook/rules`, {
        _csrf: c.csrf(after.text),
        retryPolicy: 'sometimes',
        ordering: 'fifo',
      });
      expect(bad.status).toBe(422);
      expect(bad.text).toMatch(/must be one of none, standard/i);
      expect((await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId } })).retryPolicy).toBe('standard');
    } finally {
      await db.$disconnect();
    }
  });

  it("shows the monitor's coverage: covered until, its gaps on a timeline and in a table, and the latency figures", async () => {
    const c = client();
    await join(c, 'coverage@example.com');
    const token = c.csrf((await c.req('/monitors/new')).text);
    const created = await c.req('/monitors', { _csrf: token, target: 'Covered', keywords: '', intervalSec: '' });
    const monitorId = (created.location ?? '').split('/').pop() ?? '';
    const before = await c.req(`/monitors/${monitorId}`);
    expect(before.text).toMatch(/Covered until: <strong>not read yet<\/strong>/);
    expect(before.text).toContain('No gaps in the last 30 days.');
    expect(before.text).toMatch(
      /data-testid="coverage-intake" data-path="polled">\s*Account: <strong>polled<\/strong>/,
    );
    const hour = 3_600_000;
    const now = Date.now();
    const db = createDbClient({ url: dbHandle.url, poolSize: 1 });
    try {
      // watched for 40 days: the whole 30-day window counts
      await db.monitor.update({ where: { id: monitorId }, data: { createdAt: new Date(now - 40 * 24 * hour) } });
      await db.pollCursor.create({ data: { targetKey: 'covered', lastSuccessAt: new Date(now - hour) } });
      await db.coverageGap.create({
        data: {
          targetKey: 'covered',
          startsAt: new Date('2026-01-01T00:00:00Z'),
          endsAt: new Date(now - 2 * hour),
          reason: 'budget_refused',
          filledAt: new Date(now - hour),
        },
      });
      // a post detected 1.5 s after it was made (within 24 h)
      await db.hit.create({
        data: {
          monitorId,
          tweetId: '77',
          tweetText: 'a covered post',
          tweetAuthorId: '1',
          tweetAuthorUsername: 'covered',
          tweetCreatedAt: new Date(now - 3 * hour - 1500),
          detectedAt: new Date(now - 3 * hour),
        },
      });
      // the X Activity API intake pushes the account's profile changes and deletions
      await db.monitor.update({ where: { id: monitorId }, data: { events: ['posts', 'profile'] } });
      await db.targetProfile.create({
        data: { targetKey: 'covered', userId: '501', username: 'Covered', name: 'Covered', verified: false },
      });
      await db.xActivityAccount.create({
        data: {
          targetKey: 'covered',
          userId: '501',
          eventTypes: ['profile.update.bio', 'profile.update.handle', 'post.delete'],
          updatedAt: new Date('2026-11-30T08:15:00Z'),
        },
      });
      await db.$executeRaw`
        INSERT INTO x_stream_lease (name, holder, fence, expires_at)
        VALUES ('x-activity', 'replica-a', 1, now() + interval '1 hour')`;
    } finally {
      await db.$disconnect();
    }
    const page = await c.req(`/monitors/${monitorId}`);
    expect(page.status).toBe(200);
    const section = /<section[^>]*data-testid="coverage"[\s\S]*?<\/section>/.exec(page.text)?.[0] ?? '';
    expect(section).toContain(
      `Covered until: <strong>${new Date(now - hour).toISOString().slice(0, 16).replace('T', ' ')} UTC</strong>`,
    );
    // pushed for what this monitor asks (profile), not for deletions it did not ask for
    expect(section).toMatch(
      /data-path="pushed"[^>]*>\s*Account: <strong>pushed by the X Activity API<\/strong> for profile changes\s*<span class="muted">\(within seconds; confirmed 2026-11-30 08:15 UTC\)/,
    );
    // the gap, clipped to the 30-day window, as a bar and as a table row
    expect(section).toMatch(/<rect\s+class="timeline-filled"\s+x="0"\s+y="0"\s+width="99\d"/);
    expect(section).toMatch(/<tr data-reason="budget_refused">[\s\S]*Read budget refused[\s\S]*filled \d{4}-/);
    expect(section).toContain('2026-01-01 00:00 UTC');
    const detected = /<tr data-latency="detected">[\s\S]*?<\/tr>/.exec(section)?.[0] ?? '';
    expect(detected).toContain('<td data-label="p50 (24 h)">1.5 s</td>');
    expect(detected).toContain('<td data-label="p95 (7 days)">1.5 s</td>');
    expect(detected).toContain('<td data-label="Samples (7 days)">1</td>');
    const delivered = /<tr data-latency="delivered">[\s\S]*?<\/tr>/.exec(section)?.[0] ?? '';
    expect(delivered).toContain('<td data-label="p50 (24 h)">—</td>');
  });

  it('pages the hit history with cursors, newest first; the fragment is the table only', async () => {
    const c = client();
    await join(c, 'pages@example.com');
    const token = c.csrf((await c.req('/monitors/new')).text);
    const created = await c.req('/monitors', { _csrf: token, target: 'pager', keywords: '', intervalSec: '' });
    const monitorId = (created.location ?? '').split('/').pop() ?? '';
    const db = createDbClient({ url: dbHandle.url, poolSize: 1 });
    try {
      const t0 = Date.now() - 86_400_000;
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
      // a post from before the Free plan's 30-day window: stored (storage keeps Starter's 90 days), not shown
      await db.hit.create({
        data: {
          monitorId,
          tweetId: '999',
          tweetText: 'an old post',
          tweetAuthorId: '1',
          tweetAuthorUsername: 'pager',
          tweetCreatedAt: new Date(Date.now() - 40 * 86_400_000),
          detectedAt: new Date(t0 - 1000),
        },
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
    expect(ids(second.text)).toEqual([1001, 1000]); // not 999: past the plan's window
    expect(second.text).not.toContain('rel="next"');
    expect(second.text).not.toContain('data-live-src='); // older pages do not refresh
    const fragment = await c.req(`/monitors/${monitorId}/hits?fragment=1`);
    expect(fragment.text.trimStart()).toMatch(/^<div class="table-wrap">/);
    expect(fragment.text).not.toContain('<html');
    expect(ids(fragment.text)).toHaveLength(25);
    // the plan page says how far back each plan sees
    const plan = await c.req('/plan');
    expect(plan.text).toContain('Hit history of 30 days, delivery log of 7 days');
    expect(plan.text).toContain('Hit history of 90 days, delivery log of 30 days');
  });

  it('saves the events the form ticks: profile changes ticked {posts,profile}, not ticked {posts}; refusals shown on the form', async () => {
    const c = client();
    await join(c, 'events@example.com');
    const form = await c.req('/monitors/new');
    expect(form.text).toContain('<label for="f-events-profile">Profile changes</label>');
    const ticked = (page: string, kind: string) =>
      new RegExp(`<input[^>]*id="f-events-${kind}"[^>]*\\schecked[^>]*/>`).test(page);
    expect([ticked(form.text, 'posts'), ticked(form.text, 'profile')]).toEqual([true, false]);
    const fields = { _csrf: c.csrf(form.text), keywords: '', intervalSec: '', eventsShown: '1' };
    const db = createDbClient({ url: dbHandle.url, poolSize: 1 });
    try {
      const mine = { account: { email: 'events@example.com' } };
      // a query monitor has no profile; nothing ticked sends nothing: both refused, the ticks kept
      const query = await c.req('/monitors', { ...fields, target: '', query: 'launch', events: ['posts', 'profile'] });
      expect(query.status).toBe(422);
      expect(query.text).toMatch(
        /<p class="field-error" id="f-events-error" role="alert">A query monitor watches no account, so it has no profile: use posts<\/p>/,
      );
      expect(ticked(query.text, 'profile')).toBe(true);
      const none = await c.req('/monitors', { ...fields, target: 'alice' });
      expect(none.status).toBe(422);
      expect(none.text).toContain('Must name at least one of posts, profile, deletes');
      expect(await db.monitor.count({ where: mine })).toBe(0);

      const created = await c.req('/monitors', { ...fields, target: 'alice', events: ['posts', 'profile'] });
      expect(created.status).toBe(303);
      const id = (created.location ?? '').split('/').pop() ?? '';
      expect((await db.monitor.findUniqueOrThrow({ where: { id } })).events).toEqual(['posts', 'profile']);
      expect((await c.req(`/monitors/${id}`)).text).toContain('new posts and profile changes');
      // deleted posts: its own checkbox, refused for a query monitor like profile changes
      expect(form.text).toContain('<label for="f-events-deletes">Deleted posts</label>');
      const queryDeletes = await c.req('/monitors', {
        ...fields,
        target: '',
        query: 'launch',
        events: ['posts', 'deletes'],
      });
      expect(queryDeletes.status).toBe(422);
      expect(queryDeletes.text).toContain('sees no deletions');

      const edit = await c.req(`/monitors/${id}/edit`);
      expect([ticked(edit.text, 'posts'), ticked(edit.text, 'profile')]).toEqual([true, true]);
      // saved without the profile box: posts only
      const saved = await c.req(`/monitors/${id}`, {
        ...fields,
        _csrf: c.csrf(edit.text),
        target: 'alice',
        events: 'posts',
      });
      expect(saved.status).toBe(303);
      expect((await db.monitor.findUniqueOrThrow({ where: { id } })).events).toEqual(['posts']);
      // the deleted-posts box ticked
      const edit2 = await c.req(`/monitors/${id}/edit`);
      const withDeletes = await c.req(`/monitors/${id}`, {
        ...fields,
        _csrf: c.csrf(edit2.text),
        target: 'alice',
        events: ['posts', 'deletes'],
      });
      expect(withDeletes.status).toBe(303);
      expect((await db.monitor.findUniqueOrThrow({ where: { id } })).events).toEqual(['posts', 'deletes']);
      expect((await c.req(`/monitors/${id}`)).text).toContain('new posts and deleted posts');
      await db.monitor.update({ where: { id }, data: { events: ['posts'] } });

      // a new monitor without the box: posts only
      const other = client();
      await join(other, 'events-plain@example.com');
      const plainForm = await other.req('/monitors/new');
      const plain = await other.req('/monitors', {
        ...fields,
        _csrf: other.csrf(plainForm.text),
        target: 'bob',
        events: 'posts',
      });
      expect(plain.status).toBe(303);
      const plainId = (plain.location ?? '').split('/').pop() ?? '';
      expect((await db.monitor.findUniqueOrThrow({ where: { id: plainId } })).events).toEqual(['posts']);
    } finally {
      await db.$disconnect();
    }
  });

  it("shows the target's status as a badge with its date on the list and the monitor page; nothing when ok", async () => {
    const c = client();
    await join(c, 'status@example.com');
    const token = c.csrf((await c.req('/monitors/new')).text);
    const created = await c.req('/monitors', { _csrf: token, target: 'gone', keywords: '', intervalSec: '' });
    const id = (created.location ?? '').split('/').pop() ?? '';
    expect((await c.req('/monitors')).text).not.toContain('data-testid="target-status"');
    expect((await c.req(`/monitors/${id}`)).text).not.toContain('target-status');
    const db = createDbClient({ url: dbHandle.url, poolSize: 1 });
    try {
      const at = new Date('2026-11-20T08:30:00Z');
      await db.monitor.update({ where: { id }, data: { targetStatus: 'suspended', targetStatusAt: at } });
    } finally {
      await db.$disconnect();
    }
    const badge = /data-testid="target-status" data-status="suspended"\s*>Suspended since 2026-11-20 08:30 UTC</;
    expect((await c.req('/monitors')).text).toMatch(badge);
    const page = await c.req(`/monitors/${id}`);
    expect(page.text).toMatch(badge);
    expect(page.text).toContain('@gone is suspended (since 2026-11-20 08:30 UTC)');
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

/** Each item of the abuse review has its own test here (items 1, 2, 4, 9). */
describe('abuse closed', () => {
  async function signUp(c: ReturnType<typeof client>, email: string): Promise<void> {
    expect((await join(c, email)).status).toBe(303);
  }

  async function sessionKeys(): Promise<number> {
    const redis = new Redis(redisHandle.url, { keyPrefix: redisHandle.prefix });
    try {
      return (await redis.keys(`${redisHandle.prefix}dashboard:sess:*`)).length;
    } finally {
      redis.disconnect();
    }
  }

  it('item 1: 1,000 anonymous page views store no session; the stateless CSRF token still protects the forms', async () => {
    const before = await sessionKeys();
    for (let i = 0; i < 500; i++) {
      const a = await fetch(`${base}/signin`);
      const b = await fetch(`${base}/signup`);
      expect(a.status + b.status).toBe(400);
      expect(a.headers.getSetCookie().join()).not.toContain('sts_dash');
      await a.arrayBuffer();
      await b.arrayBuffer();
    }
    expect(await sessionKeys()).toBe(before);
    // a form from another visitor's token, a forged token, no cookie: 403, nothing created
    const victim = client();
    const page = await victim.req('/signup');
    const attacker = client();
    await attacker.req('/signup');
    const form = { email: 'csrf-anon@example.com', password: 'a good long password' };
    expect((await attacker.req('/signup', { ...form, _csrf: victim.csrf(page.text) })).status).toBe(403);
    const nonce = victim.cookie('sts_csrf').split('=')[1]!;
    expect((await victim.req('/signup', { ...form, _csrf: `${nonce}.forged` })).status).toBe(403);
    expect((await client().req('/signup', { ...form, _csrf: victim.csrf(page.text) })).status).toBe(403);
    expect(await sessionKeys()).toBe(before);
    // the right token signs up (still no session), and the sign-in makes one
    expect((await victim.req('/signup', { ...form, _csrf: victim.csrf(page.text) })).status).toBe(200);
    expect(await sessionKeys()).toBe(before);
    const signin = await victim.req('/signin');
    const done = await victim.req('/signin', { ...form, _csrf: victim.csrf(signin.text) });
    expect(done.status).toBe(303);
    expect(await sessionKeys()).toBe(before + 1);
  });

  it('item 2: failures from elsewhere do not lock the owner out; guesses stay bounded across addresses', async () => {
    await signUp(client({ 'x-forwarded-for': '203.0.113.1' }), 'owner@example.com');
    const guess = async (addr: string, password: string) => {
      const c = client({ 'x-forwarded-for': addr });
      const page = await c.req('/signin');
      return c.req('/signin', { _csrf: c.csrf(page.text), email: 'owner@example.com', password });
    };
    for (let i = 0; i < 10; i++) expect((await guess('198.51.100.7', 'wrong password!')).status).toBe(401);
    // the guessing address is throttled for this email ...
    const blocked = await guess('198.51.100.7', 'wrong password!');
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
    // ... the owner, from an address with no failures, gets in with the right password
    const owner = await guess('203.0.113.50', 'a good long password');
    expect(owner.status).toBe(303);
    expect(owner.location).toBe('/');
    // many addresses: at most SIGNIN_MAX_PER_EMAIL_HOURLY (15 here; 100 by default) guesses an hour
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) statuses.push((await guess(`192.0.2.${i + 10}`, 'wrong password!')).status);
    expect(statuses.filter((s) => s === 401)).toHaveLength(5); // 10 before + 5 = 15
    expect(statuses.slice(5).every((s) => s === 429)).toBe(true);
  });

  it('item 4: Test webhook and Redeliver are limited per account (429 page with Retry-After, nothing queued)', async () => {
    const c = client({ 'x-forwarded-for': '203.0.113.9' });
    await signUp(c, 'tester@example.com');
    const token = c.csrf((await c.req('/monitors/new')).text);
    const created = await c.req('/monitors', {
      _csrf: token,
      target: 'pinger',
      keywords: '',
      intervalSec: '',
      webhookUrl: 'https://discord.com/api/webhooks/123456789012345678/TokenTokenTokenTokenToken',
    });
    const monitorPath = created.location ?? '';
    const csrf = c.csrf((await c.req(monitorPath)).text);
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) statuses.push((await c.req(`${monitorPath}/webhook/test`, { _csrf: csrf })).status);
    expect(statuses).toEqual([303, 303, 303]);
    const limited = await c.req(`${monitorPath}/webhook/test`, { _csrf: csrf });
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(limited.text).toMatch(/limited per account/);
    // the bound is per account: another account's Test webhook still goes out
    const other = client({ 'x-forwarded-for': '203.0.113.10' });
    await signUp(other, 'other-tester@example.com');
    const otherToken = other.csrf((await other.req('/monitors/new')).text);
    const otherMonitor = await other.req('/monitors', {
      _csrf: otherToken,
      target: 'pinger',
      webhookUrl: 'https://discord.com/api/webhooks/123456789012345679/TokenTokenTokenTokenToken',
    });
    const otherCsrf = other.csrf((await other.req(otherMonitor.location ?? '')).text);
    expect((await other.req(`${otherMonitor.location ?? ''}/webhook/test`, { _csrf: otherCsrf })).status).toBe(303);
    expect(parseDashboardEnv({ SESSION_SECRET: 'a'.repeat(32) }).WEBHOOK_TEST_MAX_PER_MIN).toBe(10);
  });

  it('item 9: over TLS the session and CSRF cookies are __Host- prefixed (Secure, Path=/, no Domain)', async () => {
    const c = client({ 'x-forwarded-proto': 'https', 'x-forwarded-for': '203.0.113.20' });
    await c.req('/signup');
    expect(c.cookie('__Host-sts_csrf')).not.toBe('');
    const res = await join(c, 'tls@example.com');
    expect(res.status).toBe(303);
    const set = c.setCookies.find((x) => x.startsWith('__Host-sts_dash=')) ?? '';
    expect(set).toMatch(/; Secure/);
    expect(set).toMatch(/; Path=\//);
    expect(set).not.toMatch(/Domain=/i);
    expect(c.setCookies.some((x) => x.startsWith('sts_dash='))).toBe(false);
    expect((await c.req('/')).status).toBe(200);
    // the plain-HTTP name is not accepted over TLS (no downgrade of the cookie's guarantees)
    const plain = c.cookie('__Host-sts_dash').replace('__Host-sts_dash', 'sts_dash');
    const res2 = await fetch(`${base}/`, {
      redirect: 'manual',
      headers: { cookie: plain, 'x-forwarded-proto': 'https' },
    });
    expect(res2.status).toBe(303);
  });
});

describe('Recover: redeliver by window and outcome', () => {
  it('queues exactly the failed ones as one rate-limited action; a bad time is a clear 422 that queues nothing', async () => {
    const c = client({ 'x-forwarded-for': '203.0.113.21' });
    expect((await join(c, 'recover@example.com')).status).toBe(303);
    const created = await c.req('/monitors', {
      _csrf: c.csrf((await c.req('/monitors/new')).text),
      target: 'recovered',
      webhookUrl: 'https://discord.com/api/webhooks/123456789012345677/TokenTokenTokenTokenToken',
    });
    const monitorId = (created.location ?? '').split('/').pop() ?? '';
    const db = createDbClient({ url: dbHandle.url, poolSize: 1 });
    const since = new Date(Date.now() - 3600_000);
    try {
      const attempt = async (n: number, outcome: 'failed' | 'delivered', at: Date) => {
        const hit = await db.hit.upsert({
          where: { monitorId_tweetId_tweetCreatedAt: { monitorId, tweetId: String(1000 + n), tweetCreatedAt: at } },
          update: {},
          create: {
            monitorId,
            tweetId: String(1000 + n),
            tweetText: 'a post',
            tweetAuthorId: '1',
            tweetAuthorUsername: 'recovered',
            tweetCreatedAt: at,
          },
        });
        await db.deliveryAttempt.create({
          data: {
            monitorId,
            hitId: hit.id,
            event: 'monitor.hit',
            deliveryId: `d-${n}`,
            url: 'x',
            outcome,
            createdAt: at,
          },
        });
      };
      const after = (min: number) => new Date(since.getTime() + min * 60_000);
      for (let n = 0; n < 5; n++) await attempt(n, 'failed', after(n + 1)); // 5 failed since T: more than the 3 a minute
      await attempt(5, 'failed', after(10));
      await attempt(5, 'delivered', after(11)); // delivered since: not again
      await attempt(6, 'failed', new Date(since.getTime() - 60_000)); // before T
    } finally {
      await db.$disconnect();
    }
    const path = `/monitors/${monitorId}/deliveries`;
    const page = await c.req(path);
    expect(page.text).toContain('Redeliver these deliveries');
    expect(page.text).toMatch(/<label for="f-since">From \(UTC\)<\/label>/);
    expect(page.text).toMatch(/<label for="f-until">Until \(UTC, optional\)<\/label>/);
    // the three outcomes, all ticked by default
    expect(page.text.match(/name="outcomes"\s+value="(failed|skipped|exhausted)"[^>]*checked/g)).toHaveLength(3);
    const csrf = c.csrf(page.text);

    for (const [bad, message] of [
      ['yesterday', /Must be a date and time \(UTC\)/],
      ['', /Must be a date and time \(UTC\)/],
      [new Date(Date.now() + 3600_000).toISOString(), /Is in the future/],
    ] as const) {
      const refused = await c.req(`${path}/recover`, { _csrf: csrf, since: bad });
      expect(refused.status).toBe(422);
      expect(refused.text).toMatch(/id="f-since-error"/);
      expect(refused.text).toMatch(message);
    }
    // until before since, no outcome ticked: named next to the field, nothing queued
    const backwards = await c.req(`${path}/recover`, {
      _csrf: csrf,
      since: since.toISOString(),
      until: new Date(since.getTime() - 60_000).toISOString(),
    });
    expect([backwards.status, /id="f-until-error"[^>]*>Is before since/.test(backwards.text)]).toEqual([422, true]);
    const noOutcome = await c.req(`${path}/recover`, { _csrf: csrf, since: since.toISOString(), outcomesShown: '1' });
    expect([noOutcome.status, /id="f-outcomes-error"/.test(noOutcome.text)]).toEqual([422, true]);
    // a window that ends before the failures, and only skipped ones: nothing to queue
    const early = { _csrf: csrf, since: since.toISOString(), until: since.toISOString() };
    expect((await c.req(`${path}/recover`, early)).status).toBe(303);
    expect((await c.req(path)).text).toContain('No deliveries to recover in that window: nothing queued.');
    const skippedOnly = { _csrf: csrf, since: since.toISOString(), outcomesShown: '1', outcomes: 'skipped' };
    expect((await c.req(`${path}/recover`, skippedOnly)).status).toBe(303);
    expect((await c.req(path)).text).toContain('No deliveries to recover in that window: nothing queued.');
    // without the form's token: refused, nothing queued
    expect((await c.req(`${path}/recover`, { since: since.toISOString() })).status).toBe(403);

    // the browser's datetime-local value (read as UTC): 5 failed since T, one click, one outbound action
    const local = since.toISOString().slice(0, 19);
    const done = await c.req(`${path}/recover`, { _csrf: csrf, since: local });
    expect(done.status).toBe(303);
    expect(done.location).toBe(path);
    expect((await c.req(path)).text).toContain('5 deliveries queued for redelivery.');
    // clicked again while those redeliveries are pending: none is queued twice (no outbound action)
    expect((await c.req(`${path}/recover`, { _csrf: csrf, since: local })).status).toBe(303);
    expect((await c.req(path)).text).toContain('No deliveries to recover in that window: nothing queued.');
    /** the dispatcher has recorded the redeliveries (failed again): Recover may queue them again */
    const redelivered = async () => {
      const db = createDbClient({ url: dbHandle.url, poolSize: 1 });
      await db.$executeRaw`DELETE FROM pending_redeliveries`;
      await db.$disconnect();
    };
    await redelivered();
    // from the minute of the third failure on (ISO with zone, as the CLI takes): 3 of them
    const later = new Date(since.getTime() + 3 * 60_000).toISOString();
    expect((await c.req(`${path}/recover`, { _csrf: csrf, since: later })).status).toBe(303);
    expect((await c.req(path)).text).toContain('3 deliveries queued for redelivery.');
    // nothing failed since now-ish: nothing queued
    expect((await c.req(`${path}/recover`, { _csrf: csrf, since: new Date().toISOString() })).status).toBe(303);
    expect((await c.req(path)).text).toContain('No deliveries to recover in that window: nothing queued.');
    // a click that queues nothing is no outbound action; the third that queues is
    await redelivered();
    expect((await c.req(`${path}/recover`, { _csrf: csrf, since: local })).status).toBe(303);
    await redelivered();
    // WEBHOOK_TEST_MAX_PER_MIN=3: the next click is refused with the per-account limit
    const limited = await c.req(`${path}/recover`, { _csrf: csrf, since: local });
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(limited.text).toMatch(/limited per account/);

    // another account's monitor: 404
    const other = client({ 'x-forwarded-for': '203.0.113.22' });
    expect((await join(other, 'recover-other@example.com')).status).toBe(303);
    const otherCsrf = other.csrf((await other.req('/monitors/new')).text);
    expect((await other.req(`${path}/recover`, { _csrf: otherCsrf, since: local })).status).toBe(404);
  });
});

describe('a disabled webhook: held events shown, Enable webhook', () => {
  it('shows the held count and enables the webhook; another account gets 404', async () => {
    const c = client({ 'x-forwarded-for': '203.0.113.23' });
    expect((await join(c, 'held@example.com')).status).toBe(303);
    const created = await c.req('/monitors', {
      _csrf: c.csrf((await c.req('/monitors/new')).text),
      target: 'heldtarget',
      webhookUrl: 'https://discord.com/api/webhooks/123456789012345678/TokenTokenTokenTokenToken',
    });
    const monitorId = (created.location ?? '').split('/').pop() ?? '';
    const db = createDbClient({ url: dbHandle.url, poolSize: 1 });
    try {
      await db.webhookEndpoint.update({
        where: { monitorId },
        data: {
          consecutiveFailures: 9,
          firstFailureAt: new Date(Date.now() - 4 * 86_400_000),
          disabledAt: new Date(Date.now() - 3600_000),
          heldCount: 1234,
          heldDropped: 2,
        },
      });
      const page = await c.req(`/monitors/${monitorId}`);
      expect(page.text).toMatch(/data-testid="webhook-held" data-held="1234"/);
      expect(page.text).toContain('1,234 held events</strong>: they go out, oldest first and before new ones');
      expect(page.text).toContain('2 older ones were dropped');
      expect(page.text).toContain('Enable webhook');
      const csrf = c.csrf(page.text);

      const other = client({ 'x-forwarded-for': '203.0.113.24' });
      expect((await join(other, 'held-other@example.com')).status).toBe(303);
      const otherCsrf = other.csrf((await other.req('/monitors/new')).text);
      expect((await other.req(`/monitors/${monitorId}/webhook/enable`, { _csrf: otherCsrf })).status).toBe(404);
      expect((await c.req(`/monitors/${monitorId}/webhook/enable`, {})).status).toBe(403); // no form token
      expect((await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId } })).disabledAt).not.toBeNull();

      const enabled = await c.req(`/monitors/${monitorId}/webhook/enable`, { _csrf: csrf });
      expect([enabled.status, enabled.location]).toEqual([303, `/monitors/${monitorId}`]);
      const after = await c.req(`/monitors/${monitorId}`);
      expect(after.text).toContain('Webhook enabled: the 1234 held events go out first, oldest first.');
      expect(after.text).toContain('they are going out now, oldest first');
      expect(after.text).not.toContain('Enable webhook');
      expect(await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId } })).toMatchObject({
        disabledAt: null,
        consecutiveFailures: 0,
        heldCount: 1234,
      });
    } finally {
      await db.$disconnect();
    }
  });
});
