/**
 * Claims of due deliveries (retries, fifo turns) on a real PostgreSQL database and HTTPS receiver:
 * a claim stays its holder's while the delivery is in flight, however long it takes, and an
 * attempt settles only the row it claimed (a replica whose claim ran out does not bring back a
 * delivery another replica settled).
 */
import { createLogger } from '@sts/common';
import { createHit, hitEnvelope } from '@sts/testing';
import { createPrismaRepository } from './adapters/repository';
import { DueDeliveries } from './dueDeliveries';
import { useDispatcherBed } from '../test/bed';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('due delivery claims', () => {
  const bed = useDispatcherBed('dispatcher-due-claims-test', { timeoutMs: 5000 });

  /** a standard-policy monitor with one delivery failed once: its retry (attempt 2) due now */
  async function retryDueNow(path: string) {
    const m = await bed.monitor(path, { retryPolicy: 'standard' });
    bed.receiver.setResponder(() => ({ status: 500 }));
    const env = hitEnvelope(m, await createHit(bed.db, m));
    await bed.dispatcher.handle(env);
    await bed.makeDue(m.id);
    return { m, env };
  }

  it('a claim is kept while its delivery is in flight, past the lease: no replica claims it again', async () => {
    const { env } = await retryDueNow('/slow');
    const repository = createPrismaRepository(bed.db);
    const logger = createLogger({ service: 'due-claims-test', level: 'error' });
    const leaseMs = 1500;
    let finish!: () => void;
    const inFlight = new Promise<void>((r) => (finish = r));
    const handledBy: string[] = [];
    const replica = (name: string) =>
      new DueDeliveries({
        repository,
        logger,
        pollMs: 60_000,
        maxInFlight: 10,
        perWebhook: 4,
        leaseMs,
        handler: async (due) => {
          handledBy.push(name);
          if (name === 'a') {
            await inFlight; // a send that takes longer than the lease (a backed-up lane, a slow endpoint)
            await bed.db.webhookDeliveryDue.delete({ where: { deliveryId: due.deliveryId } });
          }
          return 'ack';
        },
      });
    const a = replica('a');
    const b = replica('b');
    await expect(a.poll()).resolves.toBe(1);
    // three leases go by while the first replica's delivery is still in flight
    await sleep(3 * leaseMs);
    await expect(b.poll()).resolves.toBe(0);
    await expect(a.poll()).resolves.toBe(0);
    finish();
    await a.stop();
    await b.stop();
    expect(handledBy).toEqual(['a']);
    expect(await bed.db.webhookDeliveryDue.findMany({ where: { deliveryId: env.messageId } })).toEqual([]);
  });

  it('a retry whose delivery another replica settled meanwhile is not scheduled again', async () => {
    const { m, env } = await retryDueNow('/settled');
    // while this attempt is in flight, another replica (its claim having run out here) delivers
    // the same delivery and removes its due row; then this attempt fails
    bed.receiver.setResponder(async () => {
      await bed.db.webhookDeliveryDue.deleteMany({ where: { deliveryId: env.messageId } });
      return { status: 500 };
    });
    await expect(bed.dispatcher.deliverDue()).resolves.toBe(1);
    const attempts = await bed.db.deliveryAttempt.findMany({ where: { monitorId: m.id }, orderBy: { attempt: 'asc' } });
    expect(attempts.map((a) => [a.attempt, a.outcome])).toEqual([
      [1, 'failed'],
      [2, 'failed'],
    ]);
    // no third attempt of a delivery that was settled
    expect(await bed.db.webhookDeliveryDue.findMany({ where: { deliveryId: env.messageId } })).toEqual([]);
  });

  it('an attempt that was moved on by another replica is not moved back', async () => {
    const { env } = await retryDueNow('/moved');
    // meanwhile another replica sent attempt 2 and failed: the row waits for attempt 3 in an hour
    const later = new Date(Date.now() + 3_600_000);
    bed.receiver.setResponder(async () => {
      await bed.db.webhookDeliveryDue.update({
        where: { deliveryId: env.messageId },
        data: { attempt: 3, dueAt: later, claimedUntil: null },
      });
      return { status: 500 };
    });
    await expect(bed.dispatcher.deliverDue()).resolves.toBe(1);
    const row = await bed.db.webhookDeliveryDue.findUniqueOrThrow({ where: { deliveryId: env.messageId } });
    expect(row).toMatchObject({ attempt: 3, dueAt: later });
  });
});

describe('fifo order across replicas', () => {
  const bed = useDispatcherBed('dispatcher-fifo-order-test');

  it("a fifo webhook's events go in their monitor's sequence, whatever order the dispatchers queued them in", async () => {
    const m = await bed.monitor('/fifo', { retryPolicy: 'standard', ordering: 'fifo' });
    const envs = await bed.sequencedHits(m, 3, 'event');
    // two replicas (or two messages of one prefetch) finish preparing in another order than published
    for (const i of [2, 0, 1]) await expect(bed.dispatcher.handle(envs[i]!)).resolves.toBe('ack');
    for (let i = 0; i < 3; i++) await expect(bed.dispatcher.deliverDue()).resolves.toBe(1);
    const sequences = bed.receiver.requests.map((r) => r.headers['x-service-sequence']);
    expect(sequences).toEqual(['1', '2', '3']);
  });

  it('an event with a lower sequence queued while the head is in flight waits for it: one at a time', async () => {
    const m = await bed.monitor('/fifo-late', { retryPolicy: 'standard', ordering: 'fifo' });
    const envs = await bed.sequencedHits(m, 2, 'late');
    bed.receiver.requests.length = 0;
    // sequence 2 is queued and goes; sequence 1 reaches the dispatcher while 2 is in flight
    await bed.dispatcher.handle(envs[1]!);
    let late: Promise<number> | null = null;
    bed.receiver.setResponder(async (req) => {
      if (req.headers['x-service-sequence'] === '2') {
        await bed.dispatcher.handle(envs[0]!);
        late = bed.dispatcher.deliverDue();
        await late;
      }
      return { status: 200 };
    });
    await bed.dispatcher.deliverDue();
    await expect(late).resolves.toBe(0);
    await expect(bed.dispatcher.deliverDue()).resolves.toBe(1);
    expect(bed.receiver.requests.map((r) => r.headers['x-service-sequence'])).toEqual(['2', '1']);
  });
});
