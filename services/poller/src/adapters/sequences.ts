/**
 * The per-monitor event sequence (docs/webhooks.md "Sequence"), assigned in the statement that
 * records the events, set-based: one upsert of `monitor_sequences` adds each monitor's count of
 * new events and returns its new last number (the row is made with the monitor by a trigger, so
 * this is an update; the insert half only covers a monitor written with triggers off); the events take last − count + 1 … last in their
 * order. The upsert locks each monitor's counter row until the transaction ends (in monitor id
 * order, so two statements numbering overlapping monitors cannot deadlock on it), so a monitor's
 * numbers are handed out one transaction at a time, each continuing where the last committed one
 * stopped: gap-free as long as every numbered event is written (the hit writer's guard,
 * `sts_hits_sequenced`, fails the statement when one was not).
 */
import { Prisma } from '@sts/db';

/**
 * The CTEs `counts`, `seq` and `numbered`: the rows of CTE `source` (with `monitor_id` and an
 * order column `ord`) each with its `sequence`. `source` must hold each event once.
 */
export function sequenceCtes(source: string): Prisma.Sql {
  const from = Prisma.raw(source);
  return Prisma.sql`
    counts AS (SELECT monitor_id, count(*) AS n FROM ${from} GROUP BY monitor_id),
    seq AS (
      INSERT INTO monitor_sequences (monitor_id, last_sequence)
      SELECT monitor_id, n FROM counts ORDER BY monitor_id
      ON CONFLICT (monitor_id) DO UPDATE SET last_sequence = monitor_sequences.last_sequence + EXCLUDED.last_sequence
      RETURNING monitor_id, last_sequence
    ),
    numbered AS (
      SELECT s.*, q.last_sequence - c.n + row_number() OVER (PARTITION BY s.monitor_id ORDER BY s.ord) AS sequence
      FROM ${from} s JOIN counts c ON c.monitor_id = s.monitor_id JOIN seq q ON q.monitor_id = s.monitor_id
    )`;
}

/** how often a recording statement that lost a race for a monitor's numbers is run again */
const CONFLICT_ATTEMPTS = 5;

/** a serialization failure (40001: the guard) or a deadlock (40P01): the statement changed nothing */
function isConflict(err: unknown, depth = 0): boolean {
  if (!err || typeof err !== 'object' || depth > 5) return false;
  const e = err as {
    code?: unknown;
    meta?: { code?: unknown; driverAdapterError?: { cause?: { originalCode?: unknown; kind?: unknown } } };
    cause?: unknown;
  };
  if (e.code === 'P2034') return true;
  const codes = [e.code, e.meta?.code, e.meta?.driverAdapterError?.cause?.originalCode];
  if (codes.some((c) => c === '40001' || c === '40P01')) return true;
  if (e.meta?.driverAdapterError?.cause?.kind === 'TransactionWriteConflict') return true;
  return isConflict(e.cause, depth + 1);
}

/**
 * Runs a recording statement (or transaction) again when it failed on a conflict over a monitor's
 * numbers: it rolled back whole, and the next run's snapshot sees what the other one committed.
 */
export async function retryConflicts<T>(run: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (err) {
      if (attempt >= CONFLICT_ATTEMPTS || !isConflict(err)) throw err;
    }
  }
}
