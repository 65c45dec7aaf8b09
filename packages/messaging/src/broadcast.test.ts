/**
 * consume({ mode: 'broadcast' }): every process gets every message on an exclusive queue of its
 * own (the gateways' apikey.changed), and onSubscribed runs once subscribed. Real RabbitMQ (a
 * vhost of this test).
 */
import { createHash } from 'node:crypto';
import { capturingLogger, createTestVhost, waitFor } from '@sts/testing';
import { AmqpClient } from './client';
import type { ApiKeyChangedEvent } from './contracts';

it('delivers every message to every broadcast subscriber, each on its own queue', async () => {
  const vhost = await createTestVhost();
  const { logger } = capturingLogger('broadcast-test');
  const clients = [1, 2, 3].map((i) => new AmqpClient({ url: vhost.url, logger, name: `broadcast-${i}` }));
  const got: string[][] = [[], []];
  let subscribed = 0;
  try {
    await Promise.all(clients.map((c) => c.start()));
    for (const [i, c] of clients.slice(0, 2).entries())
      await c.consume({
        queue: 'gateway.apikeys',
        mode: 'broadcast',
        bindings: ['apikey.changed'],
        onSubscribed: () => void subscribed++,
        handler: (env) => {
          got[i]!.push(env.payload.keyHash);
          return Promise.resolve('ack');
        },
      });
    expect(subscribed).toBe(2);
    const hashes = ['a', 'b', 'c'].map((s) => createHash('sha256').update(s).digest('hex'));
    for (const keyHash of hashes) {
      const payload: ApiKeyChangedEvent = { keyHash, change: 'created', occurredAt: new Date().toISOString() };
      await clients[2]!.publish('apikey.changed', payload, { messageId: keyHash, headers: { accountId: 'acc' } });
    }
    await waitFor(() => got.every((g) => g.length === 3));
    expect(got).toEqual([hashes, hashes]);
  } finally {
    for (const c of clients) await c.stop();
  }
});
