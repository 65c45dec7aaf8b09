/**
 * The release of held events across replicas, on a real PostgreSQL database: a held event being
 * sent by one dispatcher stays its own while the send is in flight, past the claim's lease, so
 * another replica's release does not send it a second time.
 */
import { createLogger } from '@sts/common';
import { createHit, hitEnvelope, waitFor } from '@sts/testing';
import { createHoldingStore } from './adapters/holding';
import { createPrismaRepository } from './adapters/repository';
import type { Source } from './delivery';
import { Holding, type HoldingOptions } from './hold';
import { disabledEndpoint, useDispatcherBed } from '../test/bed';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('held event claims', () => {
  const bed = useDispatcherBed('dispatcher-held-claims-test');

  it('a held event in flight past its lease is not released again by another replica', async () => {
    const m = await bed.monitor('/held', disabledEndpoint());
    const env = hitEnvelope(m, await createHit(bed.db, m));
    await expect(bed.dispatcher.handle(env)).resolves.toBe('ack');
    expect(await bed.db.heldEvent.count({ where: { deliveryId: env.messageId } })).toBe(1);
    await bed.db.webhookEndpoint.update({ where: { monitorId: m.id }, data: { disabledAt: null } });

    const leaseMs = 1500;
    const sent: string[] = [];
    let finish!: () => void;
    const inFlight = new Promise<void>((r) => (finish = r));
    const replica = (name: string) => {
      // the delivery flow of each replica: "a" sends slowly (longer than the lease)
      const flow = {
        deliver: async (source: Source) => {
          if (source.kind === 'held') sent.push(`${name}:${source.job.deliveryId}`);
          if (name === 'a') await inFlight;
          return 'ack' as const;
        },
      } as unknown as HoldingOptions['flow'];
      return new Holding({
        store: createHoldingStore(bed.db),
        repository: createPrismaRepository(bed.db),
        flow,
        logger: createLogger({ service: 'held-claims-test', level: 'error' }),
        bounds: { days: 3, max: 100 },
        signal: new AbortController().signal,
        now: () => new Date(),
        leaseMs,
      });
    };
    const a = replica('a');
    const b = replica('b');
    void a.releaseNow();
    await waitFor(() => sent.length === 1);
    await sleep(3 * leaseMs);
    await b.releaseNow();
    await b.idle();
    finish();
    await a.idle();
    expect(sent).toEqual([`a:${env.messageId}`]);
    expect(await bed.db.heldEvent.count({ where: { deliveryId: env.messageId } })).toBe(0);
  });

  it("events detected at the same time are released in their monitor's sequence, not in the order they were held", async () => {
    const m = await bed.monitor('/held-order', disabledEndpoint());
    // one poll found three posts: one detectedAt; the dispatchers held them as 3, 1, 2
    const detectedAt = new Date();
    const envs = await bed.sequencedHits(m, 3, 'post', detectedAt);
    for (const i of [2, 0, 1]) await expect(bed.dispatcher.handle(envs[i]!)).resolves.toBe('ack');
    expect(await bed.db.heldEvent.count({ where: { monitorId: m.id } })).toBe(3);
    bed.receiver.requests.length = 0;
    await bed.db.webhookEndpoint.update({
      where: { monitorId: m.id },
      data: { disabledAt: null, consecutiveFailures: 0 },
    });
    await bed.dispatcher.releaseHeld();
    expect(bed.receiver.requests.map((r) => r.headers['x-service-sequence'])).toEqual(['1', '2', '3']);
  });
});
