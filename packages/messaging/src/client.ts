/**
 * AmqpClient: one RabbitMQ connection per service with
 * - a confirm channel for publishing (each publish resolves only on the broker's confirm),
 * - one channel per consumer (manual ack, prefetch), validated against the contracts,
 * - automatic reconnect with exponential backoff that re-declares the topology and re-establishes
 *   the consumers, and a graceful stop() that finishes in-flight work.
 *
 * This class is the public face; the work is split by responsibility:
 * connection.ts (connect, reconnect, close), publisher.ts (publish with confirms),
 * consumer.ts (consume, outcomes -> ack / dead-letter / requeue).
 */
import type { Logger } from '@sts/common';
import type { PayloadOf, RoutingKey } from './contracts';
import { AmqpConnection, connectionTarget } from './connection';
import { Consumers, type CancelOptions, type ConsumeOptions } from './consumer';
import { PublishError, Publisher, type PublishOptions } from './publisher';

export type { CancelOptions, ConsumeOptions, ConsumeOutcome } from './consumer';
export { PublishError, type PublishErrorCode, type PublishOptions } from './publisher';

export interface AmqpClientOptions {
  /** AMQP URL including the vhost; a `heartbeat` query parameter is added (15 s) when absent */
  url: string;
  logger: Logger;
  /** shown as the connection name in RabbitMQ and as `appId` of published messages */
  name: string;
  /** reconnect backoff; default { initial: 100, max: 5000 } */
  reconnectDelayMs?: { initial: number; max: number };
  /** how long a publish may wait for a connection plus the broker's confirm; default 10000 */
  publishTimeoutMs?: number;
  /** how long stop() waits for the broker to acknowledge the close before dropping the socket; default 5000 */
  closeTimeoutMs?: number;
}

/** Checks the options (TypeError naming the bad one) and fills in the defaults. */
function settingsOf(opts: AmqpClientOptions) {
  if (!opts || typeof opts.url !== 'string' || !opts.url) throw new TypeError('AmqpClient: url is required');
  if (!opts.logger) throw new TypeError('AmqpClient: logger is required');
  if (typeof opts.name !== 'string' || !opts.name) throw new TypeError('AmqpClient: name is required');
  const { url, target } = connectionTarget(opts.url, 'AmqpClient');
  const initial = opts.reconnectDelayMs?.initial ?? 100;
  const max = opts.reconnectDelayMs?.max ?? 5000;
  if (!(initial > 0) || !(max >= initial)) throw new TypeError('AmqpClient: reconnectDelayMs needs 0 < initial <= max');
  const publishTimeoutMs = opts.publishTimeoutMs ?? 10_000;
  if (!(publishTimeoutMs > 0)) throw new TypeError('AmqpClient: publishTimeoutMs must be positive');
  const closeTimeoutMs = opts.closeTimeoutMs ?? 5000;
  if (!(closeTimeoutMs > 0)) throw new TypeError('AmqpClient: closeTimeoutMs must be positive');
  return {
    url,
    target,
    logger: opts.logger,
    name: opts.name,
    delays: { initial, max },
    publishTimeoutMs,
    closeTimeoutMs,
  };
}

export class AmqpClient {
  private readonly logger: Logger;
  private readonly name: string;
  private readonly connection: AmqpConnection;
  private readonly publisher: Publisher;
  private readonly consumers: Consumers;
  private stopPromise: Promise<void> | null = null;

  constructor(opts: AmqpClientOptions) {
    const settings = settingsOf(opts);
    this.logger = settings.logger;
    this.name = settings.name;
    this.connection = new AmqpConnection(settings, {
      setup: (ctx) => this.consumers.setupAll(ctx),
      established: (ctx) => this.consumers.established(ctx),
      lost: (ctx) => this.consumers.lost(ctx),
      returned: (ctx, msg) => this.publisher.onReturn(ctx, msg),
      describe: () => ({ consumers: this.consumers.queues }),
    });
    this.publisher = new Publisher(this.connection, settings);
    this.consumers = new Consumers(this.connection, settings.logger);
  }

  /** Connects (retrying with backoff until connected or stop()), declares the topology; resolves when connected. */
  start(): Promise<void> {
    return this.connection.start();
  }

  isConnected(): boolean {
    return this.connection.current !== null;
  }

  /** Readiness check: throws when the client is not connected to the broker. */
  check(): Promise<void> {
    if (!this.isConnected()) return Promise.reject(new Error(`RabbitMQ is not connected (${this.connection.target})`));
    return Promise.resolve();
  }

  /** Number of times the client has (re)connected; 1 after a clean start. */
  get connectCount(): number {
    return this.connection.connectCount;
  }

  /**
   * Validates against the contract (throws ContractError, sending nothing), publishes persistently
   * on the confirm channel and resolves only when the broker confirms. Waits for a reconnect when
   * disconnected. Rejects with PublishError on a nack, on connection loss before the confirm, or
   * when no confirm arrived within publishTimeoutMs.
   */
  publish<K extends RoutingKey>(routingKey: K, payload: PayloadOf<K>, opts: PublishOptions<K>): Promise<void> {
    return this.publisher.publish(routingKey, payload, opts);
  }

  /**
   * Starts consuming: declares the durable queue, its bindings and its DLQ, and resolves once the
   * consumer is active (waiting for the connection if needed). Re-established after every reconnect.
   */
  consume<K extends RoutingKey>(opts: ConsumeOptions<K>): Promise<void> {
    return this.consumers.consume(opts);
  }

  /** Stops consuming `queue` (its handlers in flight finish and settle first); see Consumers.cancel. */
  cancel(queue: string, opts: CancelOptions = {}): Promise<void> {
    return this.consumers.cancel(queue, opts);
  }

  /** The queue's message and consumer counts (a passive declare: fails when it does not exist). */
  async queueStats(queue: string): Promise<{ messages: number; consumers: number }> {
    const ctx = this.connection.current;
    if (!ctx) throw new Error(`RabbitMQ is not connected (${this.connection.target})`);
    const ch = await ctx.conn.createChannel();
    // a missing queue closes this channel with an error: the rejection below reports it
    ch.on('error', () => undefined);
    try {
      const ok = await ch.checkQueue(queue);
      return { messages: ok.messageCount, consumers: ok.consumerCount };
    } finally {
      await ch.close().catch(() => undefined);
    }
  }

  /**
   * Graceful stop: cancels the consumers, waits for in-flight handlers (they still ack), waits for
   * pending publish confirms, then closes the connection. Idempotent.
   */
  stop(): Promise<void> {
    if (!this.stopPromise) this.stopPromise = this.doStop();
    return this.stopPromise;
  }

  private async doStop(): Promise<void> {
    this.connection.beginStop(() => new PublishError('STOPPED', 'AmqpClient stopped'));
    this.consumers.rejectWaiting(new Error('AmqpClient stopped'));
    await this.connection.connectLoopDone();
    await this.consumers.cancelAndDrain();
    await this.publisher.drain();
    await this.connection.close((ctx) => this.consumers.channelsOf(ctx));
    this.logger.info('amqp client stopped', { target: this.connection.target, name: this.name });
  }
}
