import http from 'node:http';
import { AmqpClient, type Envelope } from '@sts/messaging';
import { createLogger } from '@sts/common';
import { createSocialTweet, createSocialUser } from '@sts/social';
import { spawnService, startFakeX, waitFor } from '@sts/testing';
import { openProcessBed } from '../test/processBed';

function fetchText(port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      })
      .on('error', reject);
  });
}

async function get(port: number, path: string): Promise<number> {
  return (await fetchText(port, path)).status;
}

describe('poller main', () => {
  it('runs the whole loop as a process: tweet → hit → event on RabbitMQ; exits 0 on SIGTERM', async () => {
    const bed = await openProcessBed();
    const db = bed.db;
    const logger = createLogger({ service: 'poller-main-test', level: 'error' });
    const amqp = new AmqpClient({ url: bed.env.AMQP_URL, logger, name: 'poller-main-test' });
    const received: Envelope<'monitor.hit'>[] = [];
    const proc = spawnService('services/poller/src/main.ts', {
      ...bed.env,
      POLL_INTERVAL_SECONDS: '1',
      LOG_LEVEL: 'error',
    });
    try {
      await amqp.start();
      await amqp.consume({
        queue: 'main-test',
        bindings: ['monitor.hit'],
        handler: (e) => (received.push(e), Promise.resolve('ack' as const)),
      });
      const account = await db.account.create({ data: { email: 'main@example.com', plan: 'starter' } });
      await createSocialUser(db, { username: 'mainuser', name: 'Main' });
      const monitor = await db.monitor.create({
        data: { accountId: account.id, targetUsername: 'MainUser', targetKey: 'mainuser', keywords: ['ship'] },
      });
      const { opsPort: port } = JSON.parse(await proc.waitForLine(/poller started/)) as { opsPort: number };
      expect(await get(port, '/healthz')).toBe(200);
      await waitFor(async () => (await get(port, '/readyz')) === 200);
      await createSocialTweet(db, { authorUsername: 'mainuser', text: 'we ship today' });
      await createSocialTweet(db, { authorUsername: 'mainuser', text: 'nothing to see' });
      const event = await waitFor(() => received.find((e) => e.payload.monitor.id === monitor.id), 15_000);
      expect(event.payload.tweet.text).toBe('we ship today');
      expect(event.payload.monitor.targetUsername).toBe('MainUser');
      proc.child.kill('SIGTERM');
      expect(await proc.exited).toBe(0);
      expect(await db.hit.count({ where: { monitorId: monitor.id } })).toBe(1);
    } finally {
      proc.child.kill('SIGKILL');
      await amqp.stop();
      await bed.close();
    }
  });

  it('with RabbitMQ unreachable at start it still polls, keeps the events in the outbox and is not ready', async () => {
    const bed = await openProcessBed({ amqpUrl: 'amqp://guest:guest@127.0.0.1:1/' });
    const db = bed.db;
    const proc = spawnService('services/poller/src/main.ts', {
      ...bed.env,
      POLL_INTERVAL_SECONDS: '1',
      LOG_LEVEL: 'error',
    });
    try {
      const account = await db.account.create({ data: { email: 'down@example.com', plan: 'starter' } });
      await createSocialUser(db, { username: 'downuser', name: 'Down' });
      const monitor = await db.monitor.create({
        data: { accountId: account.id, targetUsername: 'downuser', targetKey: 'downuser' },
      });
      const { opsPort: port } = JSON.parse(await proc.waitForLine(/poller started/)) as { opsPort: number };
      expect(await get(port, '/healthz')).toBe(200);
      // ok/failed per dependency, no hostnames or error text; the others answer (a loaded machine may
      // need a few tries within the 2 s check limit), RabbitMQ stays failed
      const ready = await waitFor(async () => {
        const r = await fetchText(port, '/readyz');
        const { checks } = JSON.parse(r.body) as { checks: Record<string, string> };
        return checks.postgres === 'ok' && checks.redis === 'ok' && checks.migrations === 'ok' ? r : null;
      }, 30_000);
      expect(ready.status).toBe(503);
      expect(JSON.parse(ready.body)).toEqual({
        status: 'unavailable',
        checks: { postgres: 'ok', redis: 'ok', rabbitmq: 'failed', migrations: 'ok' },
      });
      await createSocialTweet(db, { authorUsername: 'downuser', text: 'recorded anyway' });
      await waitFor(async () => (await db.hit.count({ where: { monitorId: monitor.id } })) === 1, 15_000);
      const metrics = await waitFor(async () => {
        const m = (await fetchText(port, '/metrics')).body;
        // the poll counter moves just after the hit's transaction commits: wait for both
        return /poller_outbox_pending\{[^}]*\} 1\b/.test(m) && /poller_polls_total\{[^}]*outcome="ok"/.test(m)
          ? m
          : null;
      });
      expect(metrics).toMatch(/poller_polls_total\{[^}]*outcome="ok"[^}]*\} \d+/);
      expect(metrics).toMatch(/poller_hits_total\{[^}]*\} 1\b/);
      expect(metrics).toMatch(/poller_outbox_oldest_pending_seconds/);
      const row = await db.outboxEvent.findFirstOrThrow({});
      expect(row.publishedAt).toBeNull();
      proc.child.kill('SIGTERM');
      expect(await proc.exited).toBe(0);
    } finally {
      proc.child.kill('SIGKILL');
      await bed.close();
    }
  });

  it('X_MONITOR_MODE=timeline reads a query monitor by recent search: a matching post is one hit', async () => {
    const bed = await openProcessBed();
    const db = bed.db;
    const fake = await startFakeX();
    const proc = spawnService('services/poller/src/main.ts', {
      ...bed.env,
      POLL_INTERVAL_SECONDS: '1',
      SOCIAL_SOURCE: 'x',
      X_MONITOR_MODE: 'timeline',
      X_API_BASE_URL: fake.url,
      X_BEARER_TOKEN: 'timeline-token',
      X_PRICE_USER_READ: '0.02',
      OPS_PORT: '0',
      LOG_LEVEL: 'error',
    });
    try {
      fake.state.addUser({ username: 'qauthor' });
      const account = await db.account.create({ data: { email: 'tq@example.com', plan: 'starter' } });
      const monitor = await db.monitor.create({
        data: { accountId: account.id, query: 'rocket launch', createdAt: new Date(Date.now() - 3600_000) },
      });
      const match = fake.state.post({ author: 'qauthor', text: 'Rocket launch at noon' });
      fake.state.post({ author: 'qauthor', text: 'a launch, nothing else' });
      const { opsPort: port } = JSON.parse(await proc.waitForLine(/poller started/)) as { opsPort: number };
      const hit = await waitFor(() => db.hit.findFirst({ where: { monitorId: monitor.id } }), 15_000);
      expect(hit.tweetId).toBe(match.id);
      // read again after its interval: still the one hit, and no timeline read (the monitor has no target)
      await waitFor(() => fake.requests.count({ family: 'search' }) >= 2 || undefined, 15_000);
      expect(await db.hit.count({ where: { monitorId: monitor.id } })).toBe(1);
      expect(fake.requests.count({ family: 'timeline' })).toBe(0);
      // the post the searches returned is billed once (x_billable_reads, x_billable_total) at the price set
      const billed = await waitFor(() => db.xBillableRead.findMany(), 15_000);
      expect(billed.map((r) => [r.resource, r.resourceId, r.account])).toEqual([['post_read', match.id, 'qauthor']]);
      const counted = /x_billable_total\{[^}]*resource="post_read"[^}]*\} 1\b/;
      const metrics = await waitFor(async () => {
        const m = (await fetchText(port, '/metrics')).body;
        return counted.test(m) ? m : null;
      });
      expect(metrics).toMatch(/x_billable_price_usd\{[^}]*resource="user_read"[^}]*\} 0\.02\b/);
      proc.child.kill('SIGTERM');
      expect(await proc.exited).toBe(0);
    } finally {
      proc.child.kill('SIGKILL');
      await fake.stop();
      await bed.close();
    }
  });

  it('refuses a bad configuration, naming the variable, with exit code 2', async () => {
    const bad = spawnService('services/poller/src/main.ts', { POLL_INTERVAL_SECONDS: 'soon' });
    expect(await bad.exited).toBe(2);
    expect(bad.lines.join('\n')).toContain('POLL_INTERVAL_SECONDS');
    const noToken = spawnService('services/poller/src/main.ts', { SOCIAL_SOURCE: 'x' });
    expect(await noToken.exited).toBe(2);
    expect(noToken.lines.join('\n')).toContain('X_BEARER_TOKEN: is required when SOCIAL_SOURCE=x');
  });

  it.each([
    ['DATABASE_DIRECT_URL', 'mysql://127.0.0.1/sts'],
    ['X_MONITOR_MODE', 'firehose'],
    ['X_MONITOR_MODE', 'STREAM'],
    ['X_QUERY_MAX_LENGTH', 'long'],
    ['X_QUERY_MAX_LENGTH', '10'],
    ['X_QUERY_MAX_LENGTH', '100000'],
    ['X_USER_CACHE_TTL_SECONDS', '-1'],
    ['X_LOW_PRIORITY_RESERVE_PERCENT', '100'],
    ['X_RATE_LIMITS', 'timeline=lots'],
    ['TARGET_FLAP_SHARE', '0'],
    ['TARGET_FLAP_SHARE', '101'],
    ['TARGET_FLAP_SHARE', '20%'],
    ['TARGET_FLAP_WINDOW_SEC', '0'],
    ['TARGET_FLAP_MIN', 'few'],
    ['X_PRICE_POST_READ', 'half a cent'],
    ['X_PRICE_USER_READ', '-0.01'],
    ['X_PRICE_EVENT', 'free'],
  ])('refuses %s=%j with exit code 2, naming it', async (name, value) => {
    const bad = spawnService('services/poller/src/main.ts', { [name]: value });
    expect(await bad.exited).toBe(2);
    expect(bad.lines.join('\n')).toContain(name);
  });
});
