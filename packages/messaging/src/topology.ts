import type { Channel } from 'amqplib';
import { DEAD_LETTER_EXCHANGE, EXCHANGE, isRoutingKey, wireRoutingKey, type RoutingKey } from './contracts';

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
 * Queue arguments of every consumer queue and its DLQ (RabbitMQ 3.10+). They are part of a
 * queue's identity: every process must declare the same values, or RabbitMQ refuses the
 * declaration with PRECONDITION_FAILED. Operators lower them per deployment with a policy
 * (`delivery-limit`, `max-length`, `max-length-bytes`): RabbitMQ applies the smaller of the
 * policy and the argument, and a policy changes a running queue without a redeclaration.
 */
export const QUEUE_TYPE = 'quorum';
/**
 * Deliveries of one message (first + returns: nack/reject with requeue, a consumer's channel or
 * connection lost) before the quorum queue dead-letters it with reason `delivery_limit`. The
 * client's own rule (a throw requeues a first delivery and dead-letters a redelivery) normally
 * ends a poison message at the 2nd delivery; this limit catches what that rule cannot see, such
 * as a message that crashes the consumer process each time. 20 leaves room for returns caused
 * by reconnects and deliberate requeues (deferral) before a message is given up.
 */
export const DELIVERY_LIMIT = 20;
/** Dead letters kept per DLQ; beyond that the OLDEST are dropped (`x-overflow: drop-head`). */
export const DLQ_MAX_LENGTH = 10_000;
/** ... and at most this many body bytes (64 MiB), oldest dropped first. */
export const DLQ_MAX_LENGTH_BYTES = 64 * 1024 * 1024;

/** The arguments `declareQueue` gives `<queue>` (exported for other languages' declarations and for tests). */
export function consumerQueueArguments(queue: string): Record<string, string | number> {
  return {
    'x-queue-type': QUEUE_TYPE,
    'x-delivery-limit': DELIVERY_LIMIT,
    'x-dead-letter-exchange': DEAD_LETTER_EXCHANGE,
    'x-dead-letter-routing-key': queue,
    // at-least-once dead-lettering: a dead letter leaves the queue only once the DLQ confirmed it
    // (it needs reject-publish overflow, which only matters if a policy sets a max length)
    'x-dead-letter-strategy': 'at-least-once',
    'x-overflow': 'reject-publish',
  };
}

/**
 * Deliveries of one dead letter before a quorum DLQ would drop it (a DLQ has no dead-letter
 * exchange of its own). `dlq list` returns what it looks at (nack with requeue), which counts as
 * a delivery; RabbitMQ 4.0 would otherwise apply its default limit of 20, so this is set high.
 */
export const DLQ_DELIVERY_LIMIT = 1_000_000;

/**
 * The arguments `declareQueue` gives `<queue>.dlq`: a QUORUM queue, replicated over the
 * cluster's nodes like the live queue, so a node loss loses no dead letter (quorum queues need
 * three RabbitMQ nodes to tolerate one failure: k8s/README.md, "RabbitMQ"). Bounded, oldest dropped
 * first. A classic DLQ of an earlier version is moved by `npm run cli -- queues migrate`.
 */
export function deadLetterQueueArguments(): Record<string, string | number> {
  return {
    'x-queue-type': QUEUE_TYPE,
    'x-delivery-limit': DLQ_DELIVERY_LIMIT,
    'x-max-length': DLQ_MAX_LENGTH,
    'x-max-length-bytes': DLQ_MAX_LENGTH_BYTES,
    'x-overflow': 'drop-head',
  };
}

/**
 * The dispatcher's parking (services/webhook-dispatcher/src/adapters/parking.ts): `<queue>.defer`
 * (direct exchange) → `<queue>.parked` (messages expire after the delay) → `<queue>.return`
 * (direct exchange) → `<queue>`.
 */
export function parkingNames(queue: string): { defer: string; parked: string; back: string } {
  return { defer: `${queue}.defer`, parked: `${queue}.parked`, back: `${queue}.return` };
}

/**
 * `<queue>.parked` is a quorum queue too (RabbitMQ 3.10+: message TTL and at-least-once
 * dead-lettering in quorum queues): an expired message leaves only once `<queue>` took it.
 */
export function parkedQueueArguments(queue: string): Record<string, string> {
  return {
    'x-queue-type': QUEUE_TYPE,
    'x-dead-letter-exchange': parkingNames(queue).back,
    'x-dead-letter-strategy': 'at-least-once',
    'x-overflow': 'reject-publish',
  };
}

/**
 * Declares (idempotently) a consumer queue and its dead-letter queue, and binds the queue to
 * `monitor.events` with the given routing keys:
 * - `<queue>`: durable quorum queue with `consumerQueueArguments` (delivery limit, dead letters to
 *   `monitor.events.dlx` with routing key `<queue>`, at-least-once);
 * - `<queue>.dlq`: durable quorum queue bounded by `deadLetterQueueArguments`, bound to
 *   `monitor.events.dlx` with routing key `<queue>`.
 * Also declares the exchanges, so another internal service can call this on its own channel.
 * A classic queue of the same name from an earlier version makes this fail with
 * PRECONDITION_FAILED (inequivalent arg 'x-queue-type'): move it with `migrateToQuorum` (dlq.ts,
 * `npm run cli -- queues migrate`).
 */
export async function declareQueue(
  channel: Channel,
  queue: string,
  bindings: RoutingKey[],
  extra: { partition?: number; queueArguments?: Record<string, string | number | boolean> } = {},
): Promise<void> {
  checkQueueName(queue);
  if (!Array.isArray(bindings) || bindings.length === 0)
    throw new TypeError('bindings must name at least one routing key');
  for (const key of bindings) {
    if (!isRoutingKey(key)) throw new TypeError(`unknown routing key ${JSON.stringify(key)}`);
  }
  await declareExchanges(channel);
  const dlq = deadLetterQueueName(queue);
  await channel.assertQueue(dlq, { durable: true, arguments: deadLetterQueueArguments() });
  await channel.bindQueue(dlq, DEAD_LETTER_EXCHANGE, queue);
  const args = { ...consumerQueueArguments(queue), ...extra.queueArguments };
  await channel.assertQueue(queue, { durable: true, arguments: args });
  for (const key of new Set(bindings)) await channel.bindQueue(queue, EXCHANGE, wireRoutingKey(key, extra.partition));
}
