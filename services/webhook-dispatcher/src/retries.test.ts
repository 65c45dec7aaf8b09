/**
 * The retry schedule (`retry_policy`) and ordered delivery (`ordering`) of a webhook, driven
 * through handle() and deliverDue() against a real PostgreSQL database and HTTPS receiver. Time
 * is not waited out: a test moves a due row's `due_at` to now, as the clock would.
 */
import { verify } from '@sts/signing';
import { createHit, hitEnvelope, redeliverEnvelope, testEnvelope, type MonitorFixture } from '@sts/testing';
import { useDispatcherBed } from '../test/bed';

describe('webhook retry schedule and ordering', () => {
  const bed = useDispatcherBed('dispatcher-retries-test', { timeoutMs: 1000 });

  const monitorWith = (
    retryPolicy: 'none' | 'standard',
    ordering: 'unordered' | 'fifo' = 'unordered',
    path = '/hook',
  ): Promise<MonitorFixture> => bed.monitor(path, { retryPolicy, ordering });

  const attempts = (monitorId: string) =>
    bed.db.deliveryAttempt.findMany({ where: { monitorId }, orderBy: [{ createdAt: 'asc' }, { attempt: 'asc' }] });
  const dueRows = (monitorId: string) =>
    bed.db.webhookDeliveryDue.findMany({ where: { monitorId }, orderBy: { seq: 'asc' } });

  it('none (the default): a failure is final, logged as attempt 1 with no next attempt', async () => {
    const m = await monitorWith('none');
    bed.receiver.setResponder(() => ({ status: 503 }));
    await expect(bed.dispatcher.handle(hitEnvelope(m, await createHit(bed.db, m)))).resolves.toBe('ack');
    const [a] = await attempts(m.id);
    expect(a).toMatchObject({ outcome: 'failed', statusCode: 503, attempt: 1, nextAttemptAt: null });
    expect(await dueRows(m.id)).toEqual([]);
  });

  it('standard: a failed hit is tried again with the same ids, signed afresh, until it is delivered', async () => {
    const m = await monitorWith('standard');
    bed.receiver.setResponder(() => ({ status: 500 }));
    const env = hitEnvelope(m, await createHit(bed.db, m));
    const before = Date.now();
    await expect(bed.dispatcher.handle(env)).resolves.toBe('ack');

    const [first] = await attempts(m.id);
    expect(first).toMatchObject({ outcome: 'failed', attempt: 1 });
    // the first step: 5 s ±10 %
    const wait = first!.nextAttemptAt!.getTime() - before;
    expect(wait).toBeGreaterThanOrEqual(4400);
    expect(wait).toBeLessThanOrEqual(5500 + (Date.now() - before));
    const [due] = await dueRows(m.id);
    expect(due).toMatchObject({ deliveryId: env.messageId, attempt: 2, dueAt: first!.nextAttemptAt });

    // not due yet: nothing goes
    await expect(bed.dispatcher.deliverDue()).resolves.toBe(0);
    expect(bed.receiver.requests).toHaveLength(1);

    // a network failure is retried too (no answer within the timeout)
    bed.receiver.setResponder(() => ({ status: 200, delayMs: 1500 }));
    await bed.makeDue(m.id);
    await expect(bed.dispatcher.deliverDue()).resolves.toBe(1);
    const second = (await attempts(m.id))[1]!;
    expect(second).toMatchObject({ outcome: 'failed', statusCode: null, attempt: 2 });
    expect(second.nextAttemptAt).not.toBeNull();
    expect((await dueRows(m.id))[0]).toMatchObject({ attempt: 3 });

    bed.receiver.setResponder(() => ({ status: 200 }));
    await bed.makeDue(m.id);
    await expect(bed.dispatcher.deliverDue()).resolves.toBe(1);
    const third = (await attempts(m.id))[2]!;
    expect(third).toMatchObject({ outcome: 'delivered', attempt: 3, nextAttemptAt: null });
    expect(await dueRows(m.id)).toEqual([]);

    // every attempt carried the same webhook-id and X-Service-Delivery, each signed when it was sent
    expect(bed.receiver.requests).toHaveLength(3);
    for (const req of bed.receiver.requests) {
      expect(req.headers['x-service-delivery']).toBe(env.messageId);
      expect(req.headers['webhook-id']).toBe(env.messageId);
      expect(() => verify({ secret: m.secret!, body: req.rawBody, headers: req.headers })).not.toThrow();
      expect(Math.abs(Number(req.headers['webhook-timestamp']) - req.receivedAt / 1000)).toBeLessThan(3);
    }
  });

  it("honours Retry-After on a 503 within the schedule: up to the following step's length", async () => {
    const m = await monitorWith('standard');
    // asks for an hour: the next attempt waits for the step after it (30 s), not the hour
    bed.receiver.setResponder(() => ({ status: 503, headers: { 'retry-after': '3600' } }));
    const before = Date.now();
    await bed.dispatcher.handle(hitEnvelope(m, await createHit(bed.db, m)));
    const [first] = await attempts(m.id);
    const wait = first!.nextAttemptAt!.getTime() - before;
    expect(wait).toBeGreaterThanOrEqual(30_000 - 50);
    expect(wait).toBeLessThanOrEqual(30_000 + (Date.now() - before));

    // a 429 naming 12 s at the first step: 12 s instead of 5
    const n = await monitorWith('standard');
    bed.receiver.setResponder(() => ({ status: 429, headers: { 'retry-after': '12' } }));
    const t = Date.now();
    await bed.dispatcher.handle(hitEnvelope(n, await createHit(bed.db, n)));
    const [a] = await attempts(n.id);
    expect(a!.nextAttemptAt!.getTime() - t).toBeGreaterThanOrEqual(12_000 - 50);
    expect(a!.nextAttemptAt!.getTime() - t).toBeLessThanOrEqual(13_000);
  });

  it('the ninth failed attempt ends the schedule: logged exhausted, counted as a failure for health', async () => {
    const m = await monitorWith('standard');
    bed.receiver.setResponder(() => ({ status: 502 }));
    await bed.dispatcher.handle(hitEnvelope(m, await createHit(bed.db, m)));
    // the schedule's eight retries, each moved to now
    for (let i = 2; i <= 9; i++) {
      await bed.makeDue(m.id);
      await expect(bed.dispatcher.deliverDue()).resolves.toBe(1);
    }
    const rows = await attempts(m.id);
    expect(rows.map((r) => r.attempt)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(rows.slice(0, 8).every((r) => r.outcome === 'failed' && r.nextAttemptAt !== null)).toBe(true);
    expect(rows[8]).toMatchObject({ outcome: 'exhausted', nextAttemptAt: null, statusCode: 502 });
    expect(await dueRows(m.id)).toEqual([]);
    const endpoint = await bed.db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId: m.id } });
    expect(endpoint.consecutiveFailures).toBe(9);
    expect(bed.receiver.requests).toHaveLength(9);
  });

  it('a requested redelivery gets one attempt; when it succeeds, the retry still waiting is dropped', async () => {
    const m = await monitorWith('standard');
    bed.receiver.setResponder(() => ({ status: 500 }));
    await bed.dispatcher.handle(hitEnvelope(m, await createHit(bed.db, m)));
    const [first] = await attempts(m.id);
    expect(await dueRows(m.id)).toHaveLength(1);
    await bed.dispatcher.handle(redeliverEnvelope(bed.accountId, first!.id));
    expect((await attempts(m.id))[1]).toMatchObject({ outcome: 'failed', attempt: 1, nextAttemptAt: null });
    expect(await dueRows(m.id)).toHaveLength(1); // the schedule goes on
    bed.receiver.setResponder(() => ({ status: 200 }));
    await bed.dispatcher.handle(redeliverEnvelope(bed.accountId, first!.id));
    expect((await attempts(m.id))[2]).toMatchObject({ outcome: 'delivered', deliveryId: first!.deliveryId });
    expect(await dueRows(m.id)).toEqual([]);
  });

  it('a test webhook is never retried', async () => {
    const m = await monitorWith('standard');
    bed.receiver.setResponder(() => ({ status: 500 }));
    await bed.dispatcher.handle(testEnvelope(m));
    expect(await attempts(m.id)).toMatchObject([{ outcome: 'failed', attempt: 1, nextAttemptAt: null }]);
    expect(await dueRows(m.id)).toEqual([]);
  });

  it("a retrying endpoint's due deliveries never take another endpoint's turn: each gets its share of a claim", async () => {
    const slow = await monitorWith('standard', 'unordered', '/slow');
    const other = await monitorWith('standard', 'unordered', '/other');
    bed.receiver.setResponder(() => ({ status: 500 }));
    for (let i = 0; i < 12; i++) await bed.dispatcher.handle(hitEnvelope(slow, await createHit(bed.db, slow)));
    await bed.dispatcher.handle(hitEnvelope(other, await createHit(bed.db, other)));
    await bed.makeDue(slow.id);
    await bed.makeDue(other.id);
    bed.receiver.requests.length = 0;
    bed.receiver.setResponder(() => ({ status: 200 }));
    // one claim: at most the endpoint concurrency (4 here) of the slow one's twelve, and the other's one
    await bed.dispatcher.deliverDue();
    const paths = bed.receiver.requests.map((r) => r.path);
    expect(paths.filter((p) => p === '/other')).toHaveLength(1);
    expect(paths.filter((p) => p === '/slow')).toHaveLength(4);
  });

  describe('fifo', () => {
    it('sends the next event only once the previous one succeeded; other webhooks are not held', async () => {
      const m = await monitorWith('standard', 'fifo', '/fifo');
      const free = await monitorWith('none', 'unordered', '/free');
      const envs = [];
      for (const text of ['one #launch', 'two #launch', 'three #launch']) {
        const env = hitEnvelope(m, await createHit(bed.db, m, text));
        envs.push(env);
        await expect(bed.dispatcher.handle(env)).resolves.toBe('ack');
      }
      // queued in order, none sent yet
      expect((await dueRows(m.id)).map((r) => r.deliveryId)).toEqual(envs.map((e) => e.messageId));
      expect(bed.receiver.requests).toHaveLength(0);

      // the first fails: its retry holds the two behind it
      bed.receiver.setResponder((req) => ({ status: req.path === '/fifo' ? 503 : 200 }));
      await bed.dispatcher.deliverDue();
      expect(bed.receiver.requests.map((r) => r.headers['x-service-delivery'])).toEqual([envs[0]!.messageId]);
      await expect(bed.dispatcher.deliverDue()).resolves.toBe(0);

      // meanwhile another webhook's hit goes at once
      await expect(bed.dispatcher.handle(hitEnvelope(free, await createHit(bed.db, free)))).resolves.toBe('ack');
      expect(bed.receiver.requests.filter((r) => r.path === '/free')).toHaveLength(1);

      // the receiver is back: the first, then the second, then the third
      bed.receiver.setResponder(() => ({ status: 200 }));
      await bed.makeDue(m.id);
      for (let i = 0; i < 3; i++) await bed.dispatcher.deliverDue();
      const fifo = bed.receiver.requests.filter((r) => r.path === '/fifo').map((r) => r.headers['x-service-delivery']);
      expect(fifo).toEqual([envs[0]!.messageId, ...envs.map((e) => e.messageId)]);
      expect(await dueRows(m.id)).toEqual([]);
      const delivered = (await attempts(m.id)).filter((a) => a.outcome === 'delivered');
      expect(delivered.map((a) => a.deliveryId)).toEqual(envs.map((e) => e.messageId));
    });

    it('an exhausted schedule lets the next one go', async () => {
      const m = await monitorWith('standard', 'fifo', '/fifo2');
      const a = hitEnvelope(m, await createHit(bed.db, m, 'a #launch'));
      const b = hitEnvelope(m, await createHit(bed.db, m, 'b #launch'));
      await bed.dispatcher.handle(a);
      await bed.dispatcher.handle(b);
      bed.receiver.setResponder(() => ({ status: 500 }));
      await bed.dispatcher.deliverDue();
      await bed.db.webhookDeliveryDue.update({ where: { deliveryId: a.messageId }, data: { attempt: 9 } });
      await bed.makeDue(m.id);
      bed.receiver.setResponder((req) => ({ status: req.headers['x-service-delivery'] === a.messageId ? 500 : 200 }));
      await bed.dispatcher.deliverDue();
      await bed.dispatcher.deliverDue();
      const rows = await attempts(m.id);
      expect(rows.map((r) => [r.deliveryId, r.outcome])).toEqual([
        [a.messageId, 'failed'],
        [a.messageId, 'exhausted'],
        [b.messageId, 'delivered'],
      ]);
    });
  });
});
