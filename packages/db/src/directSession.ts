/**
 * A process's ONE session straight to PostgreSQL (DATABASE_DIRECT_URL, never a transaction-mode
 * PgBouncer): every LISTEN channel of the process and its session advisory locks share it (the
 * poller's outbox relay, push and metrics reporter; the dispatcher's monitor cache).
 *
 * - Notifications are dispatched by channel to the subscribers of that channel.
 * - A lost connection is told to every subscriber (`onLost`) at once, then reconnected with a growing delay (up to 5 s); the new connection
 *   LISTENs on every subscribed channel again, THEN each subscriber's `onReconnect` runs:
 *   notifications sent while no connection listened are lost, so a subscriber resyncs there.
 * - `generation()` counts connections: session state other than LISTEN (an advisory lock) lives
 *   on one connection, so a holder compares the generation it took the lock on with the current one.
 * - The connection carries the `applicationName` it was given (pg_stat_activity).
 */
import { Client } from 'pg';
import type { Logger } from '@sts/common';
import { errorMessage } from '@sts/core';

export interface Subscriber {
  onNotify: (payload: string) => void;
  /** the connection was lost: notifications stop until `onReconnect` */
  onLost?: () => void;
  /** after a reconnect, once the channel is listened to again: catch up on what was missed */
  onReconnect?: () => void;
}

const CHANNEL = /^[a-z_][a-z0-9_]*$/;

export class DirectSession {
  private client: Client | undefined;
  private running = false;
  private retryMs = 0;
  private retry: NodeJS.Timeout | undefined;
  private connecting: Promise<void> | undefined;
  private generationNo = 0;
  private readonly channels = new Map<string, Set<Subscriber>>();

  constructor(private readonly options: { databaseUrl: string; applicationName: string; logger: Logger }) {}

  /** connects and listens; rejects when the first connection fails (it keeps retrying) */
  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    await this.connect();
  }

  async stop(): Promise<void> {
    this.running = false;
    clearTimeout(this.retry);
    this.retry = undefined;
    await this.connecting?.catch(() => undefined);
    const c = this.client;
    this.client = undefined;
    await c?.end().catch(() => undefined);
  }

  connected(): boolean {
    return this.client !== undefined;
  }

  /** the number of the current connection (grows with every reconnect); 0 before the first */
  generation(): number {
    return this.generationNo;
  }

  /** Subscribes to `channel` (LISTEN at once when connected); returns the unsubscribe. */
  async listen(channel: string, subscriber: Subscriber): Promise<() => void> {
    if (!CHANNEL.test(channel)) throw new Error(`invalid channel name ${channel}`);
    let subscribers = this.channels.get(channel);
    const first = subscribers === undefined;
    if (!subscribers) this.channels.set(channel, (subscribers = new Set()));
    subscribers.add(subscriber);
    const off = () => void subscribers.delete(subscriber);
    if (!first) return off;
    // a connection being opened may have listed the channels before this one: LISTEN is idempotent
    await this.connecting?.catch(() => undefined);
    await this.client?.query(`LISTEN ${channel}`).catch(() => undefined);
    return off;
  }

  /** A query on the session (an advisory lock); rejects when it is not connected. */
  async query<R extends object>(text: string, values: unknown[] = []): Promise<R[]> {
    const c = this.client;
    if (!c) throw new Error('the direct session is not connected');
    return (await c.query<R>(text, values)).rows;
  }

  private dispatch(channel: string, payload: string): void {
    for (const s of this.channels.get(channel) ?? []) {
      try {
        s.onNotify(payload);
      } catch (err) {
        this.options.logger.warn('a notification handler failed', { channel, err: errorMessage(err) });
      }
    }
  }

  /**
   * Drops the current connection as lost, then reconnects as after any loss: for a connection that
   * looks open but no longer answers (a subscriber's heartbeat did not come back).
   */
  reconnect(reason: string): void {
    if (this.client) this.lost(this.client, new Error(reason));
  }

  /** the current connection failed or ended: drop it, reconnect (a connection being opened is open()'s) */
  private lost(c: Client, err: Error): void {
    if (this.client !== c) return;
    this.options.logger.warn('direct session lost its connection; reconnecting', { err: err.message });
    this.client = undefined;
    void c.end().catch(() => undefined);
    this.each('onLost');
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (!this.running || this.retry) return;
    this.retryMs = Math.min(Math.max(this.retryMs * 2, 250), 5000);
    this.retry = setTimeout(() => {
      this.retry = undefined;
      this.connect().then(
        () => this.each('onReconnect'),
        () => undefined,
      );
    }, this.retryMs);
    this.retry.unref();
  }

  private each(hook: 'onLost' | 'onReconnect'): void {
    for (const subscribers of this.channels.values())
      for (const s of subscribers) {
        try {
          s[hook]?.();
        } catch (err) {
          this.options.logger.warn(`a subscriber's ${hook} failed`, { err: errorMessage(err) });
        }
      }
  }

  private connect(): Promise<void> {
    this.connecting = this.open().finally(() => (this.connecting = undefined));
    return this.connecting;
  }

  private async open(): Promise<void> {
    const c = new Client({
      connectionString: this.options.databaseUrl,
      keepAlive: true,
      application_name: this.options.applicationName,
    });
    c.on('error', (err) => this.lost(c, err));
    c.on('end', () => this.lost(c, new Error('connection ended')));
    c.on('notification', (n) => this.dispatch(n.channel, n.payload ?? ''));
    try {
      await c.connect();
      for (const channel of this.channels.keys()) await c.query(`LISTEN ${channel}`);
    } catch (err) {
      void c.end().catch(() => undefined);
      this.scheduleReconnect();
      throw err;
    }
    if (!this.running) return void (await c.end().catch(() => undefined));
    this.client = c;
    this.generationNo++;
    this.retryMs = 0;
  }
}

export interface Subscription {
  /** settles once the channel is listened to, or the first connection failed (it keeps retrying) */
  ready: Promise<void>;
  close(): Promise<void>;
}

/**
 * `subscriber` on `channel` of the process's `session`; without one, of a session of its own on
 * `databaseUrl` (a relay or poller built alone: tests, benches), closed with the subscription.
 */
export function subscribe(
  via: {
    session?: DirectSession | undefined;
    databaseUrl?: string | undefined;
    applicationName: string;
    logger: Logger;
  },
  channel: string,
  subscriber: Subscriber,
): Subscription | undefined {
  if (via.session) {
    const off = via.session.listen(channel, subscriber);
    return { ready: off.then(() => undefined), close: async () => (await off)() };
  }
  if (!via.databaseUrl) return undefined;
  const own = new DirectSession({
    databaseUrl: via.databaseUrl,
    applicationName: via.applicationName,
    logger: via.logger,
  });
  const ready = own.listen(channel, subscriber).then(() => own.start());
  return { ready, close: () => own.stop() };
}
