/**
 * The dispatcher's decisions and deliveries, driven message by message through handle() against
 * a real PostgreSQL database and a real HTTPS receiver (test CA). The RabbitMQ path (consume,
 * crash, broker restart) is in consumer.test.ts and broker.disruptive.test.ts.
 */
import { randomBytes } from 'node:crypto';
import { createLogger } from '@sts/common';
import { createSecretBox, generateWebhookSecret } from '@sts/core';
import { createDbClient, type Db } from '@sts/db';
import { verify } from '@sts/signing';
import {
  createAccount,
  createHit,
  createMonitor,
  hitEnvelope,
  type HttpsReceiver,
  type MonitorFixture,
  type ReceivedRequest,
  redeliverEnvelope,
  startHttpsReceiver,
  testEnvelope,
} from '@sts/testing';
import { createDispatcher, type Dispatcher } from './app';
import { createPrismaRepository } from './adapters/repository';
import { startInProcessDispatcher, type InProcessDispatcher } from '../test/dispatcher';

const KEY = randomBytes(32).toString('base64');
const box = createSecretBox(KEY);

function verifies(req: ReceivedRequest, secret: string): boolean {
  try {
    verify({ secret, body: req.rawBody, headers: req.headers });
    return true;
  } catch {
    return false;
  }
}

describe('webhook dispatcher', () => {
  let harness: InProcessDispatcher;
  let db: Db;
  let receiver: HttpsReceiver;
  let dispatcher: Dispatcher;
  let logLines: string[];
  let starterId: string;

  beforeAll(async () => {
    harness = await startInProcessDispatcher('dispatcher-test', KEY, {
      timeoutMs: 500,
      maxConcurrencyPerEndpoint: 4,
      captureLogs: true,
      // Discord and Slack URLs really go to the local receiver (the body is still chosen by kind)
      routeToReceiver: ['discord.com', 'hooks.slack.com'],
    });
    ({ db, receiver, dispatcher, logLines } = harness);
    starterId = (await createAccount(db, 'starter')).id;
  });

  afterAll(() => harness.close());

  beforeEach(() => {
    receiver.requests.length = 0;
    receiver.setResponder(() => ({ status: 200, body: '{"received":true}' }));
  });

  async function attempts(monitorId: string) {
    return db.deliveryAttempt.findMany({ where: { monitorId }, orderBy: [{ createdAt: 'asc' }, { id: 'asc' }] });
  }

  async function nativeMonitor(accountId = starterId, extra: Partial<Parameters<typeof createMonitor>[2]> = {}) {
    return createMonitor(db, box, { accountId, url: `${receiver.url}/hooks/native`, keywords: ['launch'], ...extra });
  }

  it('delivers a hit signed over the exact bytes, with the delivery id of the message', async () => {
    const monitor = await nativeMonitor();
    const hit = await createHit(db, monitor);
    const env = hitEnvelope(monitor, hit);
    await expect(dispatcher.handle(env)).resolves.toBe('ack');

    expect(receiver.requests).toHaveLength(1);
    const req = receiver.requests[0]!;
    expect(req.path).toBe('/hooks/native');
    expect(verifies(req, monitor.secret!)).toBe(true);
    expect(verifies(req, generateWebhookSecret())).toBe(false);
    expect(req.headers['content-type']).toBe('application/json');
    expect(req.headers['user-agent']).toBe('Service-Webhook/1.0');
    expect(req.headers['x-service-event']).toBe('monitor.hit');
    expect(req.headers['x-service-delivery']).toBe(env.messageId);
    expect(Math.abs(Number(req.headers['x-service-timestamp']) - Date.now() / 1000)).toBeLessThan(60);
    expect(JSON.parse(req.rawBody.toString('utf8'))).toEqual({
      event: 'monitor.hit',
      monitor: { id: monitor.id, targetUsername: 'NASA', query: null, keywords: ['launch'] },
      tweet: hit.payload.tweet,
      detectedAt: hit.payload.detectedAt,
    });

    const [a] = await attempts(monitor.id);
    expect(a).toMatchObject({
      hitId: hit.id,
      event: 'monitor.hit',
      deliveryId: env.messageId,
      outcome: 'delivered',
      statusCode: 200,
      error: null,
      responseSnippet: '{"received":true}',
      url: `${receiver.url}/hooks/native`,
    });
    expect(a!.latencyMs).toEqual(expect.any(Number));
    // the secret never reaches the log
    expect(logLines.join('\n')).not.toContain(monitor.secret!);
  });

  it('redelivers a logged hit with the same delivery id and a fresh signature, as a new attempt', async () => {
    const monitor = await nativeMonitor();
    const hit = await createHit(db, monitor);
    const env = hitEnvelope(monitor, hit);
    receiver.setResponder(() => ({ status: 503, body: 'down for maintenance' }));
    await dispatcher.handle(env);
    const [failed] = await attempts(monitor.id);
    expect(failed).toMatchObject({ outcome: 'failed', statusCode: 503, error: 'receiver answered HTTP 503' });

    // Recover marked the redelivery pending; recording its attempt ends the mark
    await db.pendingRedelivery.create({
      data: { deliveryId: env.messageId, accountId: monitor.accountId, monitorId: monitor.id },
    });
    receiver.setResponder(() => ({ status: 204 }));
    await expect(dispatcher.handle(redeliverEnvelope(monitor.accountId, failed!.id))).resolves.toBe('ack');
    expect(receiver.requests).toHaveLength(2);
    expect(await db.pendingRedelivery.count({ where: { deliveryId: env.messageId } })).toBe(0);
    const [first, again] = receiver.requests as [ReceivedRequest, ReceivedRequest];
    expect(again.headers['x-service-delivery']).toBe(env.messageId);
    expect(first.headers['x-service-delivery']).toBe(env.messageId);
    expect(verifies(again, monitor.secret!)).toBe(true);
    expect(JSON.parse(again.rawBody.toString())).toEqual(JSON.parse(first.rawBody.toString()));
    const rows = await attempts(monitor.id);
    expect(rows.map((r) => [r.outcome, r.statusCode, r.deliveryId, r.hitId])).toEqual([
      ['failed', 503, env.messageId, hit.id],
      ['delivered', 204, env.messageId, hit.id],
    ]);
  });

  it('signs with the current secret after a rotation', async () => {
    const monitor = await nativeMonitor();
    await dispatcher.handle(hitEnvelope(monitor, await createHit(db, monitor)));
    const fresh = generateWebhookSecret();
    await db.webhookEndpoint.update({
      where: { monitorId: monitor.id },
      data: { secretCiphertext: box.encrypt(fresh, monitor.id), secretRotatedAt: new Date() },
    });
    await dispatcher.handle(hitEnvelope(monitor, await createHit(db, monitor)));
    const [before, after] = receiver.requests as [ReceivedRequest, ReceivedRequest];
    expect(verifies(before, monitor.secret!)).toBe(true);
    expect(verifies(after, fresh)).toBe(true);
    expect(verifies(after, monitor.secret!)).toBe(false);
  });

  describe('plans', () => {
    it('Free: the test ping goes out, the live hit is skipped and logged', async () => {
      const free = await createAccount(db, 'free');
      const monitor = await nativeMonitor(free.id);
      const ping = testEnvelope(monitor);
      await expect(dispatcher.handle(ping)).resolves.toBe('ack');
      const hit = await createHit(db, monitor);
      const live = hitEnvelope(monitor, hit);
      await expect(dispatcher.handle(live)).resolves.toBe('ack');

      expect(receiver.requests).toHaveLength(1);
      const req = receiver.requests[0]!;
      expect(req.headers['x-service-event']).toBe('monitor.test');
      expect(req.headers['x-service-delivery']).toBe(ping.messageId);
      expect(verifies(req, monitor.secret!)).toBe(true);
      expect(JSON.parse(req.rawBody.toString())).toEqual({
        event: 'monitor.test',
        monitor: { id: monitor.id, targetUsername: 'NASA', query: null, keywords: ['launch'] },
        test: true,
      });
      const rows = await attempts(monitor.id);
      expect(rows.map((r) => [r.event, r.outcome])).toEqual([
        ['monitor.test', 'delivered'],
        ['monitor.hit', 'skipped'],
      ]);
      expect(rows[1]).toMatchObject({ hitId: hit.id, deliveryId: live.messageId, statusCode: null, latencyMs: null });
      expect(rows[1]!.error).toMatch(/live webhooks need the Starter plan/);
      expect(logLines.some((l) => l.includes('webhook skipped') && l.includes(live.messageId))).toBe(true);
    });

    it('a redelivery on Free is skipped too', async () => {
      const free = await createAccount(db, 'free');
      const monitor = await nativeMonitor(free.id);
      await dispatcher.handle(hitEnvelope(monitor, await createHit(db, monitor)));
      const [skipped] = await attempts(monitor.id);
      await dispatcher.handle(redeliverEnvelope(free.id, skipped!.id));
      expect(receiver.requests).toHaveLength(0);
      expect((await attempts(monitor.id)).map((r) => r.outcome)).toEqual(['skipped', 'skipped']);
    });

    it('an active trial gets live hits, an expired one does not', async () => {
      const trial = await createAccount(db, 'free', new Date(Date.now() + 7 * 86_400_000));
      const expired = await createAccount(db, 'free', new Date(Date.now() - 86_400_000));
      const m1 = await nativeMonitor(trial.id);
      const m2 = await nativeMonitor(expired.id);
      await dispatcher.handle(hitEnvelope(m1, await createHit(db, m1)));
      await dispatcher.handle(hitEnvelope(m2, await createHit(db, m2)));
      expect(receiver.requests).toHaveLength(1);
      expect(verifies(receiver.requests[0]!, m1.secret!)).toBe(true);
      expect((await attempts(m1.id))[0]!.outcome).toBe('delivered');
      expect((await attempts(m2.id))[0]!.outcome).toBe('skipped');
    });
  });

  describe('failures are logged with status, latency and error', () => {
    it('receiver answers 500', async () => {
      const monitor = await nativeMonitor();
      receiver.setResponder(() => ({ status: 500, body: '{"error":"internal"}' }));
      await expect(dispatcher.handle(hitEnvelope(monitor, await createHit(db, monitor)))).resolves.toBe('ack');
      const [a] = await attempts(monitor.id);
      expect(a).toMatchObject({
        outcome: 'failed',
        statusCode: 500,
        error: 'receiver answered HTTP 500',
        responseSnippet: '{"error":"internal"}',
      });
      expect(a!.latencyMs).toBeGreaterThanOrEqual(0);
    });

    it('receiver too slow (time limit 500 ms in this test)', async () => {
      const monitor = await nativeMonitor();
      receiver.setResponder(() => ({ status: 200, delayMs: 2000 }));
      await dispatcher.handle(hitEnvelope(monitor, await createHit(db, monitor)));
      const [a] = await attempts(monitor.id);
      expect(a).toMatchObject({ outcome: 'failed', statusCode: null, error: 'timed out after 500 ms' });
      expect(a!.latencyMs).toBeGreaterThanOrEqual(490);
    });

    it('connection refused', async () => {
      const closed = await startHttpsReceiver();
      const url = `${closed.url}/gone`;
      await closed.close();
      const monitor = await createMonitor(db, box, { accountId: starterId, url });
      await dispatcher.handle(hitEnvelope(monitor, await createHit(db, monitor)));
      const [a] = await attempts(monitor.id);
      expect(a).toMatchObject({ outcome: 'failed', statusCode: null });
      expect(a!.error).toMatch(/^connection refused/);
      expect(a!.latencyMs).toEqual(expect.any(Number));
    });

    it('redirects are not followed', async () => {
      const monitor = await nativeMonitor();
      receiver.setResponder((req) =>
        req.path === '/hooks/native' ? { status: 301, headers: { location: `${receiver.url}/moved` } } : {},
      );
      await dispatcher.handle(hitEnvelope(monitor, await createHit(db, monitor)));
      expect(receiver.requests.map((r) => r.path)).toEqual(['/hooks/native']);
      const [a] = await attempts(monitor.id);
      expect(a).toMatchObject({ outcome: 'failed', statusCode: 301 });
      expect(a!.error).toMatch(/redirects are not followed/);
    });

    it('a private address is refused without connecting', async () => {
      const monitor = await createMonitor(db, box, {
        accountId: starterId,
        url: `https://127.0.0.1:${receiver.port}/hooks/native`,
      });
      const meta = await createMonitor(db, box, { accountId: starterId, url: 'https://169.254.169.254/latest' });
      await dispatcher.handle(hitEnvelope(monitor, await createHit(db, monitor)));
      await dispatcher.handle(testEnvelope(meta));
      expect(receiver.requests).toHaveLength(0);
      expect((await attempts(monitor.id))[0]!.error).toMatch(/refused to connect to 127\.0\.0\.1: .*loopback/);
      expect((await attempts(meta.id))[0]!.error).toMatch(/refused to connect to 169\.254\.169\.254: .*link-local/);
    });
  });

  describe('skipped deliveries', () => {
    it('monitor without webhook, inactive monitor', async () => {
      const bare = await createMonitor(db, box, { accountId: starterId });
      const inactive = await nativeMonitor(starterId, { isActive: false });
      await dispatcher.handle(hitEnvelope(bare, await createHit(db, bare)));
      await dispatcher.handle(hitEnvelope(inactive, await createHit(db, inactive)));
      await dispatcher.handle(testEnvelope(inactive));
      expect(receiver.requests).toHaveLength(0);
      expect((await attempts(bare.id)).map((r) => [r.outcome, r.error, r.url])).toEqual([
        ['skipped', 'monitor has no webhook', ''],
      ]);
      expect((await attempts(inactive.id)).map((r) => [r.event, r.outcome, r.error])).toEqual([
        ['monitor.hit', 'skipped', 'monitor is inactive'],
        ['monitor.test', 'skipped', 'monitor is inactive'],
      ]);
    });
  });

  describe('Discord and Slack', () => {
    it('Discord gets an embed that mentions nobody; 404 marks the endpoint broken; a test ping that works clears it', async () => {
      const url = 'https://discord.com/api/webhooks/123456789/Secret-Token_abc';
      const monitor = await createMonitor(db, box, { accountId: starterId, url });
      const hit = await createHit(db, monitor, 'Launch @everyone <@123> **now**');
      await dispatcher.handle(hitEnvelope(monitor, hit));
      const req = receiver.requests[0]!;
      expect(req.path).toBe('/api/webhooks/123456789/Secret-Token_abc');
      expect(verifies(req, monitor.secret!)).toBe(true);
      const body = JSON.parse(req.rawBody.toString()) as {
        allowed_mentions: unknown;
        embeds: { description: string; url: string; author: { name: string }; timestamp: string }[];
      };
      expect(body.allowed_mentions).toEqual({ parse: [] });
      expect(body.embeds).toHaveLength(1);
      expect(body.embeds[0]).toMatchObject({
        url: `https://x.com/NASA/status/${hit.payload.tweet.id}`,
        author: { name: '@NASA' },
        timestamp: hit.payload.tweet.createdAt,
      });
      expect(body.embeds[0]!.description).toContain('Launch @everyone');
      // the token is a credential: not in the attempt log
      const [a] = await attempts(monitor.id);
      expect(a!.url).toBe('https://discord.com/api/webhooks/123456789/[REDACTED]');
      expect(logLines.join('\n')).not.toContain('Secret-Token_abc');

      receiver.setResponder(() => ({ status: 404, body: '{"message": "Unknown Webhook", "code": 10015}' }));
      await dispatcher.handle(hitEnvelope(monitor, await createHit(db, monitor)));
      let endpoint = await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId: monitor.id } });
      expect(endpoint.isBroken).toBe(true);
      expect(endpoint.brokenReason).toMatch(/Discord answered HTTP 404/);

      // live hits are no longer sent to a broken endpoint
      const before = receiver.requests.length;
      await dispatcher.handle(hitEnvelope(monitor, await createHit(db, monitor)));
      expect(receiver.requests).toHaveLength(before);
      expect((await attempts(monitor.id)).at(-1)).toMatchObject({ outcome: 'skipped' });
      expect((await attempts(monitor.id)).at(-1)!.error).toMatch(/marked broken/);

      // the user fixes it and sends a test ping: it goes out, and a 2xx clears the flag
      receiver.setResponder(() => ({ status: 204 }));
      await dispatcher.handle(testEnvelope(monitor));
      expect(receiver.requests).toHaveLength(before + 1);
      endpoint = await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId: monitor.id } });
      expect(endpoint).toMatchObject({ isBroken: false, brokenReason: null });
    });

    it('Slack gets text plus blocks with &, <, > escaped; 410 marks the endpoint broken', async () => {
      const url = 'https://hooks.slack.com/services/T000AAAA/B000BBBB/xoxSecretPart';
      const monitor = await createMonitor(db, box, { accountId: starterId, url, keywords: ['launch'] });
      const hit = await createHit(db, monitor, 'launch <!channel> & <https://evil.example|click>');
      await dispatcher.handle(hitEnvelope(monitor, hit));
      const req = receiver.requests[0]!;
      expect(req.path).toBe('/services/T000AAAA/B000BBBB/xoxSecretPart');
      const body = JSON.parse(req.rawBody.toString()) as {
        text: string;
        blocks: { type: string; text?: { type: string; text: string }; elements?: { text: string }[] }[];
      };
      expect(body.text).toContain('&lt;!channel&gt; &amp; &lt;https://evil.example|click&gt;');
      expect(body.blocks.map((b) => b.type)).toEqual(['section', 'context']);
      expect(body.blocks[0]!.text).toMatchObject({ type: 'mrkdwn' });
      expect(body.blocks[0]!.text!.text).toContain(
        `<https://x.com/NASA/status/${hit.payload.tweet.id}|New post by @NASA>`,
      );
      expect(body.blocks[0]!.text!.text).not.toContain('<!channel>');
      expect(body.blocks[1]!.elements![0]!.text).toContain('keywords: launch');
      expect((await attempts(monitor.id))[0]!.url).toBe(
        'https://hooks.slack.com/services/T000AAAA/B000BBBB/[REDACTED]',
      );

      receiver.setResponder(() => ({ status: 410, body: 'no_service' }));
      await dispatcher.handle(testEnvelope(monitor));
      const endpoint = await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId: monitor.id } });
      expect(endpoint.isBroken).toBe(true);
      expect(endpoint.brokenReason).toMatch(/Slack answered HTTP 410/);
    });

    it('a 2xx answer longer than the 64 KiB read limit is delivered; a long Discord 404 still marks it broken', async () => {
      const monitor = await nativeMonitor();
      receiver.setResponder(() => ({ status: 200, body: 'a'.repeat(70_000) }));
      await dispatcher.handle(hitEnvelope(monitor, await createHit(db, monitor)));
      const [a] = await attempts(monitor.id);
      expect(a).toMatchObject({ outcome: 'delivered', statusCode: 200, error: null, responseSnippet: 'a'.repeat(512) });
      expect(a!.latencyMs).toEqual(expect.any(Number));

      const discord = await createMonitor(db, box, {
        accountId: starterId,
        url: 'https://discord.com/api/webhooks/70000/Long-Answer',
      });
      receiver.setResponder(() => ({
        status: 404,
        body: `{"message":"Unknown Webhook","pad":"${'p'.repeat(70_000)}"}`,
      }));
      await dispatcher.handle(testEnvelope(discord));
      const [d] = await attempts(discord.id);
      expect(d).toMatchObject({ outcome: 'failed', statusCode: 404, error: 'receiver answered HTTP 404' });
      expect(d!.responseSnippet).toMatch(/^\{"message":"Unknown Webhook"/);
      const endpoint = await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId: discord.id } });
      expect(endpoint).toMatchObject({ isBroken: true });
      expect(endpoint.brokenReason).toMatch(/Discord answered HTTP 404/);
    });

    it('Discord 401 and Slack 403 (revoked or invalid token) mark the endpoint broken', async () => {
      const discord = await createMonitor(db, box, {
        accountId: starterId,
        url: 'https://discord.com/api/webhooks/401401/Revoked',
      });
      const slack = await createMonitor(db, box, {
        accountId: starterId,
        url: 'https://hooks.slack.com/services/T0/B0/revoked',
      });
      receiver.setResponder((req) =>
        req.path.startsWith('/api/webhooks')
          ? { status: 401, body: '{"message": "Invalid Webhook Token", "code": 50027}' }
          : { status: 403, body: 'invalid_token' },
      );
      await dispatcher.handle(hitEnvelope(discord, await createHit(db, discord)));
      await dispatcher.handle(testEnvelope(slack));
      const d = await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId: discord.id } });
      const s = await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId: slack.id } });
      expect(d.isBroken).toBe(true);
      expect(d.brokenReason).toBe('Discord answered HTTP 401: the webhook token was revoked or is not valid');
      expect(s.isBroken).toBe(true);
      expect(s.brokenReason).toBe('Slack answered HTTP 403: the webhook token was revoked or is not valid');
      // the next live hit is skipped, not sent
      const before = receiver.requests.length;
      await dispatcher.handle(hitEnvelope(discord, await createHit(db, discord)));
      expect(receiver.requests).toHaveLength(before);
      expect((await attempts(discord.id)).map((r) => r.outcome)).toEqual(['failed', 'skipped']);
    });

    it('a native endpoint answering 404 is not marked broken', async () => {
      const monitor = await nativeMonitor();
      receiver.setResponder(() => ({ status: 404 }));
      await dispatcher.handle(hitEnvelope(monitor, await createHit(db, monitor)));
      const endpoint = await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId: monitor.id } });
      expect(endpoint.isBroken).toBe(false);
    });
  });

  describe('messages', () => {
    let monitor: MonitorFixture;
    beforeAll(async () => {
      monitor = await nativeMonitor();
    });

    it('dead-letters a message whose account does not own the monitor', async () => {
      const other = await createAccount(db, 'starter');
      const env = hitEnvelope(monitor, await createHit(db, monitor));
      env.headers.accountId = other.id;
      await expect(dispatcher.handle(env)).resolves.toBe('dead-letter');
      expect(receiver.requests).toHaveLength(0);
    });

    it('dead-letters a message that names no account (empty x-account-id): a hit, a test ping', async () => {
      const hitEnv = hitEnvelope(monitor, await createHit(db, monitor));
      hitEnv.headers.accountId = '';
      await expect(dispatcher.handle(hitEnv)).resolves.toBe('dead-letter');
      await expect(dispatcher.handle({ ...testEnvelope(monitor), headers: { accountId: '' } })).resolves.toBe(
        'dead-letter',
      );
      expect(receiver.requests).toHaveLength(0);
    });

    it('dead-letters a message without a valid monitor id, and an unknown routing key', async () => {
      const env = hitEnvelope(monitor, await createHit(db, monitor));
      (env.payload as { monitor: { id: string } }).monitor.id = 'not-a-uuid';
      await expect(dispatcher.handle(env)).resolves.toBe('dead-letter');
      await expect(dispatcher.handle({ ...env, routingKey: 'monitor.other' as 'monitor.hit' })).resolves.toBe(
        'dead-letter',
      );
      await expect(dispatcher.handle(redeliverEnvelope(monitor.accountId, 'nope'))).resolves.toBe('dead-letter');
    });

    it('acknowledges a hit of a deleted monitor without sending', async () => {
      const gone = await nativeMonitor();
      const env = hitEnvelope(gone, await createHit(db, gone));
      await db.monitor.delete({ where: { id: gone.id } });
      await expect(dispatcher.handle(env)).resolves.toBe('ack');
      expect(receiver.requests).toHaveLength(0);
    });

    it('does not send again when the broker redelivers a message whose attempt is logged', async () => {
      const env = hitEnvelope(monitor, await createHit(db, monitor));
      await dispatcher.handle(env);
      await expect(dispatcher.handle({ ...env, redelivered: true })).resolves.toBe('ack');
      // a failed attempt is not retried automatically either
      receiver.setResponder(() => ({ status: 500 }));
      const failed = hitEnvelope(monitor, await createHit(db, monitor));
      await dispatcher.handle(failed);
      receiver.setResponder(() => ({ status: 200 }));
      await expect(dispatcher.handle({ ...failed, redelivered: true })).resolves.toBe('ack');
      expect(receiver.requests.map((r) => r.headers['x-service-delivery'])).toEqual([env.messageId, failed.messageId]);
      expect(await db.deliveryAttempt.count({ where: { deliveryId: { in: [env.messageId, failed.messageId] } } })).toBe(
        2,
      );
      // a redelivered message with no logged attempt is sent
      const fresh = hitEnvelope(monitor, await createHit(db, monitor), undefined, true);
      await dispatcher.handle(fresh);
      expect(receiver.requests.at(-1)!.headers['x-service-delivery']).toBe(fresh.messageId);
    });

    it('throws (so the message comes back) when the attempt cannot be written', async () => {
      // a real database failure: a trigger refuses inserts into the delivery log
      await db.$executeRawUnsafe(`CREATE FUNCTION refuse_attempt() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'delivery log unavailable'; END $$`);
      await db.$executeRawUnsafe(
        'CREATE TRIGGER refuse_attempt BEFORE INSERT ON delivery_attempts FOR EACH ROW EXECUTE FUNCTION refuse_attempt()',
      );
      try {
        const env = hitEnvelope(monitor, await createHit(db, monitor));
        await expect(dispatcher.handle(env)).rejects.toThrow(/delivery log unavailable/);
        expect(receiver.requests).toHaveLength(1); // sent, but not logged: it will be sent again
        await db.$executeRawUnsafe('DROP TRIGGER refuse_attempt ON delivery_attempts');
        await expect(dispatcher.handle({ ...env, redelivered: true })).resolves.toBe('ack');
        expect(receiver.requests).toHaveLength(2);
        expect(await db.deliveryAttempt.count({ where: { deliveryId: env.messageId } })).toBe(1);
      } finally {
        await db.$executeRawUnsafe('DROP TRIGGER IF EXISTS refuse_attempt ON delivery_attempts');
      }
    });

    it('attempt writes are batched: each message is acked only once its own row is committed, a refused row fails only its message', async () => {
      const envs = [];
      for (let i = 0; i < 12; i++) envs.push(hitEnvelope(monitor, await createHit(db, monitor)));
      const refused = envs[5]!;
      await db.$executeRawUnsafe(`CREATE FUNCTION refuse_one() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN IF NEW.delivery_id = '${refused.messageId}' THEN RAISE EXCEPTION 'this attempt is refused'; END IF;
        RETURN NEW; END $$`);
      await db.$executeRawUnsafe(
        'CREATE TRIGGER refuse_one BEFORE INSERT ON delivery_attempts FOR EACH ROW EXECUTE FUNCTION refuse_one()',
      );
      try {
        // the moment a message's outcome is 'ack', its attempt row is visible to another connection
        const outcomes = await Promise.allSettled(
          envs.map(async (env) => {
            const outcome = await dispatcher.handle(env);
            const logged = await db.deliveryAttempt.count({ where: { deliveryId: env.messageId } });
            return { outcome, logged };
          }),
        );
        outcomes.forEach((o, i) => {
          if (i === 5) {
            expect(o.status).toBe('rejected'); // not acked: the consumer requeues it
            expect(String((o as PromiseRejectedResult).reason)).toMatch(/this attempt is refused/);
          } else {
            expect(o).toEqual({ status: 'fulfilled', value: { outcome: 'ack', logged: 1 } });
          }
        });
        expect(await db.deliveryAttempt.count({ where: { deliveryId: refused.messageId } })).toBe(0);
      } finally {
        await db.$executeRawUnsafe('DROP TRIGGER IF EXISTS refuse_one ON delivery_attempts');
        await db.$executeRawUnsafe('DROP FUNCTION IF EXISTS refuse_one()');
      }
      // the broker's redelivery of the refused message is sent again and logged once
      await expect(dispatcher.handle({ ...refused, redelivered: true })).resolves.toBe('ack');
      expect(await db.deliveryAttempt.count({ where: { deliveryId: refused.messageId } })).toBe(1);
    });

    it('hands the message back when the database is unreachable', async () => {
      const down = createDbClient({ url: 'postgresql://postgres@127.0.0.1:1/nothing_here', poolSize: 1 });
      const offline = createDispatcher({
        repository: createPrismaRepository(down),
        logger: createLogger({ service: 'dispatcher-test', level: 'error' }),
        secretsKey: KEY,
        allowPrivateHosts: ['localhost'],
        transientRetryDelayMs: 10,
      });
      try {
        await expect(offline.handle(hitEnvelope(monitor, await createHit(db, monitor)))).resolves.toBe('requeue');
        expect(receiver.requests).toHaveLength(0);
      } finally {
        offline.close();
        await down.$disconnect();
      }
    });

    it('handles many hits at once and logs one attempt each', async () => {
      const monitors = await Promise.all(Array.from({ length: 5 }, () => nativeMonitor()));
      const envs = [];
      for (const m of monitors) for (let i = 0; i < 20; i++) envs.push(hitEnvelope(m, await createHit(db, m)));
      const outcomes = await Promise.all(envs.map((e) => dispatcher.handle(e)));
      expect(outcomes.every((o) => o === 'ack')).toBe(true);
      expect(new Set(receiver.requests.map((r) => r.headers['x-service-delivery']))).toEqual(
        new Set(envs.map((e) => e.messageId)),
      );
      const rows = await db.deliveryAttempt.findMany({ where: { deliveryId: { in: envs.map((e) => e.messageId) } } });
      expect(rows).toHaveLength(100);
      expect(rows.every((r) => r.outcome === 'delivered')).toBe(true);
    });
  });
});
