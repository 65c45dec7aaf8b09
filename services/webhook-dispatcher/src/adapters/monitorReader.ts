/**
 * The monitor reader: what a delivery's job is read from. Everything a delivery needs of its
 * monitor comes from one look-up (the monitor, its account's plan and its webhook endpoint:
 * @sts/db's MONITOR_CONTEXT_SQL on the client's node-postgres pool), batched per tick (batch.ts)
 * and served from the monitor context cache (contextCache.ts) while it holds the monitor; the
 * hit, the stored event and the attempt a redelivery names, and the attempts already logged
 * under a delivery id, are Prisma reads.
 */
import {
  hitSelect,
  MONITOR_CONTEXT_SQL,
  monitorContextOf,
  sqlPool,
  type Db,
  type HitRow as HitRecord,
  type MonitorContext,
  type MonitorContextRow,
  type SqlPool,
} from '@sts/db';
import type { MonitorContextCache } from '../contextCache';
import type { AttemptOutcome } from './attemptWriter';
import { createBatcher } from './batch';

export type { MonitorContext };

interface AttemptRecord {
  id: string;
  monitorId: string;
  hitId: string | null;
  event: string;
  deliveryId: string;
  outcome: AttemptOutcome;
}

interface LoggedAttempt {
  outcome: AttemptOutcome;
  statusCode: number | null;
  /** its number in the delivery's schedule (null: logged before attempts were numbered) */
  attempt: number | null;
}

export interface MonitorReader {
  getMonitor(id: string): Promise<MonitorContext | null>;
  /** a recorded hit with its sequence number (null: recorded before events were numbered) */
  getHit(id: string): Promise<(HitRecord & { sequence: bigint | null }) | null>;
  /** a stored monitor.profile_changed / monitor.target_unavailable event (its payload as first sent) */
  getMonitorEvent(id: string): Promise<{ id: string; kind: string; payload: unknown } | null>;
  getAttempt(id: string): Promise<AttemptRecord | null>;
  /** the attempts already logged with this delivery id (outcome and status) */
  loggedAttempts(deliveryId: string): Promise<LoggedAttempt[]>;
}

/**
 * monitor look-ups, batched: one SELECT for the ids asked for in the same tick. With a cache, a
 * monitor held there is not read; the cache is asked after the current turn's I/O callbacks, so
 * a change announced in the same turn as the message that needs the monitor is applied first.
 */
function monitorLoader(sql: SqlPool, cache: MonitorContextCache<MonitorContext> | undefined) {
  const load = createBatcher<string, MonitorContext | null>(async (ids) => {
    const epoch = cache?.epoch() ?? 0;
    const { rows } = await sql.query<MonitorContextRow>(MONITOR_CONTEXT_SQL, [[...new Set(ids)]]);
    const byId = new Map(rows.map((r) => [r.id, monitorContextOf(r)]));
    if (cache) for (const monitor of byId.values()) cache.keep(monitor, epoch);
    return ids.map((id) => byId.get(id) ?? null);
  });
  if (!cache) return load;
  return (id: string) =>
    new Promise<MonitorContext | null>((resolve, reject) =>
      setImmediate(() => {
        const held = cache.get(id);
        if (held) resolve(held);
        else load(id).then(resolve, reject);
      }),
    );
}

/** without `cache` every look-up reads its monitor */
export function createMonitorReader(db: Db, cache?: MonitorContextCache<MonitorContext>): MonitorReader {
  const loadMonitors = monitorLoader(sqlPool(db), cache);
  return {
    getMonitor: (id) => loadMonitors(id),
    getHit: (id) => db.hit.findFirst({ where: { id }, select: { ...hitSelect, sequence: true } }),
    getMonitorEvent: (id) =>
      db.monitorEvent.findUnique({ where: { id }, select: { id: true, kind: true, payload: true } }),
    getAttempt: (id) =>
      db.deliveryAttempt.findFirst({
        where: { id },
        select: { id: true, monitorId: true, hitId: true, event: true, deliveryId: true, outcome: true },
      }),
    loggedAttempts: (deliveryId) =>
      db.deliveryAttempt.findMany({
        where: { deliveryId },
        select: { outcome: true, statusCode: true, attempt: true },
      }),
  };
}
