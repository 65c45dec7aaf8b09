/**
 * Endpoint health, driven message by message through handle() against a real
 * PostgreSQL database and a real HTTPS receiver: 5 failures in a row → failing (one
 * `account.webhook.failing` event), 3 days of only failures → disabled (live hits held, not sent), a successful test webhook re-enables, a success resets the count.
 */
import { randomBytes } from 'node:crypto';
import { createSecretBox } from '@sts/core';
import type { Db } from '@sts/db';
import { accountEventKey, AmqpClient, parsePayload, type Envelope } from '@sts/messaging';
import {
  capturingLogger,
  createTestVhost,
  waitFor,
  createAccount,
  createHit,
  createMonitor,
  hitEnvelope,
  type HttpsReceiver,
  testEnvelope,
} from '@sts/testing';
import type { Dispatcher } from './app';
import { startInProcessDispatcher, type InProcessDispatcher } from '../test/dispatcher';
// the dashboard's relay publishes what the dispatcher writes to account_events
import { relayAccountEvents } from '../../dashboard/src/mail/accountEvents';

const KEY = randomBytes(32).toString('base64');
const box = createSecretBox(KEY);
const DAY = 86_400_000;

describe('endpoint health', () => {
  let harness: InProcessDispatcher;
  let db: Db;
  let receiver: HttpsReceiver;
  let dispatcher: Dispatcher;
  let logLines: string[];
  let accountId: string;

  beforeAll(async () => {
    harness = await startInProcessDispatcher('dispatcher-test', KEY, {
      maxConcurrencyPerEndpoint: 8,
      captureLogs: true,
      routeToReceiver: ['discord.com'],
    });
    ({ db, receiver, dispatcher, logLines } = harness);
    accountId = (await createAccount(db, 'starter')).id;
  });

  afterAll(() => harness.close());

  beforeEach(() => {
    receiver.requests.length = 0;
  });

  const failWith500 = () => receiver.setResponder(() => ({ status: 500, body: 'oops' }));
  const answer200 = () => receiver.setResponder(() => ({ status: 200, body: '{}' }));
  const monitor = () => createMonitor(db, box, { accountId, url: `${receiver.url}/hooks/health`, keywords: [] });
  const endpoint = (monitorId: string) => db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId } });
  const events = (monitorId: string) =>
    db.accountEvent.findMany({
      where: { routingKey: 'account.webhook.failing', payload: { path: ['monitorId'], equals: monitorId } },
      orderBy: { createdAt: 'asc' },
    });

  async function sendHits(m: Awaited<ReturnType<typeof monitor>>, n: number): Promise<void> {
    for (let i = 0; i < n; i++) {
      await expect(dispatcher.handle(hitEnvelope(m, await createHit(db, m)))).resolves.toBe('ack');
    }
  }

  it('5 failures in a row → failing, the event written once; a success resets the count', async () => {
    const m = await monitor();
    failWith500();
    await sendHits(m, 4);
    expect(await endpoint(m.id)).toMatchObject({ consecutiveFailures: 4, disabledAt: null });
    expect(await events(m.id)).toHaveLength(0);

    const before = Date.now();
    await sendHits(m, 1);
    const e = await endpoint(m.id);
    expect(e.consecutiveFailures).toBe(5);
    expect(e.firstFailureAt!.getTime()).toBeLessThanOrEqual(before);
    const rows = await events(m.id);
    expect(rows).toHaveLength(1);
    const payload = parsePayload('account.webhook.failing', rows[0]!.payload);
    expect(payload).toMatchObject({ accountId, monitorId: m.id, state: 'failing', consecutiveFailures: 5 });
    expect(rows[0]!.dedupKey).toBe(accountEventKey('account.webhook.failing', payload));
    expect(rows[0]!.accountId).toBe(accountId);
    expect(logLines.some((l) => l.includes('webhook endpoint failing') && l.includes(m.id))).toBe(true);

    // still failing: still sent (not disabled), counted, no second event
    await sendHits(m, 2);
    expect(receiver.requests).toHaveLength(7);
    expect((await endpoint(m.id)).consecutiveFailures).toBe(7);
    expect(await events(m.id)).toHaveLength(1);

    answer200();
    await sendHits(m, 1);
    expect(await endpoint(m.id)).toMatchObject({ consecutiveFailures: 0, firstFailureAt: null, disabledAt: null });
    // the account is told it recovered (a notice, like failing), once
    const told = (await events(m.id)).map((r) => parsePayload('account.webhook.failing', r.payload));
    expect(told.map((p) => [p.state, p.consecutiveFailures])).toEqual([
      ['failing', 5],
      ['recovered', 0],
    ]);
    failWith500();
    await sendHits(m, 1);
    expect((await endpoint(m.id)).consecutiveFailures).toBe(1);
    answer200();
    await sendHits(m, 1); // a success after fewer than 5 failures: nothing recovered
    expect(await events(m.id)).toHaveLength(2);
  });

  it('counts failures that finish together (one batched statement) exactly', async () => {
    const m = await monitor();
    failWith500();
    const hits = await Promise.all(Array.from({ length: 12 }, () => createHit(db, m)));
    await Promise.all(hits.map((h) => dispatcher.handle(hitEnvelope(m, h))));
    expect(receiver.requests).toHaveLength(12);
    expect((await endpoint(m.id)).consecutiveFailures).toBe(12);
    expect(await events(m.id)).toHaveLength(1);
  });

  it('3 days of only failures → disabled: a new hit is recorded and held, not sent; a successful test webhook re-enables', async () => {
    const m = await monitor();
    failWith500();
    await sendHits(m, 5);
    const started = new Date(Date.now() - 3 * DAY - 60_000);
    await db.webhookEndpoint.update({ where: { monitorId: m.id }, data: { firstFailureAt: started } });
    await sendHits(m, 1);
    const e = await endpoint(m.id);
    expect(e.disabledAt).not.toBeNull();
    expect(e.consecutiveFailures).toBe(6);
    expect(e.firstFailureAt).toEqual(started);
    const states = (await events(m.id)).map((r) => parsePayload('account.webhook.failing', r.payload));
    expect(states.map((p) => [p.state, p.consecutiveFailures])).toEqual([
      ['failing', 5],
      ['disabled', 6],
    ]);

    // the receiver works again, but live hits stay off until a test webhook succeeds: they are
    // held (hold.test.ts), not sent and not logged as skipped
    answer200();
    receiver.requests.length = 0;
    const hit = await createHit(db, m);
    const live = hitEnvelope(m, hit);
    await expect(dispatcher.handle(live)).resolves.toBe('ack');
    expect(receiver.requests).toHaveLength(0);
    expect(await db.hit.count({ where: { id: hit.id } })).toBe(1);
    expect(await db.deliveryAttempt.count({ where: { deliveryId: live.messageId } })).toBe(0);
    expect(await db.heldEvent.count({ where: { deliveryId: live.messageId } })).toBe(1);
    expect((await endpoint(m.id)).consecutiveFailures).toBe(6); // a held event is no failure

    // a failing test webhook keeps it disabled
    failWith500();
    await dispatcher.handle(testEnvelope(m));
    expect(receiver.requests).toHaveLength(1);
    expect((await endpoint(m.id)).disabledAt).not.toBeNull();

    answer200();
    await dispatcher.handle(testEnvelope(m));
    expect(await endpoint(m.id)).toMatchObject({ consecutiveFailures: 0, firstFailureAt: null, disabledAt: null });
    expect(logLines.some((l) => l.includes('re-enabled') && l.includes(m.id))).toBe(true);
    const after = (await events(m.id)).map((r) => parsePayload('account.webhook.failing', r.payload).state);
    expect(after).toEqual(['failing', 'disabled', 'recovered']);
    // the held hit goes first, then the new one
    await dispatcher.releaseHeld();
    expect(receiver.requests.filter((r) => r.headers['x-service-delivery'] === live.messageId)).toHaveLength(1);
    receiver.requests.length = 0;
    await sendHits(m, 1);
    expect(receiver.requests).toHaveLength(1);
  });

  it('a failing streak shorter than 5 is not disabled however old', async () => {
    const m = await monitor();
    failWith500();
    await sendHits(m, 1);
    await db.webhookEndpoint.update({
      where: { monitorId: m.id },
      data: { firstFailureAt: new Date(Date.now() - 10 * DAY) },
    });
    await sendHits(m, 2);
    expect(await endpoint(m.id)).toMatchObject({ consecutiveFailures: 3, disabledAt: null });
    expect(await events(m.id)).toHaveLength(0);
  });

  it('a Discord 401 marks broken and writes the broken event once', async () => {
    const m = await createMonitor(db, box, {
      accountId,
      url: 'https://discord.com/api/webhooks/1/Revoked',
      keywords: [],
    });
    receiver.setResponder(() => ({ status: 401, body: '{"message": "Invalid Webhook Token", "code": 50027}' }));
    await dispatcher.handle(hitEnvelope(m, await createHit(db, m)));
    await dispatcher.handle(testEnvelope(m));
    expect((await endpoint(m.id)).isBroken).toBe(true);
    const rows = await events(m.id);
    expect(rows).toHaveLength(1);
    const payload = parsePayload('account.webhook.failing', rows[0]!.payload);
    expect(payload).toMatchObject({ accountId, monitorId: m.id, state: 'broken' });
    expect(rows[0]!.dedupKey).toBe(accountEventKey('account.webhook.failing', payload));

    // fixed: a successful test ping clears it and the account is told it recovered
    receiver.setResponder(() => ({ status: 204 }));
    await dispatcher.handle(testEnvelope(m));
    expect((await endpoint(m.id)).isBroken).toBe(false);
    const states = (await events(m.id)).map((r) => parsePayload('account.webhook.failing', r.payload).state);
    expect(states).toEqual(['broken', 'recovered']);
  });

  it('the failing event reaches RabbitMQ once through the relay (real broker)', async () => {
    const vhost = await createTestVhost();
    const amqp = new AmqpClient({ url: vhost.url, logger: capturingLogger().logger, name: 'health-test' });
    await amqp.start();
    const got: Envelope<'account.webhook.failing'>[] = [];
    try {
      await amqp.consume({
        queue: 'health-test.account-events',
        bindings: ['account.webhook.failing'],
        prefetch: 10,
        handler: (env) => {
          got.push(env);
          return Promise.resolve('ack' as const);
        },
      });
      const m = await monitor();
      failWith500();
      await sendHits(m, 7);
      const logger = capturingLogger().logger;
      await relayAccountEvents(db, amqp, logger);
      await relayAccountEvents(db, amqp, logger); // nothing left: each row goes out once
      const mine = () => got.filter((e) => e.payload.monitorId === m.id);
      await waitFor(() => mine().length >= 1, 10_000);
      await new Promise((r) => setTimeout(r, 300));
      expect(mine()).toHaveLength(1);
      const [env] = mine();
      expect(env!.payload).toMatchObject({ accountId, monitorId: m.id, state: 'failing', consecutiveFailures: 5 });
      expect(env!.messageId).toBe(accountEventKey('account.webhook.failing', env!.payload));
      expect(env!.headers).toMatchObject({ accountId });
    } finally {
      await amqp.stop();
    }
  });
});
