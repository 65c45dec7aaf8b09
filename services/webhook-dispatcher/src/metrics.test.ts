/**
 * The delivery steps' histograms (`webhook_dispatcher_prepare_seconds`, `…_lane_wait_seconds`,
 * `…_record_seconds`) count each delivery under where it came from and how its row was written,
 * on a real PostgreSQL database and HTTPS receiver.
 */
import { randomBytes } from 'node:crypto';
import client from 'prom-client';
import { createSecretBox } from '@sts/core';
import { createAccount, createHit, createMonitor, hitEnvelope } from '@sts/testing';
import { startInProcessDispatcher, type InProcessDispatcher } from '../test/dispatcher';

const KEY = randomBytes(32).toString('base64');
const box = createSecretBox(KEY);

describe('delivery step metrics', () => {
  let harness: InProcessDispatcher;
  const registry = new client.Registry();

  beforeAll(async () => {
    harness = await startInProcessDispatcher('dispatcher-metrics-test', KEY, { registry });
  });

  afterAll(() => harness.close());

  /** observations of a histogram with `label` = `value` so far */
  async function count(name: string, label: string, value: string): Promise<number> {
    const metric = await registry.getSingleMetric(name)?.get();
    const sample = metric?.values.find(
      (v) =>
        (v as { metricName?: string }).metricName === `${name}_count` &&
        (v.labels as Record<string, string>)[label] === value,
    );
    return sample?.value ?? 0;
  }

  it('a failed first attempt and its retry: prepare and lane wait per source, the rows written with their due row', async () => {
    const { db, receiver, dispatcher } = harness;
    const accountId = (await createAccount(db, 'starter')).id;
    const m = await createMonitor(db, box, { accountId, url: `${receiver.url}/retrying` });
    await db.webhookEndpoint.update({ where: { monitorId: m.id }, data: { retryPolicy: 'standard' } });
    receiver.setResponder(() => ({ status: 503 }));
    await expect(dispatcher.handle(hitEnvelope(m, await createHit(db, m)))).resolves.toBe('ack');
    expect(await count('webhook_dispatcher_prepare_seconds', 'source', 'message')).toBe(1);
    expect(await count('webhook_dispatcher_lane_wait_seconds', 'source', 'message')).toBe(1);
    expect(await count('webhook_dispatcher_record_seconds', 'write', 'with_due')).toBe(1);

    receiver.setResponder(() => ({ status: 200 }));
    await db.webhookDeliveryDue.updateMany({
      where: { monitorId: m.id },
      data: { dueAt: new Date(Date.now() - 1000) },
    });
    await expect(dispatcher.deliverDue()).resolves.toBe(1);
    expect(await count('webhook_dispatcher_prepare_seconds', 'source', 'due')).toBe(1);
    expect(await count('webhook_dispatcher_lane_wait_seconds', 'source', 'due')).toBe(1);
    expect(await count('webhook_dispatcher_record_seconds', 'write', 'with_due')).toBe(2);
    expect(await count('webhook_dispatcher_record_seconds', 'write', 'batched')).toBe(0);

    // a webhook without a schedule: its row shares the batched insert
    const plain = await createMonitor(db, box, { accountId, url: `${receiver.url}/plain` });
    await expect(dispatcher.handle(hitEnvelope(plain, await createHit(db, plain)))).resolves.toBe('ack');
    expect(await count('webhook_dispatcher_record_seconds', 'write', 'batched')).toBe(1);
    expect(await count('webhook_dispatcher_prepare_seconds', 'source', 'message')).toBe(2);
  });
});
