/**
 * Feeds the monitor-context cache (contextCache.ts) from PostgreSQL over the process's direct
 * session (@sts/db DirectSession, DATABASE_DIRECT_URL):
 *
 * - LISTEN sts_monitor_context: each announced change drops its entries.
 * - A heartbeat: every `heartbeatMs` a notification to a channel of this process alone, sent
 *   through the pool (`notify`), another session, as every change is. Notifications reach a
 *   listener in commit order, so when the heartbeat comes back every change committed before it
 *   has been heard; the cache is then trusted for `trustMs` more. Sent on the listening session
 *   itself it would prove less: through a transaction-mode PgBouncer a session hears what it
 *   sends itself and nothing another session sends. A session that is lost, or silently stops hearing, loses that trust within
 *   `trustMs`, and every look-up reads the database until a heartbeat returns. One heartbeat is
 *   outstanding at a time; one that has not come back after `trustMs` has the session reconnect
 *   (a connection that looks open but no longer answers would otherwise stay until TCP gives up).
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from '@sts/common';
import { errorMessage } from '@sts/core';
import type { DirectSession } from '@sts/db';
import type { MonitorContextCache } from '../contextCache';

/** the channel of migration 20261126180000_monitor_context_notify */
const CONTEXT_CHANNEL = 'sts_monitor_context';

/** application_name of the dispatcher's direct session (pg_stat_activity) */
export const DISPATCHER_SESSION_NAME = 'sts-dispatcher-session';

export interface ContextChangesOptions {
  /** sends `pg_notify(channel, payload)` from another session than `session` (the service's pool) */
  notify: (channel: string, payload: string) => Promise<unknown>;
  heartbeatMs?: number;
  /** how long a returned heartbeat vouches for the cache (default 2.5 heartbeats) */
  trustMs?: number;
  logger: Logger;
}

export interface ContextChanges {
  /** settles once both channels are listened to (or the first connection failed; it keeps retrying) */
  ready: Promise<void>;
  close(): Promise<void>;
}

export function listenForContextChanges(
  cache: MonitorContextCache,
  session: DirectSession,
  options: ContextChangesOptions,
): ContextChanges {
  const heartbeatMs = options.heartbeatMs ?? 1000;
  const trustMs = options.trustMs ?? heartbeatMs * 2.5;
  const heartbeatChannel = `${CONTEXT_CHANNEL}_${randomBytes(8).toString('hex')}`;
  let beats = 0;
  // until a heartbeat came back on the current connection, they go every 100 ms: the cache
  // starts serving soon after a (re)connect
  let proven = false;
  /** when the heartbeat not yet back was sent */
  let outstanding: number | undefined;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;

  const beat = () => {
    const now = Date.now();
    if (outstanding !== undefined) {
      if (now - outstanding < trustMs) return;
      outstanding = undefined;
      return session.reconnect('the monitor cache heartbeat did not come back');
    }
    if (!session.connected()) return;
    outstanding = now;
    options.notify(heartbeatChannel, String(++beats)).catch(() => {
      outstanding = undefined;
    });
  };
  const schedule = () => {
    if (closed) return;
    timer = setTimeout(
      () => {
        beat();
        schedule();
      },
      proven ? heartbeatMs : Math.min(heartbeatMs, 100),
    );
    timer.unref();
  };
  /** the connection is gone or new: nothing it heard before vouches for the cache */
  const unproven = () => {
    proven = false;
    outstanding = undefined;
    cache.distrust();
  };
  const unsubscribe = Promise.all([
    session.listen(CONTEXT_CHANNEL, {
      onNotify: (payload) => cache.changed(payload),
      onLost: unproven,
      onReconnect: () => {
        unproven();
        beat();
      },
    }),
    session.listen(heartbeatChannel, {
      onNotify: () => {
        proven = true;
        outstanding = undefined;
        cache.confirm(Date.now() + trustMs);
      },
    }),
  ]);
  schedule();
  const ready = unsubscribe.then(beat, (err: unknown) => {
    options.logger.warn('monitor cache: could not listen for changes; every delivery reads its monitor', {
      err: errorMessage(err),
    });
  });

  return {
    ready,
    async close() {
      closed = true;
      clearTimeout(timer);
      cache.distrust();
      const offs = await unsubscribe.catch(() => []);
      for (const off of offs) off();
    },
  };
}
