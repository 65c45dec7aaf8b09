/**
 * The release of held events across replicas, on a real PostgreSQL database: a held event being
 * sent by one dispatcher stays its own while the send is in flight, past the claim's lease, so
 * another replica's release does not send it a second time.
 */
import { randomBytes } from 'node:crypto';
import { createLogger } from '@sts/common';
import { createSecretBox } from '@sts/core';
import type { Db } from '@sts/db';
import { createAccount, createHit, createMonitor, hitEnvelope, waitFor, type HttpsReceiver } from '@sts/testing';
import type { Dispatcher } from './app';
import { createHoldingStore } from './adapters/holding';
import { createPrismaRepository } from './adapters/repository';
import type { Source } from './delivery';
import { Holding, type HoldingOptions } from './hold';
import { startInProcessDispatcher, type InProcessDispatcher } from '../test/dispatcher';

const KEY = randomBytes(32).toString('base64');
const box = createSecretBox(KEY);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('held event claims', () => {
  let harness: InProcessDispatcher;
  let db: Db;
  let receiver: HttpsReceiver;
  let dispatcher: Dispatcher;

  beforeAll(async () => {
    harness = await startInProcessDispatcher('dispatcher-held-claims-test', KEY);
    ({ db, receiver, dispatcher } = harness);
  });

  afterAll(() => harness.close());

  it('a held event in flight past its lease is not released again by another replica', async () => {
    const accountId = (await createAccount(db, 'starter')).id;
    const m = await createMonitor(db, box, { accountId, url: `${receiver.url}/held` });
    await db.webhookEndpoint.update({
      where: { monitorId: m.id },
      data: { consecutiveFailures: 6, firstFailureAt: new Date(), disabledAt: new Date() },
    });
    const env = hitEnvelope(m, await createHit(db, m));
    await expect(dispatcher.handle(env)).resolves.toBe('ack');
    expect(await db.heldEvent.count({ where: { deliveryId: env.messageId } })).toBe(1);
    await db.webhookEndpoint.update({ where: { monitorId: m.id }, data: { disabledAt: null } });

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
        store: createHoldingStore(db),
        repository: createPrismaRepository(db),
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
    expect(await db.heldEvent.count({ where: { deliveryId: env.messageId } })).toBe(0);
  });

  it("events detected at the same time are released in their monitor's sequence, not in the order they were held", async () => {
    const accountId = (await createAccount(db, 'starter')).id;
    const m = await createMonitor(db, box, { accountId, url: `${receiver.url}/held-order` });
    await db.webhookEndpoint.update({
      where: { monitorId: m.id },
      data: { consecutiveFailures: 6, firstFailureAt: new Date(), disabledAt: new Date() },
    });
    // one poll found three posts: one detectedAt; the dispatchers held them as 3, 1, 2
    const detectedAt = new Date();
    const envs: ReturnType<typeof hitEnvelope>[] = [];
    for (let sequence = 1; sequence <= 3; sequence++) {
      const env = hitEnvelope(m, await createHit(db, m, `post ${sequence} #launch`, detectedAt));
      envs.push({ ...env, payload: { ...env.payload, sequence } });
    }
    for (const i of [2, 0, 1]) await expect(dispatcher.handle(envs[i]!)).resolves.toBe('ack');
    expect(await db.heldEvent.count({ where: { monitorId: m.id } })).toBe(3);
    receiver.requests.length = 0;
    await db.webhookEndpoint.update({ where: { monitorId: m.id }, data: { disabledAt: null, consecutiveFailures: 0 } });
    await dispatcher.releaseHeld();
    expect(receiver.requests.map((r) => r.headers['x-service-sequence'])).toEqual(['1', '2', '3']);
  });
});
