/**
 * Parking: a message whose endpoint is backed up is copied to a delay queue and the original is
 * acknowledged, so it stops holding a prefetch slot another endpoint could use (see lanes.ts).
 *
 *   <queue>.defer (direct exchange) --monitor.hit|monitor.test|webhook.redeliver--> <queue>.parked
 *   <queue>.parked (durable quorum queue; messages expire after DISPATCH_DEFER_MS, dead-lettered to) <queue>.return
 *   <queue>.return (direct exchange) --same keys--> <queue>  (the dispatcher's own queue, at its tail)
 *
 * The copy keeps the routing key, message id, headers and timestamp, so it comes back as the
 * same message (same delivery id), and only to this queue (other services bound to
 * `monitor.events` never see it twice). At least once: the original is acknowledged only after
 * the broker confirmed the copy; if parking fails the caller keeps the message in memory instead.
 *
 * Why its own connection: AmqpClient publishes only to `monitor.events` (every bound queue would
 * get the copy) and exposes no channel; this needs a confirm channel on two private exchanges.
 * It is opened on first use and again after a loss; it never consumes.
 */
import { connect, type ChannelModel, type ConfirmChannel } from 'amqplib';
import type { Logger } from '@sts/common';
import { parkedQueueArguments, parkingNames, toAmqpHeaders, type Envelope, type RoutingKey } from '@sts/messaging';
import { errorMessage } from '@sts/core';

export interface Parking {
  /** declares the exchanges and the delay queue and binds `queue` to the return exchange */
  setup(): Promise<void>;
  /** resolves true once the broker confirmed the parked copy (the original may then be acked) */
  park(env: Envelope<RoutingKey>): Promise<boolean>;
  /** messages waiting in `queue` (passive declare on the parking connection; for the DLQ gauge) */
  depth(queue: string): Promise<number>;
  close(): Promise<void>;
}

export interface ParkingOptions {
  url: string;
  queue: string;
  bindings: readonly RoutingKey[];
  delayMs: number;
  logger: Logger;
  /** how long a park may wait for the broker's confirm */
  confirmTimeoutMs?: number;
}

type ParkingChannel = { conn: ChannelModel; ch: ConfirmChannel };

/** opens the parking connection and declares its exchanges and queue; `onLost` runs when it closes */
async function openParking(options: ParkingOptions, onLost: () => void): Promise<ParkingChannel> {
  const names = parkingNames(options.queue);
  const conn = await connect(options.url, { clientProperties: { connection_name: `${options.queue}-parking` } });
  conn.on('close', onLost);
  conn.on('error', (err: unknown) => options.logger.warn('parking connection error', { err: errorMessage(err) }));
  try {
    const ch = await conn.createConfirmChannel();
    ch.on('close', onLost);
    ch.on('error', () => undefined); // the connection's handlers report it
    await ch.assertExchange(names.defer, 'direct', { durable: true });
    await ch.assertExchange(names.back, 'direct', { durable: true });
    await ch.assertQueue(names.parked, { durable: true, arguments: parkedQueueArguments(options.queue) });
    for (const key of options.bindings) {
      await ch.bindQueue(names.parked, names.defer, key);
      await ch.bindQueue(options.queue, names.back, key);
    }
    return { conn, ch };
  } catch (err) {
    await conn.close().catch(() => undefined);
    throw err;
  }
}

/** publishes the parked copy; resolves once the broker confirmed it */
function publishParked(ch: ConfirmChannel, options: ParkingOptions, env: Envelope<RoutingKey>): Promise<void> {
  const body = Buffer.from(JSON.stringify(env.payload), 'utf8');
  return new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no confirm')), options.confirmTimeoutMs ?? 5000);
    ch.publish(
      parkingNames(options.queue).defer,
      env.routingKey,
      body,
      {
        messageId: env.messageId,
        type: env.routingKey,
        contentType: 'application/json',
        persistent: true,
        expiration: String(options.delayMs),
        ...(env.publishedAt ? { timestamp: Math.floor(env.publishedAt.getTime() / 1000) } : {}),
        headers: toAmqpHeaders(env.headers),
      },
      (err: unknown) => {
        clearTimeout(timer);
        if (err) reject(err instanceof Error ? err : new Error('message nacked'));
        else resolve();
      },
    );
  });
}

export function createAmqpParking(options: ParkingOptions): Parking {
  let current: Promise<ParkingChannel> | null = null;
  let closed = false;
  const drop = () => {
    current = null;
  };

  function channel(): Promise<ParkingChannel> {
    if (closed) return Promise.reject(new Error('parking is closed'));
    current ??= openParking(options, drop).catch((err: unknown) => {
      current = null;
      throw err;
    });
    return current;
  }

  return {
    async setup() {
      await channel();
    },
    async park(env) {
      try {
        const { ch } = await channel();
        await publishParked(ch, options, env);
        return true;
      } catch (err) {
        options.logger.warn('parking a message failed; it waits in memory instead', {
          messageId: env.messageId,
          err: errorMessage(err),
        });
        return false;
      }
    },
    async depth(queue) {
      const { ch } = await channel();
      return (await ch.checkQueue(queue)).messageCount;
    },
    async close() {
      closed = true;
      const c = current;
      current = null;
      if (c) await (await c.catch(() => null))?.conn.close().catch(() => undefined);
    },
  };
}
