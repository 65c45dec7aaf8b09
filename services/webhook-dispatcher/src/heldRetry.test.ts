/**
 * A retry that falls due while its endpoint is disabled is held, not skipped, on the real broker
 * and database: the dispatcher runs in this process, consuming from its own RabbitMQ vhost, its
 * due poller and hold release running as in production (short intervals). A hit published to the
 * broker fails (503) under `standard`, the endpoint is disabled (as endpoint health does), its
 * retry falls due → held with its attempt number (no `skipped` row, the documented log line), the
 * first attempt's `next_attempt_at` cleared;
 * the endpoint enabled again → the retry goes out once, as attempt 2, with the same webhook-id,
 * X-Service-Delivery and sequence.
 */
import { randomUUID } from 'node:crypto';
import { PassThrough } from 'node:stream';
import { createLogger } from '@sts/common';
import type { Db } from '@sts/db';
import { AmqpClient, monitorHitPayload, monitorRef } from '@sts/messaging';
import { verify } from '@sts/signing';
import {
  createAccount,
  createMonitor,
  startHttpsReceiver,
  waitFor,
  type HttpsReceiver,
  type MonitorFixture,
} from '@sts/testing';
import { createDispatcher, type Dispatcher } from './app';
import { createHoldingStore } from './adapters/holding';
import { createPrismaRepository } from './adapters/repository';
import { openBrokerBed, type BrokerBed } from '../test/brokerBed';

const DAY = 86_400_000;

describe('a retry due while its endpoint is disabled', () => {
  const quiet = createLogger({ service: 'held-retry-test', level: 'error' });
  const logLines: string[] = [];
  let bed: BrokerBed;
  let db: Db;
  let consumer: AmqpClient;
  let dispatcher: Dispatcher;
  let receiver: HttpsReceiver;

  beforeAll(async () => {
    bed = await openBrokerBed({ poolSize: 6, logger: quiet, name: 'held-retry-publisher' });
    db = bed.db;
    receiver = await startHttpsReceiver();
    consumer = new AmqpClient({ url: bed.amqpUrl, logger: quiet, name: 'held-retry-dispatcher' });
    await consumer.start();
    const stream = new PassThrough();
    stream.on('data', (chunk: Buffer) => logLines.push(...chunk.toString('utf8').split('\n').filter(Boolean)));
    dispatcher = createDispatcher({
      repository: createPrismaRepository(db),
      holding: createHoldingStore(db),
      messaging: consumer,
      logger: createLogger({ service: 'held-retry-test', level: 'info', stream }),
      secretsKey: bed.key,
      allowPrivateHosts: ['localhost'],
      timeoutMs: 2000,
      duePollMs: 100,
      holdSweepMs: 100,
      shutdownGraceMs: 500,
    });
    await dispatcher.start();
  });

  afterAll(async () => {
    await Promise.all([dispatcher.stop(), consumer.stop()]);
    dispatcher.close();
    await receiver.close();
    await bed.close();
  });

  /** a hit with sequence `sequence`, published to the broker as the outbox relay does; its message id */
  async function publishHit(m: MonitorFixture, sequence: number): Promise<string> {
    const detectedAt = new Date();
    const tweet = { id: String(9_000_000 + sequence), text: 'retry me #launch', authorUsername: m.targetUsername };
    const createdAt = new Date(detectedAt.getTime() - 1000);
    const row = await db.hit.create({
      data: {
        monitorId: m.id,
        tweetId: tweet.id,
        tweetText: tweet.text,
        tweetAuthorId: '11348282',
        tweetAuthorUsername: m.targetUsername,
        tweetCreatedAt: createdAt,
        detectedAt,
        sequence: BigInt(sequence),
      },
      select: { id: true },
    });
    const payload = monitorHitPayload(
      monitorRef(m),
      { ...tweet, createdAt: createdAt.toISOString() },
      detectedAt.toISOString(),
      sequence,
    );
    const messageId = randomUUID();
    await bed.publisher.publish('monitor.hit', payload, {
      messageId,
      headers: { accountId: m.accountId, hitId: row.id },
    });
    return messageId;
  }

  it('is held with its attempt number, not skipped; once enabled it goes out once, same ids and sequence', async () => {
    const account = await createAccount(db, 'starter');
    const m = await createMonitor(db, bed.box, { accountId: account.id, url: `${receiver.url}/held-retry` });
    await db.webhookEndpoint.update({ where: { monitorId: m.id }, data: { retryPolicy: 'standard' } });
    receiver.setResponder(() => ({ status: 503 }));

    const deliveryId = await publishHit(m, 41);
    const due = await waitFor(() => db.webhookDeliveryDue.findUnique({ where: { deliveryId } }), 30_000);
    expect(due).toMatchObject({ attempt: 2 });
    expect(receiver.requests).toHaveLength(1);

    // endpoint health disabled it meanwhile (a failing run older than 3 days)
    await db.webhookEndpoint.update({
      where: { monitorId: m.id },
      data: { consecutiveFailures: 6, firstFailureAt: new Date(Date.now() - 3 * DAY - 60_000), disabledAt: new Date() },
    });
    // the clock reaches the retry
    await db.webhookDeliveryDue.update({ where: { deliveryId }, data: { dueAt: new Date(Date.now() - 1000) } });

    const held = await waitFor(() => db.heldEvent.findUnique({ where: { deliveryId } }), 30_000);
    expect(held).toMatchObject({ attempt: 2, monitorId: m.id, event: 'monitor.hit' });
    expect(await db.webhookDeliveryDue.findUnique({ where: { deliveryId } })).toBeNull();
    expect(await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId: m.id } })).toMatchObject({ heldCount: 1 });
    // not sent, not logged as skipped: the log has the first attempt only, no longer naming a
    // time for the next (it passed); the delivery log shows it `held` (held_events, attempt 2)
    const logged = await db.deliveryAttempt.findMany({ where: { deliveryId }, orderBy: { createdAt: 'asc' } });
    expect(logged.map((a) => [a.outcome, a.attempt, a.nextAttemptAt])).toEqual([['failed', 1, null]]);
    expect(receiver.requests).toHaveLength(1);
    const line = logLines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .find((l) => l.deliveryId === deliveryId && /retry held/.test(String(l.message)));
    expect(line).toMatchObject({ level: 'info', attempt: 2, monitorId: m.id });

    // enabled again (what `webhook enable` writes), the receiver works: the retry goes out once
    receiver.setResponder(() => ({ status: 200 }));
    await db.webhookEndpoint.update({
      where: { monitorId: m.id },
      data: { consecutiveFailures: 0, firstFailureAt: null, disabledAt: null },
    });
    await waitFor(
      async () => (await db.webhookEndpoint.findUniqueOrThrow({ where: { monitorId: m.id } })).heldCount === 0,
      30_000,
    );
    await waitFor(() => receiver.requests.length >= 2, 30_000);

    const after = await db.deliveryAttempt.findMany({ where: { deliveryId }, orderBy: { createdAt: 'asc' } });
    expect(after.map((a) => [a.outcome, a.attempt])).toEqual([
      ['failed', 1],
      ['delivered', 2],
    ]);
    expect(await db.heldEvent.count({ where: { deliveryId } })).toBe(0);
    expect(await db.webhookDeliveryDue.count({ where: { deliveryId } })).toBe(0);
    // the due poller and the release keep running: nothing goes out again
    await dispatcher.deliverDue();
    await dispatcher.releaseHeld();
    expect(receiver.requests).toHaveLength(2);
    for (const req of receiver.requests) {
      expect(req.headers['x-service-delivery']).toBe(deliveryId);
      expect(req.headers['webhook-id']).toBe(deliveryId);
      expect(req.headers['x-service-sequence']).toBe('41');
      expect((JSON.parse(req.rawBody.toString('utf8')) as { sequence: number }).sequence).toBe(41);
      expect(() => verify({ secret: m.secret!, body: req.rawBody, headers: req.headers })).not.toThrow();
    }
  });
});
