import { randomBytes, randomUUID } from 'node:crypto';
import { createLogger } from '@sts/common';
import { createSecretBox } from '@sts/core';
import { createDbClient, type Db } from '@sts/db';
import { AmqpClient, type Envelope } from '@sts/messaging';
import { createTestDatabase, createTestRedis, createTestVhost, waitFor } from '@sts/testing';
import { runCli } from '../main';
import { allCommands } from './index';

/** DNS for the save-time URL check, local (no network): unknown names fail like ENOTFOUND. */
const DNS: Record<string, string[]> = {
  'example.com': ['93.184.215.14'],
  'discord.com': ['162.159.128.233'],
  'hooks.slack.com': ['34.224.17.240'],
  'intranet.example': ['10.20.30.40', 'fd00::1'],
  localhost: ['127.0.0.1', '::1'],
};
const resolveHost = (host: string) =>
  DNS[host]
    ? Promise.resolve(DNS[host])
    : Promise.reject(Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' }));

const KEY = randomBytes(32).toString('hex');
const logger = createLogger({ service: 'cli-test', level: 'error' });

describe('monitor and webhook commands', () => {
  let testDb: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;
  let amqpUrl: string;
  let env: NodeJS.ProcessEnv;
  let accountId: string;
  let listener: AmqpClient;
  const seen: Envelope<'monitor.test' | 'webhook.redeliver'>[] = [];

  const cli = (...argv: string[]) => runCli(argv, env, allCommands, { resolveHost });
  const json = async (...argv: string[]) => {
    const r = await cli(...argv, '--json');
    if (r.code !== 0) throw new Error(`exit ${r.code}: ${r.stderr}`);
    return JSON.parse(r.stdout) as Record<string, unknown>;
  };
  /** `monitor create` on the test account, watching `target` */
  const monitorCreate = (target: string) => ['monitor', 'create', '--account', accountId, '--target', target];

  beforeAll(async () => {
    testDb = await createTestDatabase();
    db = createDbClient({ url: testDb.url, poolSize: 2 });
    amqpUrl = (await createTestVhost()).url;
    // these tests make many monitors on one account: a high limit (the limit has its own test)
    env = { DATABASE_URL: testDb.url, AMQP_URL: amqpUrl, SECRETS_ENCRYPTION_KEY: KEY, PLAN_STARTER_MONITORS: '100' };
    accountId = (await db.account.create({ data: { email: 'cli@example.test', plan: 'starter' } })).id;
    // what the dispatcher would receive: a queue bound to the two routing keys the CLI publishes
    listener = new AmqpClient({ url: amqpUrl, logger, name: 'cli-test-listener' });
    await listener.start();
    await listener.consume({
      queue: 'cli-test',
      bindings: ['monitor.test', 'webhook.redeliver'],
      handler: (e) => {
        seen.push(e);
        return Promise.resolve('ack' as const);
      },
    });
  });

  afterAll(async () => {
    await listener.stop();
    await db.$disconnect();
    await testDb.drop();
  });

  describe('monitor create', () => {
    it('creates a monitor with keywords and a webhook; the secret is shown once and stored encrypted', async () => {
      const out = await json(
        ...monitorCreate('NASA'),
        '--keywords',
        'launch, moon  landing,Launch',
        '--webhook-url',
        'https://example.com/hooks/sts',
        '--interval',
        '120',
      );
      expect(Object.keys(out).sort()).toEqual(['id', 'secret']);
      expect(out.secret).toMatch(/^whsec_/);
      const monitor = await db.monitor.findUniqueOrThrow({
        where: { id: out.id as string },
        include: { webhook: true },
      });
      expect(monitor).toMatchObject({
        accountId,
        targetUsername: 'NASA',
        targetKey: 'nasa',
        keywords: ['launch', 'moon landing'],
        checkIntervalSec: 120,
        isActive: true,
      });
      expect(monitor.webhook).toMatchObject({ url: 'https://example.com/hooks/sts', kind: 'native', isBroken: false });
      expect(monitor.webhook!.secretCiphertext).not.toContain(out.secret as string);
      expect(createSecretBox(KEY).decrypt(monitor.webhook!.secretCiphertext, monitor.id)).toBe(out.secret);
    });

    it('creates a monitor without webhook (no secret), and recognises Discord and Slack URLs', async () => {
      const bare = await json('monitor', 'create', '--account', accountId, '--target', '@jack');
      expect(Object.keys(bare)).toEqual(['id']);
      expect(await db.monitor.findUniqueOrThrow({ where: { id: bare.id as string } })).toMatchObject({
        targetUsername: 'jack',
        targetKey: 'jack',
        keywords: [],
      });
      const discord = await json(
        ...monitorCreate('jack'),
        '--webhook-url',
        'https://discord.com/api/webhooks/123/tok-en',
      );
      const slack = await json(...monitorCreate('jack'), '--webhook-url', 'https://hooks.slack.com/services/T1/B2/abc');
      expect((await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId: discord.id as string } })).kind).toBe(
        'discord',
      );
      expect((await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId: slack.id as string } })).kind).toBe(
        'slack',
      );
    });

    it('--events posts,profile opts in to profile changes (default posts only); list shows events and target_status', async () => {
      const out = await json(...monitorCreate('evented'), '--events', 'profile,posts');
      expect((await db.monitor.findUniqueOrThrow({ where: { id: out.id as string } })).events).toEqual([
        'posts',
        'profile',
      ]);
      const plain = await json('monitor', 'create', '--account', accountId, '--target', 'evented');
      expect((await db.monitor.findUniqueOrThrow({ where: { id: plain.id as string } })).events).toEqual(['posts']);
      await db.monitor.update({ where: { id: out.id as string }, data: { targetStatus: 'suspended' } });
      const list = (await json('monitor', 'list', '--account', accountId)) as { data: Record<string, unknown>[] };
      expect(list.data.find((m) => m.id === out.id)).toMatchObject({
        events: ['posts', 'profile'],
        target_status: 'suspended',
      });
      expect(list.data.find((m) => m.id === plain.id)).toMatchObject({ events: ['posts'], target_status: 'ok' });
      const text = await cli('monitor', 'list', '--account', accountId);
      expect(text.stdout.split('\n').find((l) => l.startsWith(out.id as string))).toMatch(
        /events posts, profile {2}target SUSPENDED/,
      );
      const updated = await json('monitor', 'update', '--monitor', plain.id as string, '--events', 'profile');
      expect(updated.events).toEqual(['profile']);
      // bad kinds and an empty list are refused, naming the flag; nothing changes
      const before = await db.monitor.count();
      const bad = await cli('monitor', 'create', '--account', accountId, '--target', 'x', '--events', 'posts,likes');
      expect(bad.code).toBe(2);
      expect(bad.stderr).toMatch(/--events.*unknown event kind "likes"/);
      const empty = await cli('monitor', 'update', '--monitor', plain.id as string, '--events', ' , ');
      expect(empty.code).toBe(2);
      expect(empty.stderr).toMatch(/--events must name at least one of posts, profile/);
      expect(await db.monitor.count()).toBe(before);
      expect((await db.monitor.findUniqueOrThrow({ where: { id: plain.id as string } })).events).toEqual(['profile']);
    });

    it('prints the secret once in the text output too', async () => {
      const r = await cli(...monitorCreate('NASA'), '--webhook-url', 'https://example.com/h');
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/signing secret \(shown once, store it now\): whsec_/);
    });

    it.each([
      [['--webhook-url', 'http://example.com/h'], /--webhook-url: webhook URL must use https \(got http\)/],
      [['--webhook-url', 'not a url'], /--webhook-url: webhook URL is not a valid URL/],
      [['--webhook-url', 'https://user:pw@example.com/h'], /must not contain credentials/],
      [['--keywords', '!!!'], /--keywords: keyword "!!!" has no letters or digits/],
      [['--interval', '5'], /--interval must be a whole number from 10 to 86400/],
    ])('refuses bad input %j with a clear usage error and changes nothing', async (extra, message) => {
      const before = await db.monitor.count();
      const r = await cli('monitor', 'create', '--account', accountId, '--target', 'NASA', ...extra, '--json');
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(message);
      expect(JSON.parse(r.stdout)).toHaveProperty('error');
      expect(await db.monitor.count()).toBe(before);
    });

    it('refuses a bad target, a malformed or unknown account', async () => {
      let r = await cli('monitor', 'create', '--account', accountId, '--target', 'not a user!');
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/--target must be a username/);
      r = await cli('monitor', 'create', '--account', 'abc', '--target', 'NASA');
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/--account must be an account id/);
      r = await cli('monitor', 'create', '--account', randomUUID(), '--target', 'NASA');
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/no account with id/);
      r = await cli('monitor', 'create', '--target', 'NASA');
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/--account is required/);
    });

    it('needs SECRETS_ENCRYPTION_KEY for a webhook, and says so', async () => {
      const r = await runCli(
        ['monitor', 'create', '--account', accountId, '--target', 'NASA', '--webhook-url', 'https://example.com/h'],
        { DATABASE_URL: testDb.url },
        allCommands,
        { resolveHost },
      );
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/SECRETS_ENCRYPTION_KEY is not set/);
      const bad = await runCli(
        ['monitor', 'create', '--account', accountId, '--target', 'NASA', '--webhook-url', 'https://example.com/h'],
        { DATABASE_URL: testDb.url, SECRETS_ENCRYPTION_KEY: 'short' },
        allCommands,
        { resolveHost },
      );
      expect(bad.code).toBe(1);
      expect(bad.stderr).toMatch(/SECRETS_ENCRYPTION_KEY must be 32 bytes/);
    });
  });

  describe('save-time webhook URL checks (nothing saved on refusal)', () => {
    const create = (url: string, extraEnv: NodeJS.ProcessEnv = {}) =>
      runCli(
        ['monitor', 'create', '--account', accountId, '--target', 'NASA', '--webhook-url', url, '--json'],
        { ...env, ...extraEnv },
        allCommands,
        { resolveHost },
      );

    it.each([
      ['http://example.com/h', /--webhook-url: webhook URL must use https \(got http\)/],
      ['https://127.0.0.1/h', /host 127\.0\.0\.1 is not a public address \(loopback\)/],
      ['https://2130706433/h', /host 127\.0\.0\.1 is not a public address \(loopback\)/],
      ['https://0x7f.1/h', /host 127\.0\.0\.1 is not a public address/],
      ['https://017700000001/h', /host 127\.0\.0\.1 is not a public address/],
      ['https://10.0.0.1/h', /private/],
      ['https://169.254.169.254/h', /link-local/],
      ['https://100.64.1.1/h', /carrier-grade NAT/],
      ['https://[::1]/h', /::1 is not a public address \(loopback\)/],
      ['https://[::ffff:127.0.0.1]/h', /embeds 127\.0\.0\.1/],
      ['https://[64:ff9b::10.0.0.1]/h', /embeds 10\.0\.0\.1/],
      ['https://[fd00::1]/h', /unique-local/],
      ['https://[fe80::1]/h', /link-local/],
      ['https://example.com:8443/h', /--webhook-url: webhook URL port 8443 is not allowed: only 443/],
      ['https://intranet.example/h', /host intranet\.example resolves only to non-public addresses; use a public/],
      ['https://localhost/h', /host localhost resolves only to non-public addresses/],
    ])('monitor create refuses %s with a usage error, nothing saved', async (url, message) => {
      const monitors = await db.monitor.count();
      const hooks = await db.webhookEndpoint.count();
      const r = await create(url);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(message);
      expect((JSON.parse(r.stdout) as { error: string }).error).toMatch(message);
      expect(await db.monitor.count()).toBe(monitors);
      expect(await db.webhookEndpoint.count()).toBe(hooks);
    });

    it('webhook set refuses the same URLs and keeps the stored webhook', async () => {
      const made = await json(...monitorCreate('NASA'), '--webhook-url', 'https://example.com/keep');
      const monitorId = made.id as string;
      const before = await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId } });
      for (const url of [
        'https://2130706433/',
        'https://[::ffff:7f00:1]/',
        'https://example.com:8080/',
        'https://intranet.example/',
      ]) {
        const r = await cli('webhook', 'set', '--monitor', monitorId, '--url', url);
        expect(r.code).toBe(2);
        expect(r.stderr).toMatch(/^--url: webhook URL /);
      }
      expect(await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId } })).toEqual(before);
    });

    it('WEBHOOK_ALLOWED_PORTS and WEBHOOK_ALLOW_PRIVATE_HOSTS (names only) open exactly what they name', async () => {
      const dev = { WEBHOOK_ALLOWED_PORTS: '8443', WEBHOOK_ALLOW_PRIVATE_HOSTS: 'localhost' };
      let r = await create('https://localhost:8443/h', dev);
      expect(r.code).toBe(0);
      const id = (JSON.parse(r.stdout) as { id: string }).id;
      expect(await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId: id } })).toMatchObject({
        url: 'https://localhost:8443/h',
      });
      r = await create('https://127.0.0.1:8443/h', dev);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/127\.0\.0\.1 is not a public address/);
      r = await create('https://localhost:9000/h', dev);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/port 9000 is not allowed: only 443, 8443/);
      // an IP literal in the allow list is a configuration error (exit 1), nothing saved
      const monitors = await db.monitor.count();
      r = await create('https://example.com/h', { WEBHOOK_ALLOW_PRIVATE_HOSTS: '127.0.0.1' });
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/WEBHOOK_ALLOW_PRIVATE_HOSTS takes host names only; "127\.0\.0\.1" is an IP address/);
      r = await create('https://example.com/h', { WEBHOOK_ALLOWED_PORTS: 'eighty' });
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/WEBHOOK_ALLOWED_PORTS must be a comma list of ports/);
      expect(await db.monitor.count()).toBe(monitors);
    });

    it('saves with a warning when the name cannot be resolved', async () => {
      const r = await create('https://not-yet-live.example/h');
      expect(r.code).toBe(0);
      const out = JSON.parse(r.stdout) as { id: string; warnings: string[] };
      expect(out.warnings).toEqual([expect.stringMatching(/could not resolve not-yet-live\.example \(ENOTFOUND\)/)]);
      expect(await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId: out.id } })).toMatchObject({
        url: 'https://not-yet-live.example/h',
      });
      const text = await cli('webhook', 'set', '--monitor', out.id, '--url', 'https://still-not-live.example/x');
      expect(text.code).toBe(0);
      expect(text.stdout).toMatch(/warning: could not resolve still-not-live\.example/);
    });
  });

  describe('webhook set / rotate / test', () => {
    let monitorId: string;
    let firstSecret: string;
    beforeAll(async () => {
      const out = await json(
        ...monitorCreate('NASA'),
        '--keywords',
        'launch',
        '--webhook-url',
        'https://example.com/a',
      );
      monitorId = out.id as string;
      firstSecret = out.secret as string;
    });

    it('rotate: a new secret, shown once, replaces the old one', async () => {
      const out = await json('webhook', 'rotate', '--monitor', monitorId);
      expect(out.secret).toMatch(/^whsec_/);
      expect(out.secret).not.toBe(firstSecret);
      const hook = await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId } });
      expect(createSecretBox(KEY).decrypt(hook.secretCiphertext, monitorId)).toBe(out.secret);
      expect(hook.secretRotatedAt).not.toBeNull();
      // overlapped by default; --now for a leaked secret; use-new-secret ends an overlap
      expect(createSecretBox(KEY).decrypt(hook.previousSecretCiphertext!, monitorId)).toBe(firstSecret);
      expect(out.previous_secret_until).toBe(hook.previousSecretUntil!.toISOString());
      expect(out.standard_secret).toBe(`whsec_${Buffer.from(out.secret as string).toString('base64')}`);
      const switched = await json('webhook', 'use-new-secret', '--monitor', monitorId);
      expect(switched).toEqual({ monitor_id: monitorId, previous_secret_until: null });
      expect((await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId } })).previousSecretUntil).toBeNull();
      const now = await json('webhook', 'rotate', '--monitor', monitorId, '--now');
      expect(now.previous_secret_until).toBeNull();
      const after = await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId } });
      expect(after.previousSecretCiphertext).toBeNull();
      expect(createSecretBox(KEY).decrypt(after.secretCiphertext, monitorId)).toBe(now.secret);
      firstSecret = now.secret as string;
    });

    it('set --retry / --ordering: only the delivery rules change (URL and secret stay); a bad value names the flag', async () => {
      const before = await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId } });
      expect(before).toMatchObject({ retryPolicy: 'none', ordering: 'unordered' });
      const out = await json('webhook', 'set', '--monitor', monitorId, '--retry', 'standard', '--ordering', 'fifo');
      expect(out).toMatchObject({ monitor_id: monitorId, retry_policy: 'standard', ordering: 'fifo' });
      expect(out).not.toHaveProperty('secret');
      const after = await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId } });
      expect(after).toMatchObject({ retryPolicy: 'standard', ordering: 'fifo', url: before.url });
      expect(after.secretCiphertext).toBe(before.secretCiphertext);
      const bad = await cli('webhook', 'set', '--monitor', monitorId, '--retry', 'sometimes');
      expect(bad.code).not.toBe(0);
      expect(bad.stderr).toMatch(/--retry/);
      expect(bad.stderr).toMatch(/none, standard/);
      expect((await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId } })).retryPolicy).toBe('standard');
      const none = await cli('webhook', 'set', '--monitor', monitorId);
      expect(none.code).not.toBe(0);
      expect(none.stderr).toMatch(/--url, --retry or --ordering/);
      // a new URL keeps the rules unless given
      const moved = await json(
        'webhook',
        'set',
        '--monitor',
        monitorId,
        '--url',
        'https://example.com/b',
        '--retry',
        'none',
      );
      expect(moved).toMatchObject({ retry_policy: 'none', ordering: 'fifo' });
      await json('webhook', 'set', '--monitor', monitorId, '--url', 'https://example.com/a', '--ordering', 'unordered');
    });

    it('set: a new URL and a new secret; a broken flag is cleared', async () => {
      await db.webhookEndpoint.update({ where: { monitorId }, data: { isBroken: true, brokenReason: 'Discord 404' } });
      const out = await json('webhook', 'set', '--monitor', monitorId, '--url', 'https://discord.com/api/webhooks/9/x');
      expect(out).toMatchObject({ monitor_id: monitorId, kind: 'discord' });
      expect(out.url).not.toContain('/x');
      const hook = await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId } });
      expect(hook).toMatchObject({ url: 'https://discord.com/api/webhooks/9/x', kind: 'discord', isBroken: false });
      expect(createSecretBox(KEY).decrypt(hook.secretCiphertext, monitorId)).toBe(out.secret);
      // set on a monitor without webhook creates one
      const bare = await json('monitor', 'create', '--account', accountId, '--target', 'jack');
      const added = await json('webhook', 'set', '--monitor', bare.id as string, '--url', 'https://example.com/new');
      expect(added.secret).toMatch(/^whsec_/);
    });

    it('monitor list reports a disabled endpoint; set: a new URL starts healthy', async () => {
      const listed = async () => {
        const out = (await json('monitor', 'list', '--account', accountId)) as unknown as {
          data: { id: string; webhook: Record<string, unknown> }[];
        };
        return out.data.find((m) => m.id === monitorId)!;
      };
      const since = new Date('2026-11-20T01:02:03.456Z');
      const disabledAt = new Date('2026-11-23T04:05:06.789Z');
      await db.webhookEndpoint.update({
        where: { monitorId },
        data: { consecutiveFailures: 12, firstFailureAt: since, disabledAt },
      });
      expect((await listed()).webhook).toMatchObject({
        health: 'disabled',
        consecutive_failures: 12,
        failing_since: since.toISOString(),
        disabled_at: disabledAt.toISOString(),
      });
      const before = await cli('monitor', 'list', '--account', accountId);
      expect(before.stdout.split('\n').find((l) => l.startsWith(monitorId))).toMatch(/\(DISABLED\)/);
      // events held meanwhile show; `webhook enable` enables it and says they go first
      await db.webhookEndpoint.update({ where: { monitorId }, data: { heldCount: 4 } });
      expect((await listed()).webhook).toMatchObject({ health: 'disabled', held_events: 4, held_dropped: 0 });
      const listedText = await cli('monitor', 'list', '--account', accountId);
      expect(listedText.stdout.split('\n').find((l) => l.startsWith(monitorId))).toMatch(/\(DISABLED\) {2}held 4/);
      const enabled = await cli('webhook', 'enable', '--monitor', monitorId);
      expect(enabled.stdout).toMatch(/enabled; 4 held events go out first, oldest first/);
      expect(await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId } })).toMatchObject({
        consecutiveFailures: 0,
        disabledAt: null,
        heldCount: 4,
      });
      await db.webhookEndpoint.update({
        where: { monitorId },
        data: { consecutiveFailures: 12, firstFailureAt: since, disabledAt, heldCount: 0 },
      });
      await json('webhook', 'set', '--monitor', monitorId, '--url', 'https://example.com/fixed');
      const hook = await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId } });
      expect(hook).toMatchObject({ consecutiveFailures: 0, firstFailureAt: null, disabledAt: null });
      const text = await cli('monitor', 'list', '--account', accountId);
      expect(text.stdout).not.toMatch(/DISABLED/);
      expect((await listed()).webhook).toMatchObject({
        health: 'ok',
        consecutive_failures: 0,
        failing_since: null,
      });
    });

    it('set refuses a non-HTTPS URL; rotate/test refuse a monitor without webhook or an unknown one', async () => {
      let r = await cli('webhook', 'set', '--monitor', monitorId, '--url', 'ftp://example.com/');
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/--url: webhook URL must use https/);
      const bare = await json('monitor', 'create', '--account', accountId, '--target', 'jack');
      r = await cli('webhook', 'rotate', '--monitor', bare.id as string);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/has no webhook; set one with "webhook set"/);
      r = await cli('webhook', 'test', '--monitor', randomUUID());
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/no monitor with id/);
    });

    it('test: limited per account (WEBHOOK_TEST_MAX_PER_MIN), with a clear message', async () => {
      const redis = createTestRedis();
      const limited = { ...env, WEBHOOK_TEST_MAX_PER_MIN: '1', REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix };
      const run = (...argv: string[]) => runCli(argv, limited, allCommands, { resolveHost });
      try {
        expect((await run('webhook', 'test', '--monitor', monitorId)).code).toBe(0);
        const r = await run('webhook', 'test', '--monitor', monitorId);
        expect(r.code).toBe(1);
        expect(r.stderr).toMatch(/too many test pings and redeliveries for this account; try again in \d+ s/);
      } finally {
        await redis.cleanup();
      }
    });

    it('test: publishes a monitor.test message and prints its id', async () => {
      const out = await json('webhook', 'test', '--monitor', monitorId);
      expect(out.message_id).toEqual(expect.any(String));
      const msg = await waitFor(() => seen.find((e) => e.messageId === out.message_id));
      expect(msg.routingKey).toBe('monitor.test');
      expect(msg.headers).toEqual({ accountId });
      expect(msg.payload).toEqual({
        event: 'monitor.test',
        monitor: { id: monitorId, targetUsername: 'NASA', query: null, keywords: ['launch'] },
        test: true,
      });
    });
  });

  describe('deliveries and redeliver', () => {
    let monitorId: string;
    let hitId: string;
    const ids: string[] = [];
    beforeAll(async () => {
      const out = await json(...monitorCreate('NASA'), '--webhook-url', 'https://example.com/d');
      monitorId = out.id as string;
      hitId = (
        await db.hit.create({
          data: {
            monitorId,
            tweetId: '1790000000000000001',
            tweetText: 'launch',
            tweetAuthorId: '1',
            tweetAuthorUsername: 'NASA',
            tweetCreatedAt: new Date(),
          },
        })
      ).id;
      const base = { monitorId, url: 'https://example.com/d', event: 'monitor.hit' };
      const rows = [
        {
          ...base,
          hitId,
          deliveryId: 'd-1',
          outcome: 'failed' as const,
          statusCode: 500,
          latencyMs: 12,
          error: 'receiver answered HTTP 500',
        },
        {
          ...base,
          hitId,
          deliveryId: 'd-1',
          outcome: 'delivered' as const,
          statusCode: 200,
          latencyMs: 8,
          error: null,
        },
        {
          ...base,
          event: 'monitor.test',
          deliveryId: 'd-2',
          outcome: 'failed' as const,
          statusCode: null,
          latencyMs: 15000,
          error: 'timed out after 15000 ms',
        },
      ];
      for (let i = 0; i < rows.length; i++) {
        const r = await db.deliveryAttempt.create({
          data: { ...rows[i]!, createdAt: new Date(Date.now() - (10 - i) * 1000) },
        });
        ids.push(r.id);
      }
    });

    it('lists the attempts newest first with status, latency, error and outcome', async () => {
      const out = (await json('deliveries', '--monitor', monitorId)) as {
        data: Record<string, unknown>[];
        meta: unknown;
      };
      expect(out.meta).toEqual({ count: 3 });
      expect(out.data.map((d) => d.id)).toEqual([...ids].reverse());
      expect(out.data[0]).toMatchObject({
        event: 'monitor.test',
        delivery_id: 'd-2',
        outcome: 'failed',
        status_code: null,
        latency_ms: 15000,
        error: 'timed out after 15000 ms',
      });
      expect(out.data[2]).toMatchObject({
        status_code: 500,
        latency_ms: 12,
        error: 'receiver answered HTTP 500',
        hit_id: hitId,
      });
      expect(Date.parse(out.data[0]!.created_at as string)).toBeGreaterThan(
        Date.parse(out.data[2]!.created_at as string),
      );
      const limited = (await json('deliveries', '--monitor', monitorId, '--limit', '1')) as { data: unknown[] };
      expect(limited.data).toHaveLength(1);
      const text = await cli('deliveries', '--monitor', monitorId);
      expect(text.stdout.split('\n')[0]).toMatch(/failed .* - .*15000 ms .*monitor\.test .*timed out after 15000 ms/);
      expect((await cli('deliveries', '--monitor', monitorId, '--limit', '0')).code).toBe(2);
    });

    it('shows a retry held while the webhook is disabled as held, its last attempt naming no next time', async () => {
      const held = (await json(...monitorCreate('NASA'), '--webhook-url', 'https://example.com/held')).id as string;
      const endpoint = await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId: held } });
      const base = {
        monitorId: held,
        url: 'https://example.com/held',
        event: 'monitor.hit',
        outcome: 'failed' as const,
      };
      const at = (s: number) => new Date(Date.now() - s * 1000);
      // d-held: attempts 1 and 2 failed, attempt 3 held (the dispatcher cleared attempt 2's next time);
      // d-waiting: attempt 1 failed, its retry due later (not held)
      await db.deliveryAttempt.createMany({
        data: [
          { ...base, deliveryId: 'd-held', attempt: 1, nextAttemptAt: at(50), statusCode: 503, createdAt: at(60) },
          { ...base, deliveryId: 'd-held', attempt: 2, nextAttemptAt: null, statusCode: 503, createdAt: at(40) },
          {
            ...base,
            deliveryId: 'd-waiting',
            attempt: 1,
            nextAttemptAt: new Date(Date.now() + 60_000),
            createdAt: at(30),
          },
        ],
      });
      await db.heldEvent.create({
        data: {
          endpointId: endpoint.id,
          monitorId: held,
          event: 'monitor.hit',
          deliveryId: 'd-held',
          payload: {},
          url: 'https://example.com/held',
          detectedAt: at(70),
          attempt: 3,
        },
      });
      const out = (await json('deliveries', '--monitor', held)) as { data: Record<string, unknown>[] };
      expect(out.data.map((d) => [d.delivery_id, d.attempt, d.held, d.next_attempt_at !== null])).toEqual([
        ['d-waiting', 1, false, true],
        ['d-held', 2, true, false],
        ['d-held', 1, false, true],
      ]);
      const lines = (await cli('deliveries', '--monitor', held)).stdout.split('\n');
      expect(lines[1]).toMatch(/delivery d-held {2}#2 {2}next attempt held until the webhook is enabled/);
      expect(lines.filter((l) => l.includes('held until'))).toHaveLength(1);

      // released (the held event goes out): nothing shows held any more
      await db.heldEvent.deleteMany({ where: { deliveryId: 'd-held' } });
      const released = (await json('deliveries', '--monitor', held)) as { data: Record<string, unknown>[] };
      expect(released.data.map((d) => d.held)).toEqual([false, false, false]);
    });

    it('redeliver publishes webhook.redeliver for the attempt', async () => {
      const out = await json('redeliver', '--attempt', ids[0]!);
      expect(out).toMatchObject({ attempt_id: ids[0], delivery_id: 'd-1' });
      const msg = await waitFor(() => seen.find((e) => e.messageId === out.message_id));
      expect(msg.routingKey).toBe('webhook.redeliver');
      expect(msg.payload).toEqual({ attemptId: ids[0] });
      expect(msg.headers).toEqual({ accountId });
      const r = await cli('redeliver', '--attempt', randomUUID());
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/no delivery attempt with id/);
    });

    it('redeliver --monitor --failed-since queues the failed hit deliveries not delivered since', async () => {
      const since = new Date(Date.now() - 3600_000).toISOString();
      // d-1 failed, then was delivered; d-2 is a test ping: nothing to recover
      expect(await json('redeliver', '--monitor', monitorId, '--failed-since', since)).toEqual({
        monitor_id: monitorId,
        queued: 0,
        remaining: 0,
        delivery_ids: [],
        retry_after: null,
      });
      const first = await db.deliveryAttempt.findFirstOrThrow({ where: { id: ids[0]! } });
      const failed = await db.deliveryAttempt.create({
        data: {
          monitorId,
          hitId: first.hitId,
          event: 'monitor.hit',
          deliveryId: 'd-9',
          url: first.url,
          outcome: 'failed',
        },
      });
      const out = await json('redeliver', '--monitor', monitorId, '--failed-since', since);
      expect(out).toEqual({ monitor_id: monitorId, queued: 1, remaining: 0, delivery_ids: ['d-9'], retry_after: null });
      const msg = await waitFor(() =>
        seen.find(
          (e) => e.routingKey === 'webhook.redeliver' && (e.payload as { attemptId: string }).attemptId === failed.id,
        ),
      );
      expect(msg.headers).toEqual({ accountId });
      const bad = await cli('redeliver', '--monitor', monitorId, '--failed-since', 'yesterday');
      expect(bad.code).toBe(2);
      expect(bad.stderr).toMatch(/--failed-since must be an ISO 8601 time/);
      const future = await cli('redeliver', '--monitor', monitorId, '--failed-since', '2999-01-01T00:00:00Z');
      expect(future.code).toBe(2);
      expect(future.stderr).toMatch(/--failed-since.*is in the future/);
    });

    it('redeliver --monitor --since [--until] [--outcome] queues by window and outcome', async () => {
      const first = await db.deliveryAttempt.findFirstOrThrow({ where: { id: ids[0]! } });
      const at = (agoSec: number) => new Date(Date.now() - agoSec * 1000);
      const attempt = (deliveryId: string, outcome: 'failed' | 'skipped', agoSec: number) =>
        db.deliveryAttempt.create({
          data: {
            monitorId,
            hitId: first.hitId,
            event: 'monitor.hit',
            deliveryId,
            url: first.url,
            outcome,
            createdAt: at(agoSec),
          },
        });
      await attempt('w-skipped', 'skipped', 600);
      await attempt('w-failed', 'failed', 500);
      await attempt('w-late', 'skipped', 10);
      const window = ['--since', at(900).toISOString(), '--until', at(300).toISOString()];
      const skipped = await json('redeliver', '--monitor', monitorId, ...window, '--outcome', 'skipped');
      expect(skipped).toMatchObject({ queued: 1, delivery_ids: ['w-skipped'] });
      // repeated or comma-separated; d-9 (queued above) is still pending
      const both = await json('redeliver', '--monitor', monitorId, ...window, '--outcome', 'failed,exhausted');
      expect(both).toMatchObject({ queued: 1, delivery_ids: ['w-failed'] });
      const text = await cli('redeliver', '--monitor', monitorId, '--since', at(900).toISOString());
      expect(text.stdout).toMatch(/1 delivery \(failed, skipped, exhausted\) since .* queued again/);

      const backwards = await cli(
        'redeliver',
        '--monitor',
        monitorId,
        '--since',
        at(10).toISOString(),
        '--until',
        at(900).toISOString(),
      );
      expect(backwards.code).toBe(2);
      expect(backwards.stderr).toMatch(/--until.*is before since/);
      const unknown = await cli(
        'redeliver',
        '--monitor',
        monitorId,
        '--since',
        at(900).toISOString(),
        '--outcome',
        'delivered',
      );
      expect(unknown.code).toBe(2);
      expect(unknown.stderr).toMatch(/--outcome.*must be one or more of failed, skipped, exhausted/);
      const noSince = await cli('redeliver', '--monitor', monitorId);
      expect([noSince.code, noSince.stderr]).toEqual([2, expect.stringMatching(/--since is required/)]);
    });
  });
});
