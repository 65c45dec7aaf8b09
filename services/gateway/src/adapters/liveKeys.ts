/**
 * The gateway's filter of live API keys (domain/keyFilter.ts): built from PostgreSQL (the hashes
 * of every unrevoked key), added to as keys are created (apikey.changed on the event bus, on a
 * queue of this process only), and rebuilt after each (re)subscription — events published while
 * disconnected are missed — and every `rebuildMs` (which also sheds revoked keys: a Bloom filter
 * cannot remove). Until the first build succeeds `mightExist` answers undefined (ask the
 * database); a failed rebuild keeps the previous filter and is retried sooner.
 */
import type { Logger } from '@sts/common';
import type { Db } from '@sts/db';
import type { ApiKeyChangedEvent, ConsumeOptions } from '@sts/messaging';
import { isKeyHash, KeyFilter } from '../domain/keyFilter';

export interface LiveKeys {
  /** false: not a live key; true: maybe; undefined: no filter built yet */
  mightExist(hash: string): boolean | undefined;
  /** a key was created: its hash joins the filter (and the one being built) */
  added(hash: string): void;
  /** builds a new filter from PostgreSQL and swaps it in (one at a time; concurrent calls share it) */
  rebuild(): Promise<void>;
  /** rebuilds every `rebuildMs` (sooner after a failure) until stop() */
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
  /** the retry delay after a failed build; default 5 s */
  retryMs?: number;
}

export function createLiveKeys(opts: LiveKeysOptions): LiveKeys {
  const rebuildMs = opts.rebuildMs ?? 300_000;
  const retryMs = opts.retryMs ?? 5000;
  let filter: KeyFilter | null = null;
  // hashes announced while a build reads the table: added to the new filter before the swap
  let announced: Set<string> | null = null;
  let building: Promise<void> | null = null;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;

  async function build(): Promise<void> {
    announced = new Set();
    try {
      const rows = await opts.db.apiKey.findMany({ where: { revokedAt: null }, select: { keyHash: true } });
      const next = new KeyFilter(Math.max(rows.length, 1024) * 2);
      for (const { keyHash } of rows) if (isKeyHash(keyHash)) next.add(keyHash);
      for (const h of announced) next.add(h);
      filter = next;
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
    start() {
      const schedule = (ms: number) => {
        if (stopped) return;
        timer = setTimeout(() => {
          live.rebuild().then(
            () => schedule(rebuildMs),
            (err: unknown) => {
              opts.logger.warn('live-key filter rebuild failed; retrying', {
                err: err instanceof Error ? err.message : String(err),
              });
              schedule(retryMs);
            },
          );
        }, ms);
        timer.unref();
      };
      schedule(filter ? rebuildMs : 0);
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
 * key is refused at once. Each (re)subscription rebuilds the filter.
 */
export function keyChangesConsumer(
  live: LiveKeys,
  keys: { evict(hash: string): void },
  logger: Logger,
): ConsumeOptions<'apikey.changed'> {
  return {
    queue: 'gateway.apikeys',
    mode: 'broadcast',
    bindings: ['apikey.changed'],
    onSubscribed: () =>
      void live.rebuild().then(
        () => logger.info('apikey.changed subscribed, live-key filter rebuilt', { keys: live.size }),
        (err: unknown) =>
          logger.warn('live-key filter rebuild failed; retrying', {
            err: err instanceof Error ? err.message : String(err),
          }),
      ),
    handler: (env) => {
      const { keyHash, change }: ApiKeyChangedEvent = env.payload;
      if (change === 'created') live.added(keyHash);
      keys.evict(keyHash);
      return Promise.resolve('ack');
    },
  };
}
