/**
 * The gateway's filter of live API keys (domain/keyFilter.ts): built from PostgreSQL (the hashes
 * of every unrevoked key), added to as keys are created (apikey.changed on the event bus, on a
 * queue of this process only: immediate), and kept in step without the bus too: every `syncMs`
 * the keys created since the newest one seen (less a margin for slow commits) are added (one
 * indexed query, whatever the traffic), so a key inserted without an event (a seed, a lost
 * message) works within seconds. Every `rebuildMs`, and after each (re)subscription, the filter
 * is rebuilt, which also sheds revoked keys (a Bloom filter cannot remove). Until the first build
 * succeeds `mightExist` answers undefined (ask the database); a failed build or sync keeps the
 * previous filter and is retried at the next tick.
 */
import type { Logger } from '@sts/common';
import type { Db } from '@sts/db';
import type { ApiKeyChangedEvent, ConsumeOptions } from '@sts/messaging';
import { isKeyHash, KeyFilter } from '../domain/keyFilter';
import { gatewaySettingDefaults } from '../env';

export interface LiveKeys {
  /** false: not a live key; true: maybe; undefined: no filter built yet */
  mightExist(hash: string): boolean | undefined;
  /** a key was created: its hash joins the filter (and the one being built) */
  added(hash: string): void;
  /** builds a new filter from PostgreSQL and swaps it in (one at a time; concurrent calls share it) */
  rebuild(): Promise<void>;
  /** adds the keys created since the newest one seen (a rebuild when there is no filter yet) */
  sync(): Promise<void>;
  /** syncs every `syncMs` and rebuilds every `rebuildMs` until stop() */
  start(): void;
  stop(): void;
  /** keys in the current filter, or -1 before the first build */
  readonly size: number;
}

export interface LiveKeysOptions {
  db: Db;
  logger: Logger;
  /** how often the filter is rebuilt from PostgreSQL; default 5 min */
  rebuildMs?: number;
  /** how often keys created meanwhile are read; default 5 s */
  syncMs?: number;
}

/** a key committed this long after its created_at is still seen by the next sync */
const SYNC_MARGIN_MS = 60_000;

export function createLiveKeys(opts: LiveKeysOptions): LiveKeys {
  const rebuildMs = opts.rebuildMs ?? gatewaySettingDefaults.KEY_FILTER_REBUILD_MS;
  const syncMs = opts.syncMs ?? gatewaySettingDefaults.KEY_FILTER_SYNC_MS;
  let filter: KeyFilter | null = null;
  let newest = 0;
  let builtAt = 0;
  // hashes announced while a build reads the table: added to the new filter before the swap
  let announced: Set<string> | null = null;
  let building: Promise<void> | null = null;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const fail = (err: unknown) =>
    opts.logger.warn('live-key filter update failed; retrying', {
      err: err instanceof Error ? err.message : String(err),
    });

  async function build(): Promise<void> {
    announced = new Set();
    try {
      const started = Date.now();
      const rows = await opts.db.apiKey.findMany({
        where: { revokedAt: null },
        select: { keyHash: true, createdAt: true },
      });
      const next = new KeyFilter(Math.max(rows.length, 1024) * 2);
      let latest = 0;
      for (const { keyHash, createdAt } of rows) {
        if (isKeyHash(keyHash)) next.add(keyHash);
        latest = Math.max(latest, createdAt.getTime());
      }
      for (const h of announced) next.add(h);
      filter = next;
      newest = Math.max(latest, started - SYNC_MARGIN_MS);
      builtAt = started;
    } finally {
      announced = null;
    }
  }

  const live: LiveKeys = {
    mightExist: (hash) => filter?.mightContain(hash),
    added(hash) {
      if (!isKeyHash(hash)) return;
      filter?.add(hash);
      announced?.add(hash);
    },
    rebuild() {
      building ??= build().finally(() => {
        building = null;
      });
      return building;
    },
    async sync() {
      if (!filter) return live.rebuild();
      const rows = await opts.db.apiKey.findMany({
        where: { createdAt: { gt: new Date(newest - SYNC_MARGIN_MS) }, revokedAt: null },
        select: { keyHash: true, createdAt: true },
      });
      for (const { keyHash, createdAt } of rows) {
        live.added(keyHash);
        newest = Math.max(newest, createdAt.getTime());
      }
    },
    start() {
      const tick = () => {
        if (stopped) return;
        const due = Date.now() - builtAt >= rebuildMs ? live.rebuild() : live.sync();
        void due.catch(fail).finally(() => {
          if (stopped) return;
          timer = setTimeout(tick, syncMs);
          timer.unref();
        });
      };
      timer = setTimeout(tick, filter ? syncMs : 0);
      timer.unref();
    },
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
    get size() {
      return filter?.size ?? -1;
    },
  };
  return live;
}

/**
 * The gateway's subscription to apikey.changed: every gateway process gets every change. A
 * created key joins the filter; either change drops the key's in-process answer, so a revoked
 * key is refused at once, and `onRevoked` ends what the key still holds open (its live streams).
 * Each (re)subscription rebuilds the filter.
 */
export function keyChangesConsumer(
  live: LiveKeys,
  keys: { evict(hash: string): void },
  logger: Logger,
  onRevoked: (hash: string) => void = () => undefined,
): ConsumeOptions<'apikey.changed'> {
  return {
    queue: 'gateway.apikeys',
    mode: 'broadcast',
    bindings: ['apikey.changed'],
    onSubscribed: () =>
      void live.rebuild().then(
        () => logger.info('apikey.changed subscribed, live-key filter rebuilt', { keys: live.size }),
        (err: unknown) =>
          logger.warn('live-key filter update failed; retrying', {
            err: err instanceof Error ? err.message : String(err),
          }),
      ),
    handler: (env) => {
      const { keyHash, change }: ApiKeyChangedEvent = env.payload;
      if (change === 'created') live.added(keyHash);
      keys.evict(keyHash);
      if (change === 'revoked') onRevoked(keyHash);
      return Promise.resolve('ack');
    },
  };
}
