import type { Channel } from 'amqplib';
import { DEAD_LETTER_EXCHANGE, EXCHANGE, isRoutingKey, type RoutingKey } from './contracts';

/** The suffix of a queue's dead-letter queue: `<queue>.dlq`. */
export const DLQ_SUFFIX = '.dlq';

export function deadLetterQueueName(queue: string): string {
  return `${queue}${DLQ_SUFFIX}`;
}

/** Declares the two exchanges (idempotent): topic `monitor.events` and direct `monitor.events.dlx`, both durable. */
export async function declareExchanges(channel: Channel): Promise<void> {
  await channel.assertExchange(EXCHANGE, 'topic', { durable: true });
  await channel.assertExchange(DEAD_LETTER_EXCHANGE, 'direct', { durable: true });
}

function checkQueueName(queue: string): void {
  if (typeof queue !== 'string' || queue.length === 0) throw new TypeError('queue name must be a non-empty string');
  if (Buffer.byteLength(queue) > 255 - DLQ_SUFFIX.length)
    throw new TypeError(`queue name ${JSON.stringify(queue)} is too long (its DLQ name must fit 255 bytes)`);
  if (queue.startsWith('amq.'))
    throw new TypeError(`queue name ${JSON.stringify(queue)} uses the reserved amq. prefix`);
}

/**
 * Declares (idempotently) a consumer queue and its dead-letter queue, and binds the queue to
 * `monitor.events` with the given routing keys:
 * - `<queue>`: durable, `x-dead-letter-exchange: monitor.events.dlx`, `x-dead-letter-routing-key: <queue>`;
 * - `<queue>.dlq`: durable, bound to `monitor.events.dlx` with routing key `<queue>`.
 * Also declares the exchanges, so another internal service can call this on its own channel.
 */
export async function declareQueue(channel: Channel, queue: string, bindings: RoutingKey[]): Promise<void> {
  checkQueueName(queue);
  if (!Array.isArray(bindings) || bindings.length === 0)
    throw new TypeError('bindings must name at least one routing key');
  for (const key of bindings) {
    if (!isRoutingKey(key)) throw new TypeError(`unknown routing key ${JSON.stringify(key)}`);
  }
  await declareExchanges(channel);
  const dlq = deadLetterQueueName(queue);
  await channel.assertQueue(dlq, { durable: true });
  await channel.bindQueue(dlq, DEAD_LETTER_EXCHANGE, queue);
  await channel.assertQueue(queue, {
    durable: true,
    arguments: { 'x-dead-letter-exchange': DEAD_LETTER_EXCHANGE, 'x-dead-letter-routing-key': queue },
  });
  for (const key of new Set(bindings)) await channel.bindQueue(queue, EXCHANGE, key);
}
