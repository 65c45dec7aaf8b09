/**
 * Held while disabled, released when enabled, driven through handle() and releaseHeld() against a
 * real PostgreSQL database and a real HTTPS receiver: a disabled endpoint's live events are held
 * (not sent, not logged as skipped), a successful test webhook or an enable in the database
 * releases them oldest first and before new ones, each once; past WEBHOOK_HOLD_MAX or
 * WEBHOOK_HOLD_DAYS the oldest are dropped and logged as skipped, and the account gets one notice;
 * so are a webhook's deliveries waiting for a retry or a fifo turn past WEBHOOK_HOLD_MAX.
 */
import { randomUUID } from 'node:crypto';
import { parsePayload } from '@sts/messaging';
import {
  createAccount,
  createHit,
  createMonitor,
  hitEnvelope,
  testEnvelope,
  waitFor,
  type MonitorFixture,
} from '@sts/testing';
import { createDispatcher } from './app';
import { createHoldingStore } from './adapters/holding';
import { createPrismaRepository } from './adapters/repository';
import { useDispatcherBed } from '../test/bed';
import { createLogger } from '@sts/common';

const DAY = 86_400_000;

describe('events held while an endpoint is disabled', () => {
  const bed = useDispatcherBed('dispatcher-test', {
    maxConcurrencyPerEndpoint: 8,
    holdBounds: { days: 3, max: 4 },
    replyBody: '{}',
  });

  const endpoint = (monitorId: string) => bed.db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId } });
  const attempts = (monitorId: string) =>
    bed.db.deliveryAttempt.findMany({ where: { monitorId }, orderBy: [{ createdAt: 'asc' }, { id: 'asc' }] });
  const receivedHitIds = () =>
    bed.receiver.requests
      .filter((r) => r.headers['x-service-event'] === 'monitor.hit')
      .map((r) => (JSON.parse(r.rawBody.toString('utf8')) as { tweet: { id: string } }).tweet.id);
  const droppedNotices = (monitorId: string) =>
    bed.db.accountEvent.findMany({
      where: { routingKey: 'account.webhook.failing', payload: { path: ['monitorId'], equals: monitorId } },
    });

  const disabledMonitor = (): Promise<MonitorFixture> =>
    bed.monitor('/hooks/held', {
      consecutiveFailures: 6,
      firstFailureAt: new Date(Date.now() - 3 * DAY - 60_000),
      disabledAt: new Date(Date.now() - 60_000),
    });

  /** logs an attempt of held event `h`, as a dispatcher that died after sending it did */
  const logAttempt = (
    h: { monitorId: string; hitId: string | null; deliveryId: string; url: string },
    outcome: 'delivered' | 'failed',
    statusCode: number,
    attempt?: number,
  ) =>
    bed.db.deliveryAttempt.create({
      data: {
        monitorId: h.monitorId,
        hitId: h.hitId,
        event: 'monitor.hit',
        deliveryId: h.deliveryId,
        url: h.url,
        outcome,
        statusCode,
        ...(attempt !== undefined && { attempt }),
      },
    });

  /** publishes n hits; their tweet ids in order */
  async function hits(m: MonitorFixture, n: number): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const hit = await createHit(bed.db, m);
      await expect(bed.dispatcher.handle(hitEnvelope(m, hit))).resolves.toBe('ack');
      ids.push(hit.payload.tweet.id);
    }
    return ids;
  }

  it('holds live hits of a disabled endpoint; a successful test webhook releases them oldest first, before new ones', async () => {
    const m = await disabledMonitor();
    const held = await hits(m, 2);
    await bed.dispatcher.releaseHeld(); // still disabled: nothing goes
    expect(bed.receiver.requests).toHaveLength(0);
    expect(await attempts(m.id)).toHaveLength(0); // held, not skipped
    expect(await endpoint(m.id)).toMatchObject({ heldCount: 2 });
    // a broker redelivery of a held message is not held twice
    const hit = await createHit(bed.db, m);
    const env = hitEnvelope(m, hit);
    await bed.dispatcher.handle(env);
    await bed.dispatcher.handle({ ...env, redelivered: true });
    held.push(hit.payload.tweet.id);
    expect((await endpoint(m.id)).heldCount).toBe(3);

    await expect(bed.dispatcher.handle(testEnvelope(m))).resolves.toBe('ack');
    expect(await endpoint(m.id)).toMatchObject({ disabledAt: null, heldCount: 3 });
    // arriving before the release: it queues behind the held ones
    held.push(...(await hits(m, 1)));
    expect((await endpoint(m.id)).heldCount).toBe(4);

    await bed.dispatcher.releaseHeld();
    expect(receivedHitIds()).toEqual(held);
    expect(await endpoint(m.id)).toMatchObject({ heldCount: 0, heldDropped: 0 });
    const logged = (await attempts(m.id)).filter((a) => a.event === 'monitor.hit');
    expect(logged.map((a) => a.outcome)).toEqual(['delivered', 'delivered', 'delivered', 'delivered']);
    expect(await bed.db.heldEvent.count({ where: { monitorId: m.id } })).toBe(0);

    // the hold is empty: the next hit goes straight out
    bed.receiver.requests.length = 0;
    const next = await hits(m, 1);
    expect(receivedHitIds()).toEqual(next);
  });

  it('releases in the order the events were detected, whatever order their messages were held in', async () => {
    const m = await disabledMonitor();
    const base = Date.now() - 60_000;
    const made = [];
    for (let i = 0; i < 3; i++) made.push(await createHit(bed.db, m, `post ${i}`, new Date(base + i * 1000)));
    // a redelivered or parked message arrives late: held last, detected first
    for (const hit of [made[1]!, made[2]!, made[0]!]) await bed.dispatcher.handle(hitEnvelope(m, hit));
    await bed.db.webhookEndpoint.update({ where: { monitorId: m.id }, data: { disabledAt: null } });
    await bed.dispatcher.releaseHeld();
    expect(receivedHitIds()).toEqual(made.map((h) => h.payload.tweet.id));
  });

  it('past WEBHOOK_HOLD_MAX the oldest are dropped, logged as skipped with the reason, and the account is told once', async () => {
    const m = await disabledMonitor();
    const ids = await hits(m, 6);
    expect(await endpoint(m.id)).toMatchObject({ heldCount: 4, heldDropped: 2 });
    const skipped = (await attempts(m.id)).filter((a) => a.outcome === 'skipped');
    expect(skipped).toHaveLength(2);
    expect(skipped[0]!.error).toMatch(/more than 4 events held while the endpoint was disabled \(WEBHOOK_HOLD_MAX\)/);
    const hitIds = await bed.db.hit.findMany({ where: { id: { in: skipped.map((a) => a.hitId!) } } });
    expect(hitIds.map((h) => h.tweetId).sort()).toEqual(ids.slice(0, 2).sort());
    const notices = (await droppedNotices(m.id)).map((e) => parsePayload('account.webhook.failing', e.payload));
    expect(notices.filter((n) => n.state === 'held_dropped')).toHaveLength(1);
    expect(bed.receiver.requests).toHaveLength(0);

    // enabled by the CLI, dashboard or API (the use-case clears the health columns): released
    await bed.db.webhookEndpoint.update({
      where: { monitorId: m.id },
      data: { consecutiveFailures: 0, firstFailureAt: null, disabledAt: null },
    });
    await bed.dispatcher.releaseHeld();
    expect(receivedHitIds()).toEqual(ids.slice(2));
    expect(await endpoint(m.id)).toMatchObject({ heldCount: 0, heldDropped: 0 });
  });

  it('a retry due while disabled is held with its attempt number; past WEBHOOK_HOLD_MAX it is dropped as that attempt', async () => {
    const m = await disabledMonitor();
    await bed.db.webhookEndpoint.update({ where: { monitorId: m.id }, data: { retryPolicy: 'standard' } });
    const hit = await createHit(bed.db, m);
    const deliveryId = randomUUID();
    await bed.db.webhookDeliveryDue.create({
      data: {
        deliveryId,
        monitorId: m.id,
        webhookId: (await endpoint(m.id)).id,
        event: 'monitor.hit',
        hitId: hit.id,
        payload: hit.payload,
        attempt: 3,
        dueAt: new Date(Date.now() - 1000),
      },
    });
    await bed.dispatcher.deliverDue();
    expect(await bed.db.heldEvent.findUniqueOrThrow({ where: { deliveryId } })).toMatchObject({ attempt: 3 });
    expect(await bed.db.webhookDeliveryDue.count({ where: { deliveryId } })).toBe(0);
    expect(await attempts(m.id)).toHaveLength(0);
    // four newer events: the hold (at most 4) drops its oldest, the retry, as attempt 3
    await hits(m, 4);
    const [dropped] = (await attempts(m.id)).filter((a) => a.outcome === 'skipped');
    expect(dropped).toMatchObject({ deliveryId, attempt: 3 });
    expect(dropped!.error).toMatch(/\(WEBHOOK_HOLD_MAX\)/);
    expect(bed.receiver.requests).toHaveLength(0);
  });

  it('past WEBHOOK_HOLD_DAYS held events are dropped and logged as skipped', async () => {
    const m = await disabledMonitor();
    const ids = await hits(m, 2);
    const oldest = await bed.db.heldEvent.findFirstOrThrow({ where: { monitorId: m.id }, orderBy: { id: 'asc' } });
    await bed.db.heldEvent.update({
      where: { id: oldest.id },
      data: { heldAt: new Date(Date.now() - 3 * DAY - 1000) },
    });
    await bed.dispatcher.releaseHeld();
    const skipped = (await attempts(m.id)).filter((a) => a.outcome === 'skipped');
    expect(skipped.map((a) => a.deliveryId)).toEqual([oldest.deliveryId]);
    expect(skipped[0]!.error).toMatch(
      /held while the endpoint was disabled for more than 3 days \(WEBHOOK_HOLD_DAYS\)/,
    );
    expect(await endpoint(m.id)).toMatchObject({ heldCount: 1, heldDropped: 1 });
    expect(bed.receiver.requests).toHaveLength(0);
    expect(ids).toHaveLength(2);
  });

  it('a Free account, a paused monitor and a test ping are not held', async () => {
    const m = await disabledMonitor();
    await bed.db.monitor.update({ where: { id: m.id }, data: { isActive: false } });
    await hits(m, 1);
    expect((await attempts(m.id)).map((a) => [a.outcome, a.error])).toEqual([['skipped', 'monitor is inactive']]);
    expect((await endpoint(m.id)).heldCount).toBe(0);

    const freeAccount = (await createAccount(bed.db, 'free')).id;
    const free = await createMonitor(bed.db, bed.box, {
      accountId: freeAccount,
      url: `${bed.receiver.url}/hooks/free`,
    });
    await bed.db.webhookEndpoint.update({ where: { monitorId: free.id }, data: { disabledAt: new Date() } });
    await hits(free, 1);
    expect((await attempts(free.id)).map((a) => a.outcome)).toEqual(['skipped']);
    // a test ping still goes out to a disabled endpoint (and a success enables it)
    await bed.dispatcher.handle(testEnvelope(free));
    expect(bed.receiver.requests.map((r) => r.headers['x-service-event'])).toEqual(['monitor.test']);
    expect(await endpoint(free.id)).toMatchObject({ heldCount: 0, disabledAt: null });
  });

  it('a claim another dispatcher holds is left alone; an expired one is sent, unless its attempt is logged', async () => {
    const m = await disabledMonitor();
    await hits(m, 2);
    const [first, second] = await bed.db.heldEvent.findMany({ where: { monitorId: m.id }, orderBy: { id: 'asc' } });
    await bed.db.webhookEndpoint.update({ where: { monitorId: m.id }, data: { disabledAt: null } });
    // the head is being sent by another dispatcher: nothing goes, in order
    await bed.db.heldEvent.update({ where: { id: first!.id }, data: { claimedUntil: new Date(Date.now() + 60_000) } });
    await bed.dispatcher.releaseHeld();
    expect(bed.receiver.requests).toHaveLength(0);
    // that dispatcher died after sending and logging it: its claim expires, it is not sent again
    await bed.db.heldEvent.update({ where: { id: first!.id }, data: { claimedUntil: new Date(Date.now() - 1000) } });
    await logAttempt(first!, 'delivered', 200);
    await bed.dispatcher.releaseHeld();
    expect(bed.receiver.requests.map((r) => r.headers['x-service-delivery'])).toEqual([second!.deliveryId]);
    expect(await endpoint(m.id)).toMatchObject({ heldCount: 0 });
  });

  it('an expired claim of a held retry: its earlier failed attempts do not count as sent, its own does', async () => {
    const m = await disabledMonitor();
    await hits(m, 2);
    const [first, second] = await bed.db.heldEvent.findMany({ where: { monitorId: m.id }, orderBy: { id: 'asc' } });
    // both are retries due as attempt 2, claimed by a dispatcher that died; attempt 1 failed for both
    for (const h of [first!, second!]) {
      await bed.db.heldEvent.update({
        where: { id: h.id },
        data: { attempt: 2, claimedUntil: new Date(Date.now() - 1000) },
      });
      await logAttempt(h, 'failed', 503, 1);
    }
    // the first one's attempt 2 was sent and logged before the dispatcher died
    await logAttempt(first!, 'delivered', 200, 2);
    await bed.db.webhookEndpoint.update({ where: { monitorId: m.id }, data: { disabledAt: null } });
    await bed.dispatcher.releaseHeld();
    expect(bed.receiver.requests.map((r) => r.headers['x-service-delivery'])).toEqual([second!.deliveryId]);
    const logged = await bed.db.deliveryAttempt.findMany({ where: { deliveryId: second!.deliveryId } });
    expect(logged.map((a) => [a.outcome, a.attempt]).sort()).toEqual([
      ['delivered', 2],
      ['failed', 1],
    ]);
    expect(await endpoint(m.id)).toMatchObject({ heldCount: 0 });
  });

  it('fifo with retries: a released event that fails holds the rest back until its retry is delivered', async () => {
    const m = await disabledMonitor();
    await bed.db.webhookEndpoint.update({
      where: { monitorId: m.id },
      data: { retryPolicy: 'standard', ordering: 'fifo' },
    });
    const ids = await hits(m, 3);
    // enabled (what the enable use-case writes)
    await bed.db.webhookEndpoint.update({
      where: { monitorId: m.id },
      data: { disabledAt: null, consecutiveFailures: 0, firstFailureAt: null },
    });
    // the first answer is a 503, then the receiver works
    let calls = 0;
    bed.receiver.setResponder(() => (calls++ === 0 ? { status: 503 } : { status: 200 }));
    await bed.dispatcher.releaseHeld();
    expect(receivedHitIds()).toEqual([ids[0]]);
    expect((await endpoint(m.id)).heldCount).toBe(2);
    // a new hit meanwhile waits behind them
    ids.push(...(await hits(m, 1)));
    await bed.dispatcher.releaseHeld(); // the retry still waits: nothing overtakes it
    expect(receivedHitIds()).toEqual([ids[0]]);
    // the retry falls due: held again at the head, then everything goes in order
    await bed.makeDue(m.id);
    await bed.dispatcher.deliverDue();
    await bed.dispatcher.releaseHeld();
    expect(receivedHitIds()).toEqual([ids[0], ...ids]);
    const firstId = bed.receiver.requests[0]!.headers['x-service-delivery'];
    const first = (await attempts(m.id)).filter((a) => a.deliveryId === firstId);
    expect(first.map((a) => [a.outcome, a.attempt])).toEqual([
      ['failed', 1],
      ['delivered', 2],
    ]);
    expect(await endpoint(m.id)).toMatchObject({ heldCount: 0 });
    expect(await bed.db.webhookDeliveryDue.count({ where: { monitorId: m.id } })).toBe(0);
  });

  it('two dispatchers releasing the same endpoint send each held event once, in order', async () => {
    const m = await disabledMonitor();
    const other = createDispatcher({
      repository: createPrismaRepository(bed.db),
      holding: createHoldingStore(bed.db),
      holdBounds: { days: 3, max: 1000 },
      logger: createLogger({ service: 'dispatcher-test-2', level: 'error' }),
      secretsKey: bed.key,
      timeoutMs: 2000,
      allowPrivateHosts: ['localhost'],
    });
    try {
      // a slow receiver, so the two passes overlap
      bed.receiver.setResponder(() => ({ status: 200, body: '{}', delayMs: 30 }));
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const hit = await createHit(bed.db, m);
        await other.handle(hitEnvelope(m, hit, randomUUID()));
        ids.push(hit.payload.tweet.id);
      }
      await bed.db.webhookEndpoint.update({ where: { monitorId: m.id }, data: { disabledAt: null } });
      await Promise.all([bed.dispatcher.releaseHeld(), other.releaseHeld(), bed.dispatcher.releaseHeld()]);
      await waitFor(async () => (await endpoint(m.id)).heldCount === 0, 20_000);
      await other.releaseHeld();
      expect(receivedHitIds()).toEqual(ids);
    } finally {
      other.close();
    }
  });

  /**
   * The same bound on a webhook's waiting deliveries (webhook_deliveries_due: fifo turns, retries),
   * enabled or not: the hold's pass drops the oldest past it, logged as skipped attempts naming the
   * bound, the account told once (`due_dropped`) until none waits; a claimed row (in flight) stays.
   */
  describe('the bound on waiting deliveries', () => {
    const REASON = /more than 4 deliveries waiting for the endpoint \(.*WEBHOOK_HOLD_MAX\): the oldest dropped/;

    const waiting = (monitorId: string) =>
      bed.db.webhookDeliveryDue.findMany({ where: { monitorId }, orderBy: { seq: 'asc' } });
    const skipped = (monitorId: string) =>
      bed.db.deliveryAttempt.findMany({ where: { monitorId, outcome: 'skipped' }, orderBy: { createdAt: 'asc' } });
    const notices = async (monitorId: string) =>
      (await droppedNotices(monitorId))
        .map((e) => parsePayload('account.webhook.failing', e.payload))
        .filter((n) => n.state === 'due_dropped');

    beforeEach(() => bed.receiver.setResponder(() => ({ status: 500 })));

    const webhook = (ordering: 'fifo' | 'unordered', path: string) =>
      bed.monitor(path, { retryPolicy: 'standard', ordering });

    /** n hits handled as their messages are; their delivery ids in order */
    async function queued(m: MonitorFixture, n: number): Promise<string[]> {
      const ids: string[] = [];
      for (let i = 0; i < n; i++) {
        const env = hitEnvelope(m, await createHit(bed.db, m, `post ${i}`));
        await bed.dispatcher.handle(env);
        ids.push(env.messageId);
      }
      return ids;
    }

    it("a fifo webhook's turns past the bound: the oldest dropped and logged as skipped, the account told once", async () => {
      const m = await webhook('fifo', '/fifo');
      const ids = await queued(m, 7);
      expect(await endpoint(m.id)).toMatchObject({ dueCount: 7, dueDropped: 0 });

      await bed.dispatcher.releaseHeld();
      expect((await waiting(m.id)).map((d) => d.deliveryId)).toEqual(ids.slice(3));
      expect(await endpoint(m.id)).toMatchObject({ dueCount: 4, dueDropped: 3 });
      const logged = await skipped(m.id);
      expect(logged.map((a) => a.deliveryId).sort()).toEqual(ids.slice(0, 3).sort());
      for (const a of logged) {
        expect(a.error).toMatch(REASON);
        expect(a.attempt).toBe(1);
        expect(a.url).toContain('/fifo');
      }
      expect(await notices(m.id)).toHaveLength(1);
      expect(bed.receiver.requests).toHaveLength(0);

      // more arrive: dropped again, but the account was told already
      const more = await queued(m, 2);
      await bed.dispatcher.releaseHeld();
      expect((await waiting(m.id)).map((d) => d.deliveryId)).toEqual([...ids.slice(5), ...more]);
      expect(await endpoint(m.id)).toMatchObject({ dueCount: 4, dueDropped: 5 });
      expect(await notices(m.id)).toHaveLength(1);

      // none waiting any more: the count starts again, and so does the notice
      await bed.db.webhookDeliveryDue.deleteMany({ where: { monitorId: m.id } });
      expect(await endpoint(m.id)).toMatchObject({ dueCount: 0, dueDropped: 0 });
    });

    it('retries past the bound: the oldest not in flight dropped as the attempt they waited for', async () => {
      const m = await webhook('unordered', '/retries');
      const ids = await queued(m, 6);
      const rows = await waiting(m.id);
      expect(rows.map((d) => [d.deliveryId, d.attempt])).toEqual(ids.map((id) => [id, 2]));
      // the oldest is in flight here: never dropped
      await bed.db.webhookDeliveryDue.update({
        where: { deliveryId: ids[0]! },
        data: { claimedUntil: new Date(Date.now() + 60_000) },
      });

      await bed.dispatcher.releaseHeld();
      expect((await waiting(m.id)).map((d) => d.deliveryId)).toEqual([ids[0], ...ids.slice(3)]);
      const logged = await skipped(m.id);
      expect(logged.map((a) => [a.deliveryId, a.attempt]).sort()).toEqual(
        [
          [ids[1], 2],
          [ids[2], 2],
        ].sort(),
      );
      expect(logged[0]!.error).toMatch(REASON);
      expect(await notices(m.id)).toHaveLength(1);
      // the failed first attempts of the dropped retries no longer name a next attempt; the others still do
      const firsts = await bed.db.deliveryAttempt.findMany({ where: { monitorId: m.id, attempt: 1 } });
      const nextOf = new Map(firsts.map((a) => [a.deliveryId, a.nextAttemptAt]));
      expect([nextOf.get(ids[1]!), nextOf.get(ids[2]!)]).toEqual([null, null]);
      expect(nextOf.get(ids[3]!)).toBeInstanceOf(Date);

      // at the bound: nothing more is dropped
      await bed.dispatcher.releaseHeld();
      expect(await waiting(m.id)).toHaveLength(4);
      expect(await skipped(m.id)).toHaveLength(2);
    });

    it('a webhook within the bound keeps every waiting delivery', async () => {
      const m = await webhook('fifo', '/within');
      await queued(m, 4);
      await bed.dispatcher.releaseHeld();
      expect(await waiting(m.id)).toHaveLength(4);
      expect(await skipped(m.id)).toHaveLength(0);
      expect(await notices(m.id)).toHaveLength(0);
    });
  });
});
