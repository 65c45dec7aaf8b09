/**
 * The event's sequence on the wire (docs/webhooks.md "Sequence"), against a real PostgreSQL and
 * HTTPS receiver: a native delivery carries it in the body and in X-Service-Sequence, a redelivery
 * of a hit or of a profile change carries the same number (read from where the event is kept),
 * and Discord, Slack and the test event carry no header.
 */
import { randomUUID } from 'node:crypto';
import { monitorHitPayload, monitorRef, type Envelope, type MonitorProfileChangedEvent } from '@sts/messaging';
import {
  createMonitor,
  redeliverEnvelope,
  testEnvelope,
  type MonitorFixture,
  type ReceivedRequest,
} from '@sts/testing';
import { useDispatcherBed } from '../test/bed';

describe('the sequence of a delivered event', () => {
  const bed = useDispatcherBed('sequence-test', { routeToReceiver: ['discord.com'] });

  /** a hit stored with `sequence`, and its monitor.hit message as the relay publishes it */
  async function sequencedHit(monitor: MonitorFixture, sequence: number): Promise<Envelope<'monitor.hit'>> {
    const createdAt = new Date(Date.now() - 5000);
    const detectedAt = new Date();
    const tweetId = String(1_000_000 + sequence);
    const row = await bed.db.hit.create({
      data: {
        monitorId: monitor.id,
        tweetId,
        tweetText: 'launch day',
        tweetAuthorId: '1',
        tweetAuthorUsername: monitor.targetUsername,
        tweetCreatedAt: createdAt,
        detectedAt,
        sequence: BigInt(sequence),
      },
    });
    const tweet = {
      id: tweetId,
      text: 'launch day',
      authorUsername: monitor.targetUsername,
      createdAt: createdAt.toISOString(),
    };
    return {
      routingKey: 'monitor.hit',
      messageId: randomUUID(),
      payload: monitorHitPayload(monitorRef(monitor), tweet, detectedAt.toISOString(), sequence),
      headers: { accountId: bed.accountId, hitId: row.id },
      redelivered: false,
      publishedAt: new Date(),
    };
  }

  const bodyOf = (r: ReceivedRequest) => JSON.parse(r.rawBody.toString('utf8')) as { sequence?: number };

  async function lastAttemptId(monitorId: string): Promise<string> {
    const [a] = await bed.db.deliveryAttempt.findMany({
      where: { monitorId },
      orderBy: { createdAt: 'desc' },
      take: 1,
    });
    return a!.id;
  }

  it('a native hit carries its sequence in the body and X-Service-Sequence, the same on a redelivery', async () => {
    const monitor = await bed.monitor('/native');
    const env = await sequencedHit(monitor, 41);
    bed.receiver.setResponder(() => ({ status: 503 }));
    await expect(bed.dispatcher.handle(env)).resolves.toBe('ack');
    bed.receiver.setResponder(() => ({ status: 200 }));
    await expect(
      bed.dispatcher.handle(redeliverEnvelope(bed.accountId, await lastAttemptId(monitor.id))),
    ).resolves.toBe('ack');
    expect(bed.receiver.requests).toHaveLength(2);
    for (const r of bed.receiver.requests) {
      expect(r.headers['x-service-sequence']).toBe('41');
      expect(r.headers['x-service-delivery']).toBe(env.messageId);
      expect(bodyOf(r).sequence).toBe(41);
    }
    // the sequence is the body's last field, after the documented ones
    expect(Object.keys(bodyOf(bed.receiver.requests[1]!))).toEqual([
      'event',
      'monitor',
      'tweet',
      'detectedAt',
      'sequence',
    ]);
  });

  it('a profile change keeps its stored sequence on a redelivery', async () => {
    const monitor = await bed.monitor('/native');
    const eventId = randomUUID();
    const profile = { username: 'NASA', name: 'NASA', description: null, profileImageUrl: null, verified: true };
    const payload: MonitorProfileChangedEvent = {
      event: 'monitor.profile_changed',
      monitor: monitorRef(monitor),
      userId: '11348282',
      changed: ['name'],
      before: { ...profile, name: 'NASA old' },
      after: profile,
      detectedAt: new Date().toISOString(),
      sequence: 7,
    };
    await bed.db.monitorEvent.create({
      data: { id: eventId, monitorId: monitor.id, kind: payload.event, payload, sequence: 7n },
    });
    const env: Envelope<'monitor.profile_changed'> = {
      routingKey: 'monitor.profile_changed',
      messageId: randomUUID(),
      payload,
      headers: { accountId: bed.accountId, eventId },
      redelivered: false,
      publishedAt: new Date(),
    };
    await expect(bed.dispatcher.handle(env)).resolves.toBe('ack');
    await expect(
      bed.dispatcher.handle(redeliverEnvelope(bed.accountId, await lastAttemptId(monitor.id))),
    ).resolves.toBe('ack');
    expect(bed.receiver.requests.map((r) => [r.headers['x-service-sequence'], bodyOf(r).sequence])).toEqual([
      ['7', 7],
      ['7', 7],
    ]);
  });

  it('Discord bodies and the test event carry no X-Service-Sequence', async () => {
    const discord = await createMonitor(bed.db, bed.box, {
      accountId: bed.accountId,
      url: 'https://discord.com/api/webhooks/1/seq-token',
    });
    await expect(bed.dispatcher.handle(await sequencedHit(discord, 3))).resolves.toBe('ack');
    const native = await bed.monitor('/native');
    await expect(bed.dispatcher.handle(testEnvelope(native))).resolves.toBe('ack');
    expect(bed.receiver.requests).toHaveLength(2);
    for (const r of bed.receiver.requests) expect(r.headers['x-service-sequence']).toBeUndefined();
  });
});
