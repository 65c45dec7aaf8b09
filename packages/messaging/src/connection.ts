/**
 * The AMQP client's connection: one RabbitMQ connection with its confirm channel for publishing,
 * established by a loop that retries with exponential backoff (jittered), re-established after
 * every loss, and closed within a deadline on stop. What runs on a new connection before it counts
 * as established (the consumers' set-up) and what a loss means for them come in as hooks, so this
 * module knows nothing of publishing or consuming.
 */
import { connect, type Channel, type ChannelModel, type ConfirmChannel, type Message } from 'amqplib';
import type { Logger } from '@sts/common';
import { errorMessage } from '@sts/core';
import { deferred, settlesWithin, type Deferred } from './deferred';
import { coalesceWrites } from './coalesce';
import { declareExchanges } from './topology';

const DEFAULT_HEARTBEAT_SEC = 15;
const CONNECT_TIMEOUT_MS = 10_000;

/** One established connection. `lost` is set once, when it closes or must be dropped. */
export interface ConnectionContext {
  conn: ChannelModel;
  generation: number;
  publishChannel: ConfirmChannel;
  /** messageIds the broker returned as unroutable and whose confirm has not arrived yet */
  returned: Set<string>;
  established: boolean;
  lost: boolean;
  drop: (reason: string, err?: unknown) => void;
}

export interface ConnectionSettings {
  /** AMQP URL with the heartbeat set */
  url: string;
  /** host:port/vhost, for logs and errors: never the credentials */
  target: string;
  logger: Logger;
  name: string;
  delays: { initial: number; max: number };
  closeTimeoutMs: number;
}

export interface ConnectionHooks {
  /** runs on every new connection before it counts as established (throws: the attempt fails and is retried) */
  setup(ctx: ConnectionContext): Promise<void>;
  /** the connection is established and current */
  established(ctx: ConnectionContext): void;
  /** an established connection was lost (before the reconnect starts) */
  lost(ctx: ConnectionContext): void;
  /** the broker returned a message published on this connection as unroutable */
  returned(ctx: ConnectionContext, msg: Message): void;
  /** extra fields for the "connected" log line */
  describe(): Record<string, unknown>;
}

/**
 * Validates the client's URL (amqp:// or amqps://) and adds the heartbeat when absent; returns it
 * with the target for logs.
 */
export function connectionTarget(rawUrl: string, prefix: string): { url: string; target: string } {
  const u = new URL(rawUrl);
  if (u.protocol !== 'amqp:' && u.protocol !== 'amqps:')
    throw new TypeError(`${prefix}: url must be an amqp:// or amqps:// URL`);
  if (!u.searchParams.has('heartbeat')) u.searchParams.set('heartbeat', String(DEFAULT_HEARTBEAT_SEC));
  const port = u.port || (u.protocol === 'amqps:' ? 5671 : 5672);
  return { url: u.toString(), target: `${u.hostname}:${port}${decodeURIComponent(u.pathname) || '/'}` };
}

export class AmqpConnection {
  private currentCtx: ConnectionContext | null = null;
  private generation = 0;
  private readonly closedChannels = new WeakSet<Channel>();
  private readonly connectWaiters = new Set<{ resolve: () => void; reject: (err: Error) => void }>();
  private started: Deferred<void> | null = null;
  private looping = false;
  private loop: Promise<void> | null = null;
  private wakeSleep: (() => void) | null = null;
  private stoppingFlag = false;
  private connects = 0;

  constructor(
    private readonly settings: ConnectionSettings,
    private readonly hooks: ConnectionHooks,
  ) {}

  get target(): string {
    return this.settings.target;
  }

  get stopping(): boolean {
    return this.stoppingFlag;
  }

  /** Number of times the client has (re)connected; 1 after a clean start. */
  get connectCount(): number {
    return this.connects;
  }

  /** The current connection when it is established and not lost. */
  get current(): ConnectionContext | null {
    const ctx = this.currentCtx;
    return ctx && ctx.established && !ctx.lost ? ctx : null;
  }

  /** Connects (retrying until connected or stopped); resolves when connected. */
  start(): Promise<void> {
    if (this.stoppingFlag) return Promise.reject(new Error('AmqpClient: start() after stop()'));
    if (!this.started) {
      this.started = deferred<void>();
      this.ensureLoop();
    }
    return this.started.promise;
  }

  isClosed(ch: Channel): boolean {
    return this.closedChannels.has(ch);
  }

  /** Logs the channel's errors and records its close (isClosed) before calling onClose. */
  watchChannel(ch: Channel, label: string, onClose: () => void): void {
    ch.on('error', (err: unknown) =>
      this.settings.logger.warn('amqp channel error', {
        target: this.settings.target,
        channel: label,
        err: errorMessage(err),
      }),
    );
    ch.on('close', () => {
      this.closedChannels.add(ch);
      onClose();
    });
  }

  /** Resolves on the next connect or after `ms`; rejects when the client stops. */
  waitForConnection(ms: number): Promise<void> {
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

  /**
   * First step of stopping: no more (re)connects; waiters for a connection get `waiterError`, a
   * start() still pending is rejected. Then await connectLoopDone().
   */
  beginStop(waiterError: () => Error): void {
    this.stoppingFlag = true;
    this.wakeSleep?.();
    for (const w of [...this.connectWaiters]) w.reject(waiterError());
    if (this.started && !this.started.settled) this.started.reject(new Error('AmqpClient stopped before it connected'));
  }

  /** Resolves when a running connect loop has given up (after beginStop). */
  async connectLoopDone(): Promise<void> {
    if (this.loop) await this.loop.catch(() => undefined);
  }

  /**
   * Last step of stopping: closes `channels` (plus the publish channel), then the connection,
   * bounded by closeTimeoutMs; after that the socket is dropped.
   */
  async close(channels: (ctx: ConnectionContext) => Channel[]): Promise<void> {
    const ctx = this.currentCtx;
    this.currentCtx = null;
    if (!ctx) return;
    ctx.lost = true;
    // Close the channels first: a channel's close follows its acks in order, while amqplib may
    // write a connection close ahead of frames still buffered on other channels.
    const open = [ctx.publishChannel, ...channels(ctx)].filter((ch) => !this.closedChannels.has(ch));
    // Bounded: a broker that stopped answering must not hold the shutdown forever.
    const closed = await settlesWithin(
      (async () => {
        await Promise.all(open.map((ch) => ch.close().catch(() => undefined)));
        await ctx.conn.close().catch(() => undefined);
      })(),
      this.settings.closeTimeoutMs,
    );
    if (!closed) {
      this.settings.logger.warn('amqp close timed out; dropping the socket', { target: this.settings.target });
      // with an error, so amqplib sees the socket end and clears its heartbeat timers
      (ctx.conn.connection as unknown as { stream?: { destroy(err: Error): void } }).stream?.destroy(
        new Error(`no answer to the close within ${this.settings.closeTimeoutMs} ms`),
      );
    }
  }

  private ensureLoop(): void {
    if (this.looping || this.stoppingFlag) return;
    this.looping = true;
    this.loop = this.connectLoop();
  }

  private async connectLoop(): Promise<void> {
    const { delays, logger, target } = this.settings;
    let delay = delays.initial;
    for (let attempt = 1; !this.stoppingFlag; attempt++) {
      try {
        await this.connectOnce();
        return; // connectOnce cleared `looping` when it marked the connection established
      } catch (err) {
        if (this.stoppingFlag) break;
        const wait = Math.round(delay * (0.8 + Math.random() * 0.4));
        logger.warn('amqp connect failed, retrying', { target, attempt, retryInMs: wait, err: errorMessage(err) });
        await this.sleep(wait);
        delay = Math.min(delay * 2, delays.max);
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

  private watchConnection(conn: ChannelModel, onClose: (err: unknown) => void): void {
    const { logger, target } = this.settings;
    conn.on('blocked', (reason: unknown) =>
      logger.warn('amqp connection blocked by the broker (publishes wait)', { target, reason: String(reason) }),
    );
    conn.on('unblocked', () => logger.info('amqp connection unblocked', { target }));
    conn.on('error', (err: unknown) => logger.warn('amqp connection error', { target, err: errorMessage(err) }));
    conn.on('close', onClose);
  }

  private async connectOnce(): Promise<void> {
    const conn = await connect(this.settings.url, {
      clientProperties: { connection_name: this.settings.name },
      timeout: CONNECT_TIMEOUT_MS,
    });
    if (!coalesceWrites(conn)) this.settings.logger.debug('amqp socket not found: frames are written one by one');
    const generation = ++this.generation;
    let ctx: ConnectionContext | null = null;
    let lostEarly = false;
    this.watchConnection(conn, (err) => {
      if (ctx) ctx.drop('connection closed', err);
      else lostEarly = true;
    });
    try {
      if (this.stoppingFlag) throw new Error('client is stopping');
      const publishChannel = await conn.createConfirmChannel();
      const created: ConnectionContext = {
        conn,
        generation,
        publishChannel,
        returned: new Set(),
        established: false,
        lost: lostEarly,
        drop: (reason, err) => this.handleLost(created, reason, err),
      };
      ctx = created;
      // deferred: when the whole connection closes, its close event (with the broker's reason) comes first
      this.watchChannel(publishChannel, 'publish', () => queueMicrotask(() => created.drop('publish channel closed')));
      publishChannel.on('return', (msg: Message) => this.hooks.returned(created, msg));
      await declareExchanges(publishChannel);
      await this.hooks.setup(created);
      if (this.stoppingFlag) throw new Error('client is stopping');
      if (created.lost) throw new Error('connection lost during setup');
      this.establish(created);
    } catch (err) {
      if (ctx) ctx.lost = true;
      await conn.close().catch(() => undefined);
      throw err;
    }
  }

  private establish(ctx: ConnectionContext): void {
    ctx.established = true;
    this.currentCtx = ctx;
    this.looping = false;
    this.connects++;
    this.settings.logger.info('amqp connected', {
      target: this.settings.target,
      name: this.settings.name,
      reconnect: this.connects > 1,
      ...this.hooks.describe(),
    });
    this.hooks.established(ctx);
    for (const w of [...this.connectWaiters]) w.resolve();
    this.started?.resolve();
  }

  /** A connection (or one of its channels) closed: forget it and reconnect unless stopping. */
  private handleLost(ctx: ConnectionContext, reason: string, err?: unknown): void {
    if (ctx.lost) return;
    ctx.lost = true;
    if (!ctx.established) return; // connectOnce notices and retries
    if (this.currentCtx === ctx) this.currentCtx = null;
    this.hooks.lost(ctx);
    // a channel may have closed while the connection is still up: close the rest of it too
    ctx.conn.close().catch(() => undefined);
    if (this.stoppingFlag) return;
    this.settings.logger.warn('amqp connection lost, reconnecting', {
      target: this.settings.target,
      reason,
      ...(err ? { err: errorMessage(err) } : {}),
    });
    this.ensureLoop();
  }
}
