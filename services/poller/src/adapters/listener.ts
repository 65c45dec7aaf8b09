/**
 * A PostgreSQL LISTEN connection that comes back by itself: on a lost connection it reconnects
 * with a growing delay (up to 5 s) and calls `onReconnect` (notifications sent meanwhile are lost:
 * the caller catches up, e.g. by its interval poll). Used by the outbox relay (sts_outbox) and by
 * the poller's push (sts_tweets).
 */
import { Client } from 'pg';
import type { Logger } from '@sts/common';

export interface ListenerOptions {
  databaseUrl: string;
  channel: string;
  logger: Logger;
  onNotify: (payload: string) => void;
  onReconnect?: () => void;
}

export interface Listener {
  /** connects and listens; rejects when the first connection fails (it keeps retrying) */
  start(): Promise<void>;
  stop(): Promise<void>;
  connected(): boolean;
}

export function createListener(options: ListenerOptions): Listener {
  const { logger, channel } = options;
  let client: Client | undefined;
  let running = false;
  let retryMs = 0;
  let retry: NodeJS.Timeout | undefined;

  function scheduleReconnect(): void {
    if (!running || retry) return;
    retryMs = Math.min(Math.max(retryMs * 2, 250), 5000);
    retry = setTimeout(() => {
      retry = undefined;
      connect().then(
        () => options.onReconnect?.(),
        () => undefined,
      );
    }, retryMs);
    retry.unref();
  }

  async function connect(): Promise<void> {
    const c = new Client({ connectionString: options.databaseUrl });
    c.on('error', (err) => {
      logger.warn('listener lost its connection; reconnecting', { channel, error: err.message });
      if (client === c) client = undefined;
      void c.end().catch(() => undefined);
      scheduleReconnect();
    });
    c.on('notification', (n) => options.onNotify(n.payload ?? ''));
    try {
      await c.connect();
      await c.query(`LISTEN ${channel}`);
    } catch (err) {
      void c.end().catch(() => undefined);
      scheduleReconnect();
      throw err;
    }
    if (!running) {
      await c.end().catch(() => undefined);
      return;
    }
    client = c;
    retryMs = 0;
  }

  return {
    async start() {
      if (running) return;
      running = true;
      await connect();
    },
    async stop() {
      running = false;
      clearTimeout(retry);
      retry = undefined;
      const c = client;
      client = undefined;
      await c?.end().catch(() => undefined);
    },
    connected: () => client !== undefined,
  };
}
