/**
 * Partitioned, single-active-consumer, bounded queues (the poller's record queues): a message
 * published on partition k reaches only partition k's queue; with `x-single-active-consumer`
 * one of several consumers gets the queue's messages, in order, and cancel() hands it to the
 * next; a full queue (`x-max-length`, reject-publish) nacks the publish. Real RabbitMQ.
 */
import { capturingLogger, createTestVhost, waitFor } from '@sts/testing';
import { AmqpClient, PublishError } from './client';
import type { XStreamPostEvent } from './contracts';

const post = (id: number, target = 'alice'): XStreamPostEvent => ({
  target,
  tweet: {
    id: String(id),
    text: `post ${id}`,
    authorId: '1',
    authorUsername: target,
    authorName: target,
    createdAt: new Date().toISOString(),
    lang: null,
  },
});

const args = { 'x-single-active-consumer': true, 'x-max-length': 3 };

describe('partitioned single-active-consumer queues', () => {
  let clients: AmqpClient[] = [];
  afterEach(async () => {
    for (const c of clients) await c.stop();
    clients = [];
  });

  async function start(n: number): Promise<AmqpClient[]> {
    const vhost = await createTestVhost();
    const { logger } = capturingLogger('partitions-test');
    clients = Array.from({ length: n }, (_, i) => new AmqpClient({ url: vhost.url, logger, name: `p-${i}` }));
    await Promise.all(clients.map((c) => c.start()));
    return clients;
  }

  it('routes by partition, delivers a queue to one consumer in order, and hands it over on cancel', async () => {
    const [a, b, pub] = await start(3);
    const got: Record<string, string[]> = { a: [], b: [] };
    const consume = (c: AmqpClient, name: 'a' | 'b', k: number) =>
      c.consume({
        queue: `rec.${k}`,
        bindings: ['x.stream.post'],
        partition: k,
        queueArguments: { ...args, 'x-max-length': 100 },
        handler: (env) => {
          got[name]!.push(`${k}:${env.payload.tweet.id}`);
          return Promise.resolve('ack');
        },
      });
    for (const k of [0, 1]) await consume(a!, 'a', k);
    for (const k of [0, 1]) await consume(b!, 'b', k);
    // a single-active-consumer queue counts its active consumer only
    expect(await a!.queueStats('rec.0')).toEqual({ messages: 0, consumers: 1 });
    for (let i = 1; i <= 5; i++)
      await pub!.publish('x.stream.post', post(i), {
        messageId: `m${i}`,
        headers: {},
        partition: 1,
        requireRoute: true,
      });
    await waitFor(() => got.a!.length === 5);
    // the first subscriber is the active one; partition 0 got nothing
    expect(got).toEqual({ a: ['1:1', '1:2', '1:3', '1:4', '1:5'], b: [] });
    await a!.cancel('rec.1');
    for (let i = 6; i <= 7; i++)
      await pub!.publish('x.stream.post', post(i), {
        messageId: `m${i}`,
        headers: {},
        partition: 1,
        requireRoute: true,
      });
    await waitFor(() => got.b!.length === 2);
    expect(got.b).toEqual(['1:6', '1:7']);
    // a partition nobody declared is unroutable
    await expect(
      pub!.publish('x.stream.post', post(8), { messageId: 'm8', headers: {}, partition: 5, requireRoute: true }),
    ).rejects.toMatchObject({ code: 'UNROUTABLE' });
  });

  it('a full queue nacks the publish (reject-publish): back-pressure, nothing dropped', async () => {
    const [a, pub] = await start(2);
    await a!.consume({
      queue: 'full.0',
      bindings: ['x.stream.post'],
      partition: 0,
      queueArguments: args,
      handler: () => Promise.resolve('ack'),
    });
    await a!.cancel('full.0');
    // a quorum queue notices it is over its limit on the enqueue that passes it: the next is refused
    const outcomes: string[] = [];
    for (let i = 1; i <= 8; i++)
      outcomes.push(
        await pub!.publish('x.stream.post', post(i), { messageId: `f${i}`, headers: {}, partition: 0 }).then(
          () => 'ok',
          (err: unknown) => (err instanceof PublishError ? err.code : String(err)),
        ),
      );
    const accepted = outcomes.filter((o) => o === 'ok').length;
    expect(outcomes.slice(accepted).every((o) => o === 'NACKED')).toBe(true);
    expect(accepted).toBeGreaterThanOrEqual(3);
    expect(accepted).toBeLessThanOrEqual(4);
    expect((await a!.queueStats('full.0')).messages).toBe(accepted);
  });
});
