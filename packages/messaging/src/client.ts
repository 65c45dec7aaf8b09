/**
 * AmqpClient: one RabbitMQ connection per service with
 * - a confirm channel for publishing (each publish resolves only on the broker's confirm),
 * - one channel per consumer (manual ack, prefetch), validated against the contracts,
 * - automatic reconnect with exponential backoff that re-declares the topology and re-establishes
 *   the consumers, and a graceful stop() that finishes in-flight work.
 */
import {
  connect,
  type Channel,
  type ChannelModel,
  type ConfirmChannel,
  type ConsumeMessage,
  type Message,
  type Options,
} from 'amqplib';
import type { Logger } from '@sts/common';
import {
  ContractError,
  EXCHANGE,
  fromAmqpHeaders,
  isRoutingKey,
  parseHeaders,
  parsePayload,
  toAmqpHeaders,
  type Envelope,
  type HeadersOf,
  type PayloadOf,
  type RoutingKey,
} from './contracts';
import { declareExchanges, declareQueue } from './topology';

export type ConsumeOutcome = 'ack' | 'dead-letter' | 'requeue';

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
  handler: (env: Envelope<K>) => Promise<ConsumeOutcome>;
}

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

export interface PublishOptions<K extends RoutingKey> {
  messageId: string;
  headers: HeadersOf<K>;
  /**
   * Reject with PublishError('UNROUTABLE') when no queue is bound for the routing key (the
   * broker returns the message). Default false: an unroutable message is logged and the publish
   * resolves on the confirm.
   */
  requireRoute?: boolean;
}

export type PublishErrorCode = 'NACKED' | 'CONNECTION_LOST' | 'TIMEOUT' | 'UNROUTABLE' | 'STOPPED';

/** Why a publish was not confirmed. The message may or may not have reached the broker: republish (at least once). */
export class PublishError extends Error {
  override name = 'PublishError';
  constructor(
    readonly code: PublishErrorCode,
    message: string,
  ) {
    super(message);
  }
}

const DEFAULT_PREFETCH = 32;
const DEFAULT_HEARTBEAT_SEC = 15;
const CONNECT_TIMEOUT_MS = 10_000;
const OUTCOMES: readonly ConsumeOutcome[] = ['ack', 'dead-letter', 'requeue'];

interface Deferred<T> {
  promise: Promise<T>;
  resolve: (value: T) => void;
  reject: (err: Error) => void;
  settled: boolean;
}

function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (err: Error) => void;
  const d: Deferred<T> = {
    promise: new Promise<T>((res, rej) => {
      resolve = res;
      reject = rej;
    }),
    resolve: (v) => {
      d.settled = true;
      resolve(v);
    },
    reject: (e) => {
      d.settled = true;
      reject(e);
    },
    settled: false,
  };
  // Whoever awaits the promise still sees the rejection; this only avoids an unhandled rejection when nobody does.
  d.promise.catch(() => undefined);
  return d;
}

/** One established connection. `lost` is set once, when it closes or must be dropped. */
interface ConnectionContext {
  conn: ChannelModel;
  generation: number;
  publishChannel: ConfirmChannel;
  /** messageIds the broker returned as unroutable and whose confirm has not arrived yet */
  returned: Set<string>;
  established: boolean;
  lost: boolean;
  drop: (reason: string, err?: unknown) => void;
}

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

/** Resolves true when `p` settles within `ms`, false otherwise. */
async function settlesWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([
      p.then(
        () => true,
        () => true,
      ),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export class AmqpClient {
  private readonly url: string;
  private readonly target: string;
  private readonly logger: Logger;
  private readonly name: string;
  private readonly delays: { initial: number; max: number };
  private readonly publishTimeoutMs: number;
  private readonly closeTimeoutMs: number;

  private current: ConnectionContext | null = null;
  private generation = 0;
  private readonly closedChannels = new WeakSet<Channel>();
  private readonly consumers = new Map<string, ConsumerState>();
  private readonly connectWaiters = new Set<{ resolve: () => void; reject: (err: Error) => void }>();
  private readonly pendingPublishes = new Set<Promise<void>>();

  private started: Deferred<void> | null = null;
  private looping = false;
  private loop: Promise<void> | null = null;
  private wakeSleep: (() => void) | null = null;
  private stopping = false;
  private stopped = false;
  private stopPromise: Promise<void> | null = null;
  private connects = 0;

  constructor(opts: AmqpClientOptions) {
    if (!opts || typeof opts.url !== 'string' || !opts.url) throw new TypeError('AmqpClient: url is required');
    if (!opts.logger) throw new TypeError('AmqpClient: logger is required');
    if (typeof opts.name !== 'string' || !opts.name) throw new TypeError('AmqpClient: name is required');
    const u = new URL(opts.url);
    if (u.protocol !== 'amqp:' && u.protocol !== 'amqps:')
      throw new TypeError('AmqpClient: url must be an amqp:// or amqps:// URL');
    if (!u.searchParams.has('heartbeat')) u.searchParams.set('heartbeat', String(DEFAULT_HEARTBEAT_SEC));
    this.url = u.toString();
    // host, port and vhost only: never the credentials
    this.target = `${u.hostname}:${u.port || (u.protocol === 'amqps:' ? 5671 : 5672)}${decodeURIComponent(u.pathname) || '/'}`;
    this.logger = opts.logger;
    this.name = opts.name;
    const initial = opts.reconnectDelayMs?.initial ?? 100;
    const max = opts.reconnectDelayMs?.max ?? 5000;
    if (!(initial > 0) || !(max >= initial))
      throw new TypeError('AmqpClient: reconnectDelayMs needs 0 < initial <= max');
    this.delays = { initial, max };
    this.publishTimeoutMs = opts.publishTimeoutMs ?? 10_000;
    if (!(this.publishTimeoutMs > 0)) throw new TypeError('AmqpClient: publishTimeoutMs must be positive');
    this.closeTimeoutMs = opts.closeTimeoutMs ?? 5000;
    if (!(this.closeTimeoutMs > 0)) throw new TypeError('AmqpClient: closeTimeoutMs must be positive');
  }

  /** Connects (retrying with backoff until connected or stop()), declares the topology; resolves when connected. */
  start(): Promise<void> {
    if (this.stopping) return Promise.reject(new Error('AmqpClient: start() after stop()'));
    if (!this.started) {
      this.started = deferred<void>();
      this.ensureLoop();
    }
    return this.started.promise;
  }

  isConnected(): boolean {
    return this.current !== null && this.current.established && !this.current.lost;
  }

  /** Readiness check: throws when the client is not connected to the broker. */
  check(): Promise<void> {
    if (!this.isConnected()) return Promise.reject(new Error(`RabbitMQ is not connected (${this.target})`));
    return Promise.resolve();
  }

  /** Number of times the client has (re)connected; 1 after a clean start. */
  get connectCount(): number {
    return this.connects;
  }

  /**
   * Validates against the contract (throws ContractError, sending nothing), publishes persistently
   * on the confirm channel and resolves only when the broker confirms. Waits for a reconnect when
   * disconnected. Rejects with PublishError on a nack, on connection loss before the confirm, or
   * when no confirm arrived within publishTimeoutMs.
   */
  async publish<K extends RoutingKey>(routingKey: K, payload: PayloadOf<K>, opts: PublishOptions<K>): Promise<void> {
    if (this.stopped) throw new PublishError('STOPPED', 'AmqpClient is stopped');
    if (!isRoutingKey(routingKey)) throw new ContractError(`unknown routing key ${JSON.stringify(routingKey)}`);
    const parsed = parsePayload(routingKey, payload);
    if (!opts || typeof opts.messageId !== 'string' || opts.messageId.length === 0)
      throw new ContractError('messageId must be a non-empty string');
    const headers = toAmqpHeaders(parseHeaders(routingKey, opts.headers));
    const body = Buffer.from(JSON.stringify(parsed), 'utf8');
    const properties: Options.Publish = {
      messageId: opts.messageId,
      type: routingKey,
      contentType: 'application/json',
      persistent: true,
      deliveryMode: 2,
      timestamp: Math.floor(Date.now() / 1000),
      appId: this.name,
      headers,
      mandatory: true,
    };
    const attempt = this.publishConfirmed(routingKey, body, properties, opts.requireRoute === true);
    const settled = attempt.then(
      () => undefined,
      () => undefined,
    );
    this.pendingPublishes.add(settled);
    void settled.then(() => this.pendingPublishes.delete(settled));
    return attempt;
  }

  /**
   * Starts consuming: declares the durable queue, its bindings and its DLQ, and resolves once the
   * consumer is active (waiting for the connection if needed). Re-established after every reconnect.
   */
  async consume<K extends RoutingKey>(opts: ConsumeOptions<K>): Promise<void> {
    if (this.stopping) throw new Error('AmqpClient: consume() after stop()');
    if (!opts || typeof opts.handler !== 'function') throw new TypeError('consume: handler must be a function');
    if (!Array.isArray(opts.bindings) || opts.bindings.length === 0)
      throw new TypeError('consume: bindings must name at least one routing key');
    for (const key of opts.bindings)
      if (!isRoutingKey(key)) throw new TypeError(`consume: unknown routing key ${JSON.stringify(key)}`);
    const prefetch = opts.prefetch ?? DEFAULT_PREFETCH;
    if (!Number.isInteger(prefetch) || prefetch < 1 || prefetch > 65535)
      throw new TypeError('consume: prefetch must be an integer between 1 and 65535');
    if (typeof opts.queue !== 'string' || !opts.queue) throw new TypeError('consume: queue must be a non-empty string');
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
    const ctx = this.current;
    if (ctx && ctx.established && !ctx.lost) {
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

  /**
   * Graceful stop: cancels the consumers, waits for in-flight handlers (they still ack), waits for
   * pending publish confirms, then closes the connection. Idempotent.
   */
  stop(): Promise<void> {
    if (!this.stopPromise) this.stopPromise = this.doStop();
    return this.stopPromise;
  }

  // ---- connection management ----

  private ensureLoop(): void {
    if (this.looping || this.stopping) return;
    this.looping = true;
    this.loop = this.connectLoop();
  }

  private async connectLoop(): Promise<void> {
    let delay = this.delays.initial;
    for (let attempt = 1; !this.stopping; attempt++) {
      try {
        await this.connectOnce();
        return; // connectOnce cleared `looping` when it marked the connection established
      } catch (err) {
        if (this.stopping) break;
        const wait = Math.round(delay * (0.8 + Math.random() * 0.4));
        this.logger.warn('amqp connect failed, retrying', {
          target: this.target,
          attempt,
          retryInMs: wait,
          error: errorMessage(err),
        });
        await this.sleep(wait);
        delay = Math.min(delay * 2, this.delays.max);
      }
    }
    this.looping = false;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.wakeSleep = () => {
        this.wakeSleep = null;
        done();
      };
    });
  }

  private async connectOnce(): Promise<void> {
    const conn = await connect(this.url, {
      clientProperties: { connection_name: this.name },
      timeout: CONNECT_TIMEOUT_MS,
    });
    const generation = ++this.generation;
    let ctx: ConnectionContext | null = null;
    let lostEarly = false;
    conn.on('blocked', (reason: unknown) =>
      this.logger.warn('amqp connection blocked by the broker (publishes wait)', {
        target: this.target,
        reason: String(reason),
      }),
    );
    conn.on('unblocked', () => this.logger.info('amqp connection unblocked', { target: this.target }));
    conn.on('error', (err: unknown) =>
      this.logger.warn('amqp connection error', { target: this.target, error: errorMessage(err) }),
    );
    conn.on('close', (err: unknown) => {
      if (ctx) ctx.drop('connection closed', err);
      else lostEarly = true;
    });
    try {
      if (this.stopping) throw new Error('client is stopping');
      const publishChannel = await conn.createConfirmChannel();
      ctx = {
        conn,
        generation,
        publishChannel,
        returned: new Set(),
        established: false,
        lost: lostEarly,
        drop: (reason, err) => this.handleLost(ctx!, reason, err),
      };
      // deferred: when the whole connection closes, its close event (with the broker's reason) comes first
      this.watchChannel(publishChannel, 'publish', () => queueMicrotask(() => ctx!.drop('publish channel closed')));
      publishChannel.on('return', (msg: Message) => this.onReturn(ctx!, msg));
      await declareExchanges(publishChannel);
      // set up every registered consumer, including ones registered while this runs
      for (;;) {
        const pending = [...this.consumers.values()].filter((c) => c.generation !== generation);
        if (pending.length === 0) break;
        for (const c of pending) await this.setupConsumer(ctx, c);
      }
      if (this.stopping) throw new Error('client is stopping');
      if (ctx.lost) throw new Error('connection lost during setup');
      ctx.established = true;
      this.current = ctx;
      this.looping = false;
      this.connects++;
      this.logger.info('amqp connected', {
        target: this.target,
        name: this.name,
        reconnect: this.connects > 1,
        consumers: [...this.consumers.keys()],
      });
      for (const c of this.consumers.values()) if (c.generation === generation) c.ready.resolve();
      for (const w of [...this.connectWaiters]) w.resolve();
      this.started?.resolve();
    } catch (err) {
      if (ctx) ctx.lost = true;
      await conn.close().catch(() => undefined);
      throw err;
    }
  }

  /** A connection (or one of its channels) closed: forget it and reconnect unless stopping. */
  private handleLost(ctx: ConnectionContext, reason: string, err?: unknown): void {
    if (ctx.lost) return;
    ctx.lost = true;
    if (!ctx.established) return; // connectOnce notices and retries
    if (this.current === ctx) this.current = null;
    for (const c of this.consumers.values()) {
      if (c.generation === ctx.generation) {
        c.channel = null;
        c.consumerTag = null;
      }
    }
    // a channel may have closed while the connection is still up: close the rest of it too
    ctx.conn.close().catch(() => undefined);
    if (this.stopping) return;
    this.logger.warn('amqp connection lost, reconnecting', {
      target: this.target,
      reason,
      ...(err ? { error: errorMessage(err) } : {}),
    });
    this.ensureLoop();
  }

  private watchChannel(ch: Channel, label: string, onClose: () => void): void {
    ch.on('error', (err: unknown) =>
      this.logger.warn('amqp channel error', { target: this.target, channel: label, error: errorMessage(err) }),
    );
    ch.on('close', () => {
      this.closedChannels.add(ch);
      onClose();
    });
  }

  private onReturn(ctx: ConnectionContext, msg: Message): void {
    const messageId = typeof msg.properties.messageId === 'string' ? msg.properties.messageId : undefined;
    if (messageId !== undefined) ctx.returned.add(messageId);
    this.logger.warn('amqp message unroutable: no queue is bound for its routing key', {
      messageId,
      routingKey: msg.fields.routingKey,
      exchange: msg.fields.exchange,
    });
  }

  // ---- publishing ----

  private async publishConfirmed(
    routingKey: RoutingKey,
    body: Buffer,
    properties: Options.Publish,
    requireRoute: boolean,
  ): Promise<void> {
    const messageId = properties.messageId as string;
    const deadline = Date.now() + this.publishTimeoutMs;
    const ctx = await this.waitForPublishContext(deadline, messageId);
    const ch = ctx.publishChannel;
    await new Promise<void>((resolve, reject) => {
      let done = false;
      const finish = (err?: Error): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        if (err) {
          this.logger.warn('amqp publish not confirmed', { messageId, routingKey, code: (err as PublishError).code });
          reject(err);
        } else resolve();
      };
      const timer = setTimeout(
        () =>
          finish(new PublishError('TIMEOUT', `no confirm for message ${messageId} within ${this.publishTimeoutMs} ms`)),
        Math.max(1, deadline - Date.now()),
      );
      try {
        ch.publish(EXCHANGE, routingKey, body, properties, (err: unknown) => {
          const returned = ctx.returned.delete(messageId);
          if (err) {
            const nacked = err instanceof Error && err.message === 'message nacked';
            finish(
              nacked
                ? new PublishError('NACKED', `broker nacked message ${messageId}`)
                : new PublishError('CONNECTION_LOST', `connection lost before the confirm of ${messageId}`),
            );
          } else if (returned && requireRoute) {
            finish(new PublishError('UNROUTABLE', `no queue is bound for ${routingKey} (message ${messageId})`));
          } else finish();
        });
      } catch (err) {
        // the channel closed under us (IllegalOperationError)
        finish(new PublishError('CONNECTION_LOST', `cannot publish ${messageId}: ${errorMessage(err)}`));
      }
    });
  }

  private async waitForPublishContext(deadline: number, messageId: string): Promise<ConnectionContext> {
    for (;;) {
      if (this.stopped) throw new PublishError('STOPPED', 'AmqpClient is stopped');
      const ctx = this.current;
      if (ctx && ctx.established && !ctx.lost && !this.closedChannels.has(ctx.publishChannel)) return ctx;
      if (this.stopping) throw new PublishError('STOPPED', 'AmqpClient is stopping and not connected');
      const remaining = deadline - Date.now();
      if (remaining <= 0)
        throw new PublishError('TIMEOUT', `not connected to RabbitMQ; gave up publishing ${messageId}`);
      await this.waitForConnection(remaining);
    }
  }

  /** Resolves on the next connect or after `ms`; rejects when the client stops. */
  private waitForConnection(ms: number): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const waiter = {
        resolve: () => {
          clearTimeout(timer);
          this.connectWaiters.delete(waiter);
          resolve();
        },
        reject: (err: Error) => {
          clearTimeout(timer);
          this.connectWaiters.delete(waiter);
          reject(err);
        },
      };
      const timer = setTimeout(waiter.resolve, ms);
      this.connectWaiters.add(waiter);
    });
  }

  // ---- consuming ----

  private async setupConsumer(ctx: ConnectionContext, c: ConsumerState): Promise<void> {
    const { queue } = c.opts;
    const ch = await ctx.conn.createChannel();
    let active = false;
    this.watchChannel(ch, `consumer ${queue}`, () => {
      if (active) queueMicrotask(() => ctx.drop(`consumer channel of ${queue} closed`));
    });
    try {
      await ch.prefetch(c.prefetch);
      await declareQueue(ch, queue, [...c.bindings] as RoutingKey[]);
      const { consumerTag } = await ch.consume(queue, (msg) => this.onDelivery(ctx, c, ch, msg), { noAck: false });
      if (this.closedChannels.has(ch)) throw new Error(`consumer channel of ${queue} closed during setup`);
      active = true;
      c.channel = ch;
      c.consumerTag = consumerTag;
      c.generation = ctx.generation;
    } catch (err) {
      if (!this.closedChannels.has(ch)) await ch.close().catch(() => undefined);
      throw err;
    }
  }

  private onDelivery(ctx: ConnectionContext, c: ConsumerState, ch: Channel, msg: ConsumeMessage | null): void {
    if (msg === null) {
      // the broker cancelled the consumer (e.g. its queue was deleted): rebuild everything
      this.logger.warn('amqp consumer cancelled by the broker', { queue: c.opts.queue });
      ctx.drop(`consumer of ${c.opts.queue} cancelled by the broker`);
      return;
    }
    const work: Promise<void> = this.handleDelivery(c, ch, msg)
      .catch((err: unknown) => {
        this.logger.error('amqp delivery handling failed', {
          queue: c.opts.queue,
          messageId: msg.properties.messageId as unknown,
          error: errorMessage(err),
        });
      })
      .finally(() => c.inflight.delete(work));
    c.inflight.add(work);
  }

  private decode(c: ConsumerState, msg: ConsumeMessage): Envelope<RoutingKey> {
    const routingKey = msg.fields.routingKey;
    if (!isRoutingKey(routingKey)) throw new ContractError(`unknown routing key ${JSON.stringify(routingKey)}`);
    if (!c.bindings.has(routingKey))
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
    return {
      routingKey,
      messageId,
      payload,
      headers,
      redelivered: msg.fields.redelivered,
      publishedAt: typeof ts === 'number' && Number.isFinite(ts) ? new Date(ts * 1000) : null,
    };
  }

  private async handleDelivery(c: ConsumerState, ch: Channel, msg: ConsumeMessage): Promise<void> {
    const meta = {
      queue: c.opts.queue,
      messageId: typeof msg.properties.messageId === 'string' ? msg.properties.messageId : undefined,
      routingKey: msg.fields.routingKey,
      redelivered: msg.fields.redelivered,
    };
    let env: Envelope<RoutingKey>;
    try {
      env = this.decode(c, msg);
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
      this.logger.error('amqp message handler failed', { ...meta, outcome, error: errorMessage(err) });
    }
    if (outcome !== 'ack') this.logger.info('amqp message not acknowledged', { ...meta, outcome });
    this.settle(ch, msg, outcome, meta);
  }

  /** Acks/nacks on the channel the message came from; a closed channel's delivery tags are dropped. */
  private settle(ch: Channel, msg: ConsumeMessage, outcome: ConsumeOutcome, meta: Record<string, unknown>): void {
    if (this.closedChannels.has(ch)) {
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
        error: errorMessage(err),
      });
    }
  }

  // ---- stopping ----

  private async doStop(): Promise<void> {
    this.stopping = true;
    this.wakeSleep?.();
    const stoppedError = new Error('AmqpClient stopped');
    for (const w of [...this.connectWaiters]) w.reject(new PublishError('STOPPED', 'AmqpClient stopped'));
    if (this.started && !this.started.settled) this.started.reject(new Error('AmqpClient stopped before it connected'));
    for (const c of this.consumers.values()) if (!c.ready.settled) c.ready.reject(stoppedError);
    if (this.loop) await this.loop.catch(() => undefined);

    for (const c of this.consumers.values()) {
      const { channel, consumerTag } = c;
      if (channel && consumerTag && !this.closedChannels.has(channel)) {
        await channel
          .cancel(consumerTag)
          .catch((err: unknown) =>
            this.logger.warn('amqp cancel failed', { queue: c.opts.queue, error: errorMessage(err) }),
          );
      }
    }
    await Promise.all([...this.consumers.values()].flatMap((c) => [...c.inflight]));
    await Promise.all([...this.pendingPublishes]);
    this.stopped = true;
    const ctx = this.current;
    this.current = null;
    if (ctx) {
      ctx.lost = true;
      // Close the channels first: a channel's close follows its acks in order, while amqplib may
      // write a connection close ahead of frames still buffered on other channels.
      const channels: Channel[] = [ctx.publishChannel];
      for (const c of this.consumers.values())
        if (c.channel && c.generation === ctx.generation) channels.push(c.channel);
      // Bounded: a broker that stopped answering must not hold the shutdown forever.
      const closed = await settlesWithin(
        (async () => {
          await Promise.all(
            channels.filter((ch) => !this.closedChannels.has(ch)).map((ch) => ch.close().catch(() => undefined)),
          );
          await ctx.conn.close().catch(() => undefined);
        })(),
        this.closeTimeoutMs,
      );
      if (!closed) {
        this.logger.warn('amqp close timed out; dropping the socket', { target: this.target });
        // with an error, so amqplib sees the socket end and clears its heartbeat timers
        (ctx.conn.connection as unknown as { stream?: { destroy(err: Error): void } }).stream?.destroy(
          new Error(`no answer to the close within ${this.closeTimeoutMs} ms`),
        );
      }
    }
    this.logger.info('amqp client stopped', { target: this.target, name: this.name });
  }
}
