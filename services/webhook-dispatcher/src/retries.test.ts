/**
 * The retry schedule (`retry_policy`) and ordered delivery (`ordering`) of a webhook, driven
 * through handle() and deliverDue() against a real PostgreSQL database and HTTPS receiver. Time
 * is not waited out: a test moves a due row's `due_at` to now, as the clock would.
 */
import { randomBytes } from 'node:crypto';
import { createSecretBox } from '@sts/core';
import type { Db } from '@sts/db';
import { verify } from '@sts/signing';
import {
  createAccount,
  createHit,
  createMonitor,
  hitEnvelope,
  redeliverEnvelope,
  testEnvelope,
  type HttpsReceiver,
  type MonitorFixture,
} from '@sts/testing';
import type { Dispatcher } from './app';
import { startInProcessDispatcher, type InProcessDispatcher } from '../test/dispatcher';

const KEY = randomBytes(32).toString('base64');
const box = createSecretBox(KEY);

describe('webhook retry schedule and ordering', () => {
  let harness: InProcessDispatcher;
  let db: Db;
  let receiver: HttpsReceiver;
  let dispatcher: Dispatcher;
  let accountId: string;

  beforeAll(async () => {
    harness = await startInProcessDispatcher('dispatcher-retries-test', KEY, { timeoutMs: 1000 });
    ({ db, receiver, dispatcher } = harness);
    accountId = (await createAccount(db, 'starter')).id;
  });

  afterAll(() => harness.close());

  beforeEach(async () => {
    receiver.requests.length = 0;
    receiver.setResponder(() => ({ status: 200 }));
    // what earlier tests left waiting would be claimed with this test's rows
    await db.webhookDeliveryDue.deleteMany({});
  });

  async function monitorWith(
    retryPolicy: 'none' | 'standard',
    ordering: 'unordered' | 'fifo' = 'unordered',
    path = '/hook',
  ): Promise<MonitorFixture> {
    const m = await createMonitor(db, box, { accountId, url: `${receiver.url}${path}` });
    await db.webhookEndpoint.update({ where: { monitorId: m.id }, data: { retryPolicy, ordering } });
    return m;
  }

  const attempts = (monitorId: string) =>
    db.deliveryAttempt.findMany({ where: { monitorId }, orderBy: [{ createdAt: 'asc' }, { attempt: 'asc' }] });
  const dueRows = (monitorId: string) =>
    db.webhookDeliveryDue.findMany({ where: { monitorId }, orderBy: { seq: 'asc' } });
  /** the clock reaches the due rows of a monitor */
  const makeDue = (monitorId: string) =>
    db.webhookDeliveryDue.updateMany({ where: { monitorId }, data: { dueAt: new Date(Date.now() - 1000) } });

  it('none (the default): a failure is final, logged as attempt 1 with no next attempt', async () => {
    const m = await monitorWith('none');
    receiver.setResponder(() => ({ status: 503 }));
    await expect(dispatcher.handle(hitEnvelope(m, await createHit(db, m)))).resolves.toBe('ack');
    const [a] = await attempts(m.id);
    expect(a).toMatchObject({ outcome: 'failed', statusCode: 503, attempt: 1, nextAttemptAt: null });
    expect(await dueRows(m.id)).toEqual([]);
  });

  it('standard: a failed hit is tried again with the same ids, signed afresh, until it is delivered', async () => {
    const m = await monitorWith('standard');
    receiver.setResponder(() => ({ status: 500 }));
    const env = hitEnvelope(m, await createHit(db, m));
    const before = Date.now();
    await expect(dispatcher.handle(env)).resolves.toBe('ack');

    const [first] = await attempts(m.id);
    expect(first).toMatchObject({ outcome: 'failed', attempt: 1 });
    // the first step: 5 s ±10 %
    const wait = first!.nextAttemptAt!.getTime() - before;
    expect(wait).toBeGreaterThanOrEqual(4400);
    expect(wait).toBeLessThanOrEqual(5500 + (Date.now() - before));
    const [due] = await dueRows(m.id);
    expect(due).toMatchObject({ deliveryId: env.messageId, attempt: 2, dueAt: first!.nextAttemptAt });

    // not due yet: nothing goes
    await expect(dispatcher.deliverDue()).resolves.toBe(0);
    expect(receiver.requests).toHaveLength(1);

    // a network failure is retried too (no answer within the timeout)
    receiver.setResponder(() => ({ status: 200, delayMs: 1500 }));
    await makeDue(m.id);
    await expect(dispatcher.deliverDue()).resolves.toBe(1);
    const second = (await attempts(m.id))[1]!;
    expect(second).toMatchObject({ outcome: 'failed', statusCode: null, attempt: 2 });
    expect(second.nextAttemptAt).not.toBeNull();
    expect((await dueRows(m.id))[0]).toMatchObject({ attempt: 3 });

    receiver.setResponder(() => ({ status: 200 }));
    await makeDue(m.id);
    await expect(dispatcher.deliverDue()).resolves.toBe(1);
    const third = (await attempts(m.id))[2]!;
    expect(third).toMatchObject({ outcome: 'delivered', attempt: 3, nextAttemptAt: null });
    expect(await dueRows(m.id)).toEqual([]);

    // every attempt carried the same webhook-id and X-Service-Delivery, each signed when it was sent
    expect(receiver.requests).toHaveLength(3);
    for (const req of receiver.requests) {
      expect(req.headers['x-service-delivery']).toBe(env.messageId);
      expect(req.headers['webhook-id']).toBe(env.messageId);
      expect(() => verify({ secret: m.secret!, body: req.rawBody, headers: req.headers })).not.toThrow();
      expect(Math.abs(Number(req.headers['webhook-timestamp']) - req.receivedAt / 1000)).toBeLessThan(3);
    }
  });

  it("honours Retry-After on a 503 within the schedule: up to the following step's length", async () => {
    const m = await monitorWith('standard');
    // asks for an hour: the next attempt waits for the step after it (30 s), not the hour
    receiver.setResponder(() => ({ status: 503, headers: { 'retry-after': '3600' } }));
    const before = Date.now();
    await dispatcher.handle(hitEnvelope(m, await createHit(db, m)));
    const [first] = await attempts(m.id);
    const wait = first!.nextAttemptAt!.getTime() - before;
    expect(wait).toBeGreaterThanOrEqual(30_000 - 50);
    expect(wait).toBeLessThanOrEqual(30_000 + (Date.now() - before));

    // a 429 naming 12 s at the first step: 12 s instead of 5
    const n = await monitorWith('standard');
    receiver.setResponder(() => ({ status: 429, headers: { 'retry-after': '12' } }));
    const t = Date.now();
    await dispatcher.handle(hitEnvelope(n, await createHit(db, n)));
    const [a] = await attempts(n.id);
    expect(a!.nextAttemptAt!.getTime() - t).toBeGreaterThanOrEqual(12_000 - 50);
    expect(a!.nextAttemptAt!.getTime() - t).toBeLessThanOrEqual(13_000);
  });

  it('the ninth failed attempt ends the schedule: logged exhausted, counted as a failure for health', async () => {
    const m = await monitorWith('standard');
    receiver.setResponder(() => ({ status: 502 }));
    await dispatcher.handle(hitEnvelope(m, await createHit(db, m)));
    // the schedule's eight retries, each moved to now
    for (let i = 2; i <= 9; i++) {
      await makeDue(m.id);
      await expect(dispatcher.deliverDue()).resolves.toBe(1);
    }
    const rows = await attempts(m.id);
    expect(rows.map((r) => r.attempt)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(rows.slice(0, 8).every((r) => r.outcome === 'failed' && r.nextAttemptAt !== null)).toBe(true);
    expect(rows[8]).toMatchObject({ outcome: 'exhausted', nextAttemptAt: null, statusCode: 502 });
    expect(await dueRows(m.id)).toEqual([]);
    const endpoint = await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId: m.id } });
    expect(endpoint.consecutiveFailures).toBe(9);
    expect(receiver.requests).toHaveLength(9);
  });

  it('a requested redelivery gets one attempt; when it succeeds, the retry still waiting is dropped', async () => {
    const m = await monitorWith('standard');
    receiver.setResponder(() => ({ status: 500 }));
    await dispatcher.handle(hitEnvelope(m, await createHit(db, m)));
    const [first] = await attempts(m.id);
    expect(await dueRows(m.id)).toHaveLength(1);
    await dispatcher.handle(redeliverEnvelope(accountId, first!.id));
    expect((await attempts(m.id))[1]).toMatchObject({ outcome: 'failed', attempt: 1, nextAttemptAt: null });
    expect(await dueRows(m.id)).toHaveLength(1); // the schedule goes on
    receiver.setResponder(() => ({ status: 200 }));
    await dispatcher.handle(redeliverEnvelope(accountId, first!.id));
    expect((await attempts(m.id))[2]).toMatchObject({ outcome: 'delivered', deliveryId: first!.deliveryId });
    expect(await dueRows(m.id)).toEqual([]);
  });

  it('a test webhook is never retried', async () => {
    const m = await monitorWith('standard');
    receiver.setResponder(() => ({ status: 500 }));
    await dispatcher.handle(testEnvelope(m));
    expect(await attempts(m.id)).toMatchObject([{ outcome: 'failed', attempt: 1, nextAttemptAt: null }]);
    expect(await dueRows(m.id)).toEqual([]);
  });

  it("a retrying endpoint's due deliveries never take another endpoint's turn: each gets its share of a claim", async () => {
    const slow = await monitorWith('standard', 'unordered', '/slow');
    const other = await monitorWith('standard', 'unordered', '/other');
    receiver.setResponder(() => ({ status: 500 }));
    for (let i = 0; i < 12; i++) await dispatcher.handle(hitEnvelope(slow, await createHit(db, slow)));
    await dispatcher.handle(hitEnvelope(other, await createHit(db, other)));
    await makeDue(slow.id);
    await makeDue(other.id);
    receiver.requests.length = 0;
    receiver.setResponder(() => ({ status: 200 }));
    // one claim: at most the endpoint concurrency (4 here) of the slow one's twelve, and the other's one
    await dispatcher.deliverDue();
    const paths = receiver.requests.map((r) => r.path);
    expect(paths.filter((p) => p === '/other')).toHaveLength(1);
    expect(paths.filter((p) => p === '/slow')).toHaveLength(4);
  });

  describe('fifo', () => {
    it('sends the next event only once the previous one succeeded; other webhooks are not held', async () => {
      const m = await monitorWith('standard', 'fifo', '/fifo');
      const free = await monitorWith('none', 'unordered', '/free');
      const envs = [];
      for (const text of ['one #launch', 'two #launch', 'three #launch']) {
        const env = hitEnvelope(m, await createHit(db, m, text));
        envs.push(env);
        await expect(dispatcher.handle(env)).resolves.toBe('ack');
      }
      // queued in order, none sent yet
      expect((await dueRows(m.id)).map((r) => r.deliveryId)).toEqual(envs.map((e) => e.messageId));
      expect(receiver.requests).toHaveLength(0);

      // the first fails: its retry holds the two behind it
      receiver.setResponder((req) => ({ status: req.path === '/fifo' ? 503 : 200 }));
      await dispatcher.deliverDue();
      expect(receiver.requests.map((r) => r.headers['x-service-delivery'])).toEqual([envs[0]!.messageId]);
      await expect(dispatcher.deliverDue()).resolves.toBe(0);

      // meanwhile another webhook's hit goes at once
      await expect(dispatcher.handle(hitEnvelope(free, await createHit(db, free)))).resolves.toBe('ack');
      expect(receiver.requests.filter((r) => r.path === '/free')).toHaveLength(1);

      // the receiver is back: the first, then the second, then the third
      receiver.setResponder(() => ({ status: 200 }));
      await makeDue(m.id);
      for (let i = 0; i < 3; i++) await dispatcher.deliverDue();
      const fifo = receiver.requests.filter((r) => r.path === '/fifo').map((r) => r.headers['x-service-delivery']);
      expect(fifo).toEqual([envs[0]!.messageId, ...envs.map((e) => e.messageId)]);
      expect(await dueRows(m.id)).toEqual([]);
      const delivered = (await attempts(m.id)).filter((a) => a.outcome === 'delivered');
      expect(delivered.map((a) => a.deliveryId)).toEqual(envs.map((e) => e.messageId));
    });

    it('an exhausted schedule lets the next one go', async () => {
      const m = await monitorWith('standard', 'fifo', '/fifo2');
      const a = hitEnvelope(m, await createHit(db, m, 'a #launch'));
      const b = hitEnvelope(m, await createHit(db, m, 'b #launch'));
      await dispatcher.handle(a);
      await dispatcher.handle(b);
      receiver.setResponder(() => ({ status: 500 }));
      await dispatcher.deliverDue();
      await db.webhookDeliveryDue.update({ where: { deliveryId: a.messageId }, data: { attempt: 9 } });
      await makeDue(m.id);
      receiver.setResponder((req) => ({ status: req.headers['x-service-delivery'] === a.messageId ? 500 : 200 }));
      await dispatcher.deliverDue();
      await dispatcher.deliverDue();
      const rows = await attempts(m.id);
      expect(rows.map((r) => [r.deliveryId, r.outcome])).toEqual([
        [a.messageId, 'failed'],
        [a.messageId, 'exhausted'],
        [b.messageId, 'delivered'],
      ]);
    });
  });
});
