/**
 * The AMQP client's consumers: one channel per consumer (manual ack, prefetch), each message
 * validated against its contract before the handler sees it, and the handler's outcome turned
 * into ack / dead-letter / requeue on the channel the message came from. Consumers are set up on
 * every new connection (the connection's `setup` hook) and forget their channel when it is lost.
 */
import { randomUUID } from 'node:crypto';
import { endSpan, SpanKind, startSpan, tracingEnabled, withSpan } from '@sts/telemetry';
import type { Channel, ConsumeMessage } from 'amqplib';
import type { Logger } from '@sts/common';
import {
  ContractError,
  EXCHANGE,
  fromAmqpHeaders,
  isRoutingKey,
  parseHeaders,
  parsePayload,
  type Envelope,
  type EnvelopeOf,
  type RoutingKey,
} from './contracts';
import type { AmqpConnection, ConnectionContext } from './connection';
import { errorMessage } from '@sts/core';
import { deferred, type Deferred } from './deferred';
import { declareExchanges, declareQueue } from './topology';

export type ConsumeOutcome = 'ack' | 'dead-letter' | 'requeue';

export interface CancelOptions {
  /** the broker delivers nothing more to this consumer (its handlers may still be running) */
  cancelled?(): void;
}

export interface ConsumeOptions<K extends RoutingKey> {
  /** durable queue owned by this consumer; its DLQ is `<queue>.dlq` */
  queue: string;
  /** routing keys bound to the queue; a message with any other routing key is dead-lettered */
  bindings: K[];
  /** unacknowledged messages (= concurrent handler calls) per consumer; default 32 */
  prefetch?: number;
  /**
   * Called once per valid message. 'ack' acknowledges; 'dead-letter' sends it to `<queue>.dlq`;
   * 'requeue' puts it back. A throw requeues a first delivery and dead-letters a redelivery.
   */
  handler: (env: EnvelopeOf<K>) => Promise<ConsumeOutcome>;
  /**
   * 'shared' (default): the durable quorum queue `queue` with its DLQ, whose messages the
   * service's replicas share. 'broadcast': an exclusive, auto-deleted queue of this process only
   * (`<queue>.<random>`), so every process gets every message; a refused message is dropped (no
   * DLQ) and messages published while disconnected are missed: `onSubscribed` runs after each
   * (re)subscription, for the caller to resynchronise from the source of truth.
   */
  mode?: 'shared' | 'broadcast';
  /** broadcast only: most messages the queue holds for a stalled process (the oldest are dropped); default unbounded */
  maxQueued?: number;
  onSubscribed?: () => void;
  /**
   * Consume partition `n` of the bindings: the queue is bound with `<routingKey>.<n>` (what
   * PublishOptions.partition publishes to). Shared mode only.
   */
  partition?: number;
  /**
   * Arguments added to the shared queue's (e.g. `x-single-active-consumer`, `x-max-length`).
   * Part of the queue's identity like the others: every consumer must declare the same.
   */
  queueArguments?: Record<string, string | number | boolean>;
}

const DEFAULT_PREFETCH = 32;
const OUTCOMES: readonly ConsumeOutcome[] = ['ack', 'dead-letter', 'requeue'];

interface ConsumerState {
  opts: ConsumeOptions<RoutingKey>;
  bindings: ReadonlySet<string>;
  prefetch: number;
  channel: Channel | null;
  consumerTag: string | null;
  /** generation of the connection the consumer is set up on (-1: never) */
  generation: number;
  inflight: Set<Promise<void>>;
  ready: Deferred<void>;
}

/** Checks consume()'s options; returns the prefetch to use. */
function checkOptions<K extends RoutingKey>(opts: ConsumeOptions<K>): number {
  if (!opts || typeof opts.handler !== 'function') throw new TypeError('consume: handler must be a function');
  if (!Array.isArray(opts.bindings) || opts.bindings.length === 0)
    throw new TypeError('consume: bindings must name at least one routing key');
  for (const key of opts.bindings)
    if (!isRoutingKey(key)) throw new TypeError(`consume: unknown routing key ${JSON.stringify(key)}`);
  const prefetch = opts.prefetch ?? DEFAULT_PREFETCH;
  if (!Number.isInteger(prefetch) || prefetch < 1 || prefetch > 65535)
    throw new TypeError('consume: prefetch must be an integer between 1 and 65535');
  if (typeof opts.queue !== 'string' || !opts.queue) throw new TypeError('consume: queue must be a non-empty string');
  return prefetch;
}

/**
 * The message as an envelope of its contract, or ContractError (the message is then dead-lettered).
 * Its payload and headers were parsed by its routing key's contract: it is that key's member of
 * the discriminated union, which a handler narrows with a `switch` on the routing key.
 */
function decode(bindings: ReadonlySet<string>, msg: ConsumeMessage, partition?: number): EnvelopeOf {
  const suffix = partition === undefined ? '' : `.${partition}`;
  const wireKey = msg.fields.routingKey;
  if (!wireKey.endsWith(suffix)) throw new ContractError(`routing key ${wireKey} is not of partition ${partition}`);
  const routingKey = wireKey.slice(0, wireKey.length - suffix.length);
  if (!isRoutingKey(routingKey)) throw new ContractError(`unknown routing key ${JSON.stringify(routingKey)}`);
  if (!bindings.has(routingKey))
    throw new ContractError(`routing key ${routingKey} is not one this consumer is bound to`);
  const messageId: unknown = msg.properties.messageId;
  if (typeof messageId !== 'string' || messageId.length === 0) throw new ContractError('message has no messageId');
  let body: unknown;
  try {
    body = JSON.parse(msg.content.toString('utf8'));
  } catch {
    throw new ContractError('body is not JSON');
  }
  const payload = parsePayload(routingKey, body);
  const headers = parseHeaders(routingKey, fromAmqpHeaders(msg.properties.headers as Record<string, unknown>));
  const ts: unknown = msg.properties.timestamp;
  const env: Envelope<RoutingKey> = {
    routingKey,
    messageId,
    payload,
    headers,
    redelivered: msg.fields.redelivered,
    publishedAt: typeof ts === 'number' && Number.isFinite(ts) ? new Date(ts * 1000) : null,
  };
  return env as EnvelopeOf;
}

export class Consumers {
  private readonly consumers = new Map<string, ConsumerState>();

  constructor(
    private readonly connection: AmqpConnection,
    private readonly logger: Logger,
  ) {}

  get queues(): string[] {
    return [...this.consumers.keys()];
  }

  /** See AmqpClient.consume. */
  async consume<K extends RoutingKey>(opts: ConsumeOptions<K>): Promise<void> {
    if (this.connection.stopping) throw new Error('AmqpClient: consume() after stop()');
    const prefetch = checkOptions(opts);
    if (this.consumers.has(opts.queue)) throw new Error(`consume: this client already consumes ${opts.queue}`);

    const state: ConsumerState = {
      opts: opts as unknown as ConsumeOptions<RoutingKey>,
      bindings: new Set<string>(opts.bindings),
      prefetch,
      channel: null,
      consumerTag: null,
      generation: -1,
      inflight: new Set(),
      ready: deferred<void>(),
    };
    this.consumers.set(opts.queue, state);
    const ctx = this.connection.current;
    if (ctx) {
      try {
        await this.setupConsumer(ctx, state);
        state.ready.resolve();
      } catch (err) {
        if (!ctx.lost) {
          // a real declaration error (e.g. the queue exists with other arguments), not a lost connection
          this.consumers.delete(opts.queue);
          throw err;
        }
        // the connection dropped meanwhile: the reconnect sets the consumer up
      }
    }
    await state.ready.promise;
  }

  /** Connection hook: sets up every registered consumer on a new connection, including ones registered meanwhile. */
  async setupAll(ctx: ConnectionContext): Promise<void> {
    for (;;) {
      const pending = [...this.consumers.values()].filter((c) => c.generation !== ctx.generation);
      if (pending.length === 0) return;
      for (const c of pending) await this.setupConsumer(ctx, c);
    }
  }

  /** Connection hook: the consumers set up on this connection are ready. */
  established(ctx: ConnectionContext): void {
    for (const c of this.consumers.values()) if (c.generation === ctx.generation) c.ready.resolve();
  }

  /** Connection hook: the consumers on a lost connection forget their channel. */
  lost(ctx: ConnectionContext): void {
    for (const c of this.consumers.values()) {
      if (c.generation === ctx.generation) {
        c.channel = null;
        c.consumerTag = null;
      }
    }
  }

  /** The open consumer channels on this connection (closed before the connection on stop). */
  channelsOf(ctx: ConnectionContext): Channel[] {
    const channels: Channel[] = [];
    for (const c of this.consumers.values()) if (c.channel && c.generation === ctx.generation) channels.push(c.channel);
    return channels;
  }

  /** Stopping: consume() calls still waiting for a connection fail with `err`. */
  rejectWaiting(err: Error): void {
    for (const c of this.consumers.values()) if (!c.ready.settled) c.ready.reject(err);
  }

  /** Stopping: cancels every consumer, then waits for the handlers in flight (they still settle their message). */
  async cancelAndDrain(): Promise<void> {
    for (const c of this.consumers.values()) {
      const { channel, consumerTag } = c;
      if (channel && consumerTag && !this.connection.isClosed(channel)) {
        await channel
          .cancel(consumerTag)
          .catch((err: unknown) =>
            this.logger.warn('amqp cancel failed', { queue: c.opts.queue, err: errorMessage(err) }),
          );
      }
    }
    await Promise.all([...this.consumers.values()].flatMap((c) => [...c.inflight]));
  }

  /**
   * Stops consuming one queue: cancels its consumer, waits for its handlers in flight (their acks
   * still go out), closes its channel and forgets it; `consume` may take the queue again. With
   * `x-single-active-consumer`, the broker hands the queue to the next waiting consumer.
   * `opts.cancelled` runs once the broker delivers nothing more to it, before the handlers in
   * flight are waited for: a message they requeue from then on goes to another consumer.
   */
  async cancel(queue: string, opts: CancelOptions = {}): Promise<void> {
    const c = this.consumers.get(queue);
    if (!c) return;
    this.consumers.delete(queue);
    if (!c.ready.settled) c.ready.reject(new Error(`consumer of ${queue} cancelled`));
    const { channel, consumerTag } = c;
    if (channel && consumerTag && !this.connection.isClosed(channel)) {
      await channel
        .cancel(consumerTag)
        .catch((err: unknown) => this.logger.warn('amqp cancel failed', { queue, err: errorMessage(err) }));
    }
    opts.cancelled?.();
    await Promise.all([...c.inflight]);
    if (channel && !this.connection.isClosed(channel)) await channel.close().catch(() => undefined);
  }

  private async setupConsumer(ctx: ConnectionContext, c: ConsumerState): Promise<void> {
    const { queue } = c.opts;
    const ch = await ctx.conn.createChannel();
    let active = false;
    this.connection.watchChannel(ch, `consumer ${queue}`, () => {
      // a channel closed by cancel() (the consumer no longer registered) is no connection fault
      if (active && this.consumers.get(queue) === c)
        queueMicrotask(() => ctx.drop(`consumer channel of ${queue} closed`));
    });
    try {
      await ch.prefetch(c.prefetch);
      const name = await this.declare(ch, c);
      const { consumerTag } = await ch.consume(name, (msg) => this.onDelivery(ctx, c, ch, msg), { noAck: false });
      if (this.connection.isClosed(ch)) throw new Error(`consumer channel of ${queue} closed during setup`);
      active = true;
      c.channel = ch;
      c.consumerTag = consumerTag;
      c.generation = ctx.generation;
    } catch (err) {
      if (!this.connection.isClosed(ch)) await ch.close().catch(() => undefined);
      throw err;
    }
    try {
      c.opts.onSubscribed?.();
    } catch (err) {
      this.logger.error('amqp onSubscribed hook failed', { queue, err: errorMessage(err) });
    }
  }

  /** Declares the consumer's queue (see ConsumeOptions.mode); resolves with the name to consume. */
  private async declare(ch: Channel, c: ConsumerState): Promise<string> {
    const bindings = [...c.bindings] as RoutingKey[];
    if (c.opts.mode !== 'broadcast') {
      await declareQueue(ch, c.opts.queue, bindings, {
        ...(c.opts.partition !== undefined && { partition: c.opts.partition }),
        ...(c.opts.queueArguments && { queueArguments: c.opts.queueArguments }),
      });
      return c.opts.queue;
    }
    await declareExchanges(ch);
    const { queue } = await ch.assertQueue(`${c.opts.queue}.${randomUUID()}`, {
      exclusive: true,
      autoDelete: true,
      durable: false,
      ...(c.opts.maxQueued !== undefined
        ? { arguments: { 'x-max-length': c.opts.maxQueued, 'x-overflow': 'drop-head' } }
        : {}),
    });
    for (const key of bindings) await ch.bindQueue(queue, EXCHANGE, key);
    return queue;
  }

  private onDelivery(ctx: ConnectionContext, c: ConsumerState, ch: Channel, msg: ConsumeMessage | null): void {
    if (msg === null) {
      // the broker cancelled the consumer (e.g. its queue was deleted): rebuild everything
      this.logger.warn('amqp consumer cancelled by the broker', { queue: c.opts.queue });
      ctx.drop(`consumer of ${c.opts.queue} cancelled by the broker`);
      return;
    }
    const work: Promise<void> = (tracingEnabled() ? this.tracedDelivery(c, ch, msg) : this.handleDelivery(c, ch, msg))
      .catch((err: unknown) => {
        this.logger.error('amqp delivery handling failed', {
          queue: c.opts.queue,
          messageId: msg.properties.messageId as unknown,
          err: errorMessage(err),
        });
      })
      .finally(() => c.inflight.delete(work));
    c.inflight.add(work);
  }

  /** OpenTelemetry: the delivery in a CONSUMER span continuing the publisher's trace (its traceparent header) */
  private async tracedDelivery(c: ConsumerState, ch: Channel, msg: ConsumeMessage): Promise<void> {
    const span = startSpan(
      `process ${msg.fields.routingKey}`,
      SpanKind.CONSUMER,
      { 'messaging.system': 'rabbitmq', 'messaging.destination.name': c.opts.queue },
      traceCarrier(msg.properties.headers),
    );
    try {
      await withSpan(span, () => this.handleDelivery(c, ch, msg));
      endSpan(span);
    } catch (err) {
      endSpan(span, err instanceof Error ? err : String(err));
      throw err;
    }
  }

  private async handleDelivery(c: ConsumerState, ch: Channel, msg: ConsumeMessage): Promise<void> {
    const meta = {
      queue: c.opts.queue,
      messageId: typeof msg.properties.messageId === 'string' ? msg.properties.messageId : undefined,
      routingKey: msg.fields.routingKey,
      redelivered: msg.fields.redelivered,
    };
    let env: EnvelopeOf;
    try {
      env = decode(c.bindings, msg, c.opts.partition);
    } catch (err) {
      this.logger.warn('amqp message breaks its contract: dead-lettered', { ...meta, reason: errorMessage(err) });
      this.settle(ch, msg, 'dead-letter', meta);
      return;
    }
    let outcome: ConsumeOutcome;
    try {
      outcome = await c.opts.handler(env);
      if (!OUTCOMES.includes(outcome))
        throw new TypeError(`handler returned ${JSON.stringify(outcome)}, expected 'ack', 'dead-letter' or 'requeue'`);
    } catch (err) {
      outcome = msg.fields.redelivered ? 'dead-letter' : 'requeue';
      this.logger.error('amqp message handler failed', { ...meta, outcome, err: errorMessage(err) });
    }
    if (outcome !== 'ack') this.logger.info('amqp message not acknowledged', { ...meta, outcome });
    this.settle(ch, msg, outcome, meta);
  }

  /** Acks/nacks on the channel the message came from; a closed channel's delivery tags are dropped. */
  private settle(ch: Channel, msg: ConsumeMessage, outcome: ConsumeOutcome, meta: Record<string, unknown>): void {
    if (this.connection.isClosed(ch)) {
      this.logger.info('amqp channel closed before settling; the broker redelivers the message', { ...meta, outcome });
      return;
    }
    try {
      switch (outcome) {
        case 'ack':
          ch.ack(msg);
          break;
        case 'dead-letter':
          ch.nack(msg, false, false);
          break;
        case 'requeue':
          ch.nack(msg, false, true);
          break;
      }
    } catch (err) {
      this.logger.warn('amqp settle failed; the broker redelivers the message', {
        ...meta,
        outcome,
        err: errorMessage(err),
      });
    }
  }
}

/** the W3C trace-context headers of a message as strings (AMQP may hand long strings over as Buffers) */
function traceCarrier(headers: Record<string, unknown> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of ['traceparent', 'tracestate']) {
    const v = headers?.[name];
    if (typeof v === 'string' || Buffer.isBuffer(v)) out[name] = v.toString();
  }
  return out;
}
