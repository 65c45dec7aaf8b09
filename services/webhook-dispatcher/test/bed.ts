/**
 * The in-process test bed as a describe block's hooks: `useDispatcherBed()` starts a dispatcher on
 * its own test database with an HTTPS receiver (startInProcessDispatcher) and a starter account
 * before the block's tests, closes it after them, and before each test empties the receiver's
 * log, makes it answer 200 again and clears the due deliveries (what an earlier test left waiting
 * would be claimed with this test's rows). The fields are set once the block's beforeAll ran.
 */
import { randomBytes } from 'node:crypto';
import { createSecretBox, type SecretBox } from '@sts/core';
import type { Db } from '@sts/db';
import { createAccount, createHit, createMonitor, hitEnvelope, type MonitorFixture } from '@sts/testing';
import { startInProcessDispatcher, type InProcessDispatcher, type InProcessOptions } from './dispatcher';

type EndpointColumns = Parameters<Db['webhookEndpoint']['update']>[0]['data'];

export interface DispatcherBed extends InProcessDispatcher {
  /** SECRETS_ENCRYPTION_KEY, and the box that seals monitors' secrets with it */
  key: string;
  box: SecretBox;
  /** a starter account, created at start */
  accountId: string;
  /** a monitor of the bed's account delivering to the receiver's `path`, its endpoint given `endpoint` */
  monitor(path: string, endpoint?: EndpointColumns): Promise<MonitorFixture>;
  /** the clock reaches the due rows of a monitor */
  makeDue(monitorId: string): Promise<unknown>;
  /** `n` hits of `m` as the relay publishes them, carrying the sequences 1..n in order */
  sequencedHits(
    m: MonitorFixture,
    n: number,
    label: string,
    detectedAt?: Date,
  ): Promise<ReturnType<typeof hitEnvelope>[]>;
}

export interface BedOptions extends InProcessOptions {
  /** the body of the receiver's answer reset before each test (none by default) */
  replyBody?: string;
}

/** The endpoint columns of a webhook disabled after failing (what health writes). */
export const disabledEndpoint = (): EndpointColumns => ({
  consecutiveFailures: 6,
  firstFailureAt: new Date(),
  disabledAt: new Date(),
});

export function useDispatcherBed(service: string, opts: BedOptions = {}): DispatcherBed {
  const key = randomBytes(32).toString('base64');
  const box = createSecretBox(key);
  const bed = {
    key,
    box,
    async monitor(path, endpoint) {
      const m = await createMonitor(bed.db, box, { accountId: bed.accountId, url: `${bed.receiver.url}${path}` });
      if (endpoint) await bed.db.webhookEndpoint.update({ where: { monitorId: m.id }, data: endpoint });
      return m;
    },
    makeDue: (monitorId) =>
      bed.db.webhookDeliveryDue.updateMany({ where: { monitorId }, data: { dueAt: new Date(Date.now() - 1000) } }),
    async sequencedHits(m, n, label, detectedAt) {
      const envs: ReturnType<typeof hitEnvelope>[] = [];
      for (let sequence = 1; sequence <= n; sequence++) {
        const env = hitEnvelope(m, await createHit(bed.db, m, `${label} ${sequence} #launch`, detectedAt));
        envs.push({ ...env, payload: { ...env.payload, sequence } });
      }
      return envs;
    },
  } as DispatcherBed;

  beforeAll(async () => {
    const harness = await startInProcessDispatcher(service, key, opts);
    Object.assign(bed, harness, { accountId: (await createAccount(harness.db, 'starter')).id });
  });
  afterAll(() => bed.close());
  beforeEach(async () => {
    bed.receiver.requests.length = 0;
    const body = opts.replyBody;
    bed.receiver.setResponder(() => (body === undefined ? { status: 200 } : { status: 200, body }));
    await bed.db.webhookDeliveryDue.deleteMany({});
  });
  return bed;
}
