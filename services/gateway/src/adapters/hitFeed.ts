/**
 * Live hits for this gateway process: an exclusive, auto-delete queue of its own bound to the
 * `monitor.events` topic exchange for `monitor.hit`. Every replica gets every hit (a shared queue
 * would split them between replicas, and a stream is connected to one replica only); a replica
 * that dies takes its queue with it. Messages are not acknowledged (noAck): the feed is a hint
 * for connected clients; what a stream may have missed (a broken AMQP connection) is read again
 * from PostgreSQL, the record of every hit, through `onResync`.
 */
import amqp, { type ChannelModel, type ConsumeMessage } from 'amqplib';
import type { Logger } from '@sts/common';
import { EXCHANGE, MonitorHitPayload, type MonitorHitEvent } from '@sts/messaging';

export interface LiveHit {
  accountId: string;
  hitId: string;
  payload: MonitorHitEvent;
}

export interface HitFeedOptions {
  url: string;
  logger: Logger;
  onHit: (hit: LiveHit) => void;
  /** the feed (re)connected: hits published while it was down were not seen */
  onResync: () => void;
  /** most hits the queue holds for a stalled process (oldest dropped, then re-read on resync); default 10,000 */
  maxQueued?: number;
  retryMs?: number;
}

export interface HitFeed {
  start(): void;
  stop(): Promise<void>;
  readonly connected: boolean;
}

export function createHitFeed(options: HitFeedOptions): HitFeed {
  const { logger } = options;
  let conn: ChannelModel | null = null;
  let stopped = false;
  let connected = false;
  let everConnected = false;
  let timer: NodeJS.Timeout | undefined;

  const onMessage = (msg: ConsumeMessage | null) => {
    if (msg === null) return;
    const headers: Record<string, unknown> = msg.properties.headers ?? {};
    const accountId = headers['x-account-id'];
    const hitId = headers['x-hit-id'];
    if (typeof accountId !== 'string' || typeof hitId !== 'string') return;
    let parsed;
    try {
      parsed = MonitorHitPayload.safeParse(JSON.parse(msg.content.toString('utf8')));
    } catch {
      return;
    }
    if (parsed.success) options.onHit({ accountId, hitId, payload: parsed.data });
  };

  const retry = () => {
    connected = false;
    conn = null;
    if (stopped) return;
    timer = setTimeout(() => void connect(), options.retryMs ?? 1000);
    timer.unref();
  };

  async function connect(): Promise<void> {
    try {
      const c = await amqp.connect(options.url);
      if (stopped) return void (await c.close().catch(() => undefined));
      conn = c;
      c.on('error', (err: unknown) => logger.warn('hit feed connection error', { err: String(err) }));
      c.on('close', retry);
      const ch = await c.createChannel();
      await ch.assertExchange(EXCHANGE, 'topic', { durable: true });
      const q = await ch.assertQueue('', {
        exclusive: true,
        autoDelete: true,
        arguments: { 'x-max-length': options.maxQueued ?? 10_000, 'x-overflow': 'drop-head' },
      });
      await ch.bindQueue(q.queue, EXCHANGE, 'monitor.hit');
      await ch.consume(q.queue, onMessage, { noAck: true });
      connected = true;
      if (everConnected) logger.info('hit feed reconnected');
      everConnected = true;
      options.onResync();
    } catch (err) {
      logger.warn('hit feed cannot connect; retrying', { err: String(err) });
      if (conn) conn.close().catch(() => undefined);
      else retry();
    }
  }

  return {
    start: () => void connect(),
    get connected() {
      return connected;
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      const c = conn;
      conn = null;
      if (c) await c.close().catch(() => undefined);
    },
  };
}
