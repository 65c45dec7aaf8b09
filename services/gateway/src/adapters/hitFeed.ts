/**
 * Live hits for this gateway process: a broadcast consumer of the gateway's one AmqpClient (the
 * connection apikey.changed also uses), on an exclusive, auto-delete queue of this process bound to
 * `monitor.events` for `monitor.hit`. Every replica gets every hit (a shared queue would split them
 * between replicas, and a stream is connected to one replica only); a replica that dies takes its
 * queue with it, and the client declares a new one after each reconnect. The feed is a hint for
 * connected clients: what a stream may have missed (a broken connection, the queue's bound) is read
 * again from PostgreSQL, the record of every hit, through `onResync`, run after each subscription.
 */
import type { ConsumeOptions, MonitorHitEvent } from '@sts/messaging';

export interface LiveHit {
  accountId: string;
  hitId: string;
  payload: MonitorHitEvent;
}

export interface HitFeedOptions {
  onHit: (hit: LiveHit) => void;
  /** the feed (re)subscribed: hits published while it was down were not seen */
  onResync: () => void;
  /** most hits the queue holds for a stalled process (oldest dropped, then re-read on resync); default 10,000 */
  maxQueued?: number;
}

/** the consumer to pass to AmqpClient.consume */
export function hitFeedConsumer(options: HitFeedOptions): ConsumeOptions<'monitor.hit'> {
  return {
    queue: 'gateway.hits',
    mode: 'broadcast',
    bindings: ['monitor.hit'],
    maxQueued: options.maxQueued ?? 10_000,
    // the handler only hands the hit to in-memory streams: many may be unacknowledged at once
    prefetch: 1000,
    onSubscribed: options.onResync,
    handler: (env) => {
      options.onHit({ accountId: env.headers.accountId, hitId: env.headers.hitId, payload: env.payload });
      return Promise.resolve('ack');
    },
  };
}
