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
});
