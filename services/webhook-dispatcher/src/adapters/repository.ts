/**
 * The dispatcher's PostgreSQL adapters, one per noun: the monitor reader (monitorReader.ts: what a
 * job is read from), the attempt writer (attemptWriter.ts: what an attempt's answer writes) and the
 * due store (dueStore.ts: deliveries that wait for a retry or their turn). `createPrismaRepository`
 * puts them together on one client for the composition root (main.ts) and the tests; each part of
 * the dispatcher is handed only the adapter it uses.
 */
import type { Db, MonitorContext } from '@sts/db';
import type { MonitorContextCache } from '../contextCache';
import { createAttemptWriter, type AttemptWriter } from './attemptWriter';
import { createDueStore, type DueStore } from './dueStore';
import { createMonitorReader, type MonitorReader } from './monitorReader';

export type DispatcherRepository = MonitorReader &
  AttemptWriter &
  DueStore & {
    ping(): Promise<void>;
  };

export interface RepositoryOptions {
  /** monitor contexts kept between deliveries (contextCache.ts); without it every delivery reads its monitor */
  cache?: MonitorContextCache<MonitorContext>;
  /** DISPATCH_RECORD_LINGER_MS: how long an attempt row may wait for others to share its insert (0: the next turn) */
  recordLingerMs?: number;
  /** with a linger: rows that make an insert go at once (recordFillMark of the prefetch; default 64) */
  recordFillTo?: number;
}

export function createPrismaRepository(db: Db, options: RepositoryOptions = {}): DispatcherRepository {
  return {
    ...createMonitorReader(db, options.cache),
    ...createAttemptWriter(db, options),
    ...createDueStore(db),
    ping: async () => {
      await db.$queryRaw`SELECT 1`;
    },
  };
}
