/**
 * A monitor's proof of coverage and of speed, as read-api's `/api/v1/monitors/:id/coverage` and
 * the dashboard's monitor page show it (docs/api.md "Coverage"). Read only from what the poller,
 * the stream and the backfill wrote (coverage_gaps, poll_cursors, x_stream_state, x_stream_owed,
 * hits, delivery_attempts); nothing here is estimated.
 *
 * - `coveredUntil`: the end of the target's last successful read (poll_cursors.last_success_at)
 *   or, for a target the X stream carries for this monitor's own account (the account is on
 *   Starter or a trial, one of its active monitors watches the target, and a stream position
 *   exists), the last time the stream was seen alive, whichever is later. Another account's
 *   plan never counts: coverage must not tell one tenant that another watches the target. Never past
 *   the start of a gap not filled yet nor of a stream window still owed to the backfill. Null
 *   while the target was never read.
 * - `gaps`: the target's gaps that were open at some time in the last 30 days and after the
 *   monitor's creation, newest first, at most GAPS_MAX.
 * - `intake`: a username monitor's watched account as the X Activity API intake recorded it
 *   (x_activity_accounts, written by the replica holding the `x-activity` lease): `pushed` with the
 *   event types X pushes for it that this monitor's `events` use, while a replica holds that lease
 *   and the row is for the account id last seen under the target; else `polled` (the account
 *   lookup at the plan's interval, posts by the post intake). Only this monitor's own event types
 *   are shown (another tenant's `events` on the same account never are). Null for a query monitor.
 * - `latency`: p50 and p95 (percentile_cont, in SQL) of post → detected over the hits detected in
 *   the last 24 h and 7 days, and of detected → delivered over their first delivered attempts of
 *   the same windows. Both reads are bounded by the partition keys (hits by the post's time, at
 *   most 7 days before the window; attempts by their time), so only the recent week partitions
 *   are scanned.
 */
import type { Db } from './client';
import { Prisma } from './generated/prisma/client';
import { QUERY_CURSOR_KEY, queryCursorKeyOf } from './rows';

export const COVERAGE_GAP_DAYS = 30;
export const GAPS_MAX = 1000;
/** a hit counts when its post was created at most this long before the window starts */
const POST_AGE_MS = 7 * 86_400_000;
const DAY_MS = 86_400_000;

export type CoverageGapReason = 'stream_down' | 'budget_refused' | 'source_error';

export interface CoverageGap {
  from: Date;
  /** null: still open */
  to: Date | null;
  reason: CoverageGapReason;
  filledAt: Date | null;
}

export interface LatencyStats {
  /** samples in the window */
  count: number;
  p50Ms: number | null;
  p95Ms: number | null;
}

interface LatencyWindow {
  detected: LatencyStats;
  delivered: LatencyStats;
}

/** how a username monitor's watched account reaches it: pushed by the X Activity API, or polled */
interface AccountIntake {
  path: 'pushed' | 'polled';
  /** the X Activity API event types X pushes for the account that this monitor uses; empty when polled */
  eventTypes: string[];
  /** when the intake last confirmed them (its last reconciliation); null when polled */
  confirmedAt: Date | null;
}

export interface MonitorCoverage {
  coveredUntil: Date | null;
  gaps: CoverageGap[];
  /** null for a query monitor (the X Activity API watches accounts) */
  intake: AccountIntake | null;
  latency: { last24h: LatencyWindow; last7d: LatencyWindow };
}

export interface CoverageMonitor {
  id: string;
  /** null for a query monitor: its coverage is the query intake's cursor (QUERY_CURSOR_KEY) */
  targetKey: string | null;
  createdAt: Date;
}

/** a monitor with the key its coverage is recorded under */
type Keyed = CoverageMonitor & { targetKey: string };

async function coveredUntil(db: Db, m: Keyed): Promise<Date | null> {
  const rows = await db.$queryRaw<{ covered_until: Date | null }[]>`
    WITH base AS (
      SELECT greatest(
        (SELECT last_success_at FROM poll_cursors WHERE target_key = ${m.targetKey}),
        (SELECT s.alive_at FROM x_stream_state s
         WHERE s.name = 'x' AND EXISTS (
           SELECT 1 FROM monitors own
           JOIN monitors w ON w.account_id = own.account_id
           JOIN accounts a ON a.id = w.account_id
           WHERE own.id = ${m.id}::uuid AND w.target_key = ${m.targetKey} AND w.is_active
             AND (a.plan <> 'free' OR a.trial_ends_at > now())))) AS at
    )
    SELECT CASE WHEN base.at IS NULL THEN NULL ELSE least(
      base.at,
      (SELECT min(starts_at) FROM coverage_gaps WHERE target_key = ${m.targetKey} AND filled_at IS NULL),
      (SELECT min(since) FROM x_stream_owed WHERE lower(username) = ${m.targetKey})) END AS covered_until
    FROM base`;
  return rows[0]?.covered_until ?? null;
}

/**
 * A query monitor's: the latest of the local store's query cursor, its own X search cursor
 * (`?query:<id>`) and, for a Starter or trial account's (its stream rule), the stream last seen
 * alive; held back by an open gap (a search refused or failed) and a window still owed to the
 * stream's backfill under its key.
 */
async function queryCoveredUntil(db: Db, monitorId: string): Promise<Date | null> {
  const own = queryCursorKeyOf(monitorId);
  const rows = await db.$queryRaw<{ covered_until: Date | null }[]>`
    WITH base AS (
      SELECT greatest(
        (SELECT max(last_success_at) FROM poll_cursors WHERE target_key IN (${QUERY_CURSOR_KEY}, ${own})),
        (SELECT s.alive_at FROM x_stream_state s
         WHERE s.name = 'x' AND EXISTS (
           SELECT 1 FROM monitors w JOIN accounts a ON a.id = w.account_id
           WHERE w.id = ${monitorId}::uuid AND w.is_active
             AND (a.plan <> 'free' OR a.trial_ends_at > now())))) AS at
    )
    SELECT CASE WHEN base.at IS NULL THEN NULL ELSE least(
      base.at,
      (SELECT min(starts_at) FROM coverage_gaps
       WHERE target_key IN (${QUERY_CURSOR_KEY}, ${own}) AND filled_at IS NULL),
      (SELECT min(since) FROM x_stream_owed WHERE username = ${own})) END AS covered_until
    FROM base`;
  return rows[0]?.covered_until ?? null;
}

/** a query monitor's gaps are the local query cursor's and its own (`?query:<id>`, its X windows) */
async function gaps(db: Db, m: Keyed, now: Date, query: boolean): Promise<CoverageGap[]> {
  const since = new Date(Math.max(now.getTime() - COVERAGE_GAP_DAYS * DAY_MS, m.createdAt.getTime()));
  const keys = query ? [m.targetKey, queryCursorKeyOf(m.id)] : [m.targetKey];
  return db.$queryRaw<CoverageGap[]>`
    SELECT starts_at AS "from", ends_at AS "to", reason, filled_at AS "filledAt"
    FROM coverage_gaps
    WHERE target_key = ANY(${keys}::text[]) AND (ends_at IS NULL OR ends_at >= ${since})
    ORDER BY starts_at DESC, id DESC
    LIMIT ${GAPS_MAX}`;
}

/** the X Activity API event types a monitor's `events` use (the poller's domain/activity.ts) */
function monitorEventTypes(events: readonly string[], pushed: readonly string[]): string[] {
  return pushed.filter(
    (t) =>
      (events.includes('profile') && t.startsWith('profile.update.')) ||
      (events.includes('deletes') && t === 'post.delete') ||
      (events.includes('posts') && t === 'post.create'),
  );
}

/** the lease row of the X Activity API intake (services/poller src/intake/activity) */
const ACTIVITY_LEASE = 'x-activity';

async function intake(db: Db, m: Keyed): Promise<AccountIntake> {
  const [row] = await db.$queryRaw<{ events: string[]; event_types: string[] | null; updated_at: Date | null }[]>`
    SELECT m.events, xa.event_types, xa.updated_at
    FROM monitors m
    LEFT JOIN x_activity_accounts xa ON xa.target_key = m.target_key AND m.is_active
      AND EXISTS (SELECT 1 FROM target_profiles tp WHERE tp.target_key = xa.target_key AND tp.user_id = xa.user_id)
      AND EXISTS (SELECT 1 FROM x_stream_lease l WHERE l.name = ${ACTIVITY_LEASE} AND l.expires_at > now())
    WHERE m.id = ${m.id}::uuid`;
  const types = monitorEventTypes(row?.events ?? [], row?.event_types ?? []).sort();
  if (types.length === 0) return { path: 'polled', eventTypes: [], confirmedAt: null };
  return { path: 'pushed', eventTypes: types, confirmedAt: row!.updated_at };
}

interface LatencyRow {
  n_day: bigint;
  p50_day: number | null;
  p95_day: number | null;
  n_week: bigint;
  p50_week: number | null;
  p95_week: number | null;
}

const stats = (n: bigint, p50: number | null, p95: number | null): LatencyStats => ({
  count: Number(n),
  p50Ms: p50 === null ? null : Math.round(p50),
  p95Ms: p95 === null ? null : Math.round(p95),
});

/** the two windows of one percentile row */
function windows(row: LatencyRow | undefined): { day: LatencyStats; week: LatencyStats } {
  return {
    day: stats(row?.n_day ?? 0n, row?.p50_day ?? null, row?.p95_day ?? null),
    week: stats(row?.n_week ?? 0n, row?.p50_week ?? null, row?.p95_week ?? null),
  };
}

/**
 * The two percentile reads of `latency`, each bounded by its tables' partition keys (hits:
 * tweet_created_at, attempts: created_at) so that only the recent weeks are read.
 */
export function latencyQueries(monitorId: string, now: Date): { detected: Prisma.Sql; delivered: Prisma.Sql } {
  const day = new Date(now.getTime() - DAY_MS);
  const week = new Date(now.getTime() - 7 * DAY_MS);
  const oldestPost = new Date(week.getTime() - POST_AGE_MS);
  const percentiles = Prisma.sql`
    SELECT count(*) FILTER (WHERE at >= ${day}) AS n_day,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) FILTER (WHERE at >= ${day}) AS p50_day,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY ms) FILTER (WHERE at >= ${day}) AS p95_day,
           count(*) AS n_week,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) AS p50_week,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY ms) AS p95_week`;
  return {
    detected: Prisma.sql`${percentiles}
      FROM (
        SELECT h.detected_at AS at,
               greatest(0, extract(epoch FROM h.detected_at - h.tweet_created_at) * 1000)::float8 AS ms
        FROM hits h
        WHERE h.monitor_id = ${monitorId}::uuid AND h.tweet_created_at >= ${oldestPost}
          AND h.detected_at >= ${week} AND h.detected_at <= ${now}
      ) samples`,
    delivered: Prisma.sql`${percentiles}
      FROM (
        SELECT d.delivered_at AS at,
               greatest(0, extract(epoch FROM d.delivered_at - h.detected_at) * 1000)::float8 AS ms
        FROM (
          SELECT hit_id, min(created_at) AS delivered_at FROM delivery_attempts
          WHERE monitor_id = ${monitorId}::uuid AND event = 'monitor.hit' AND outcome = 'delivered'
            AND hit_id IS NOT NULL AND created_at >= ${week} AND created_at <= ${now}
          GROUP BY hit_id
        ) d
        JOIN hits h ON h.id = d.hit_id AND h.monitor_id = ${monitorId}::uuid AND h.tweet_created_at >= ${oldestPost}
      ) samples`,
  };
}

async function latency(db: Db, m: Keyed, now: Date): Promise<MonitorCoverage['latency']> {
  const q = latencyQueries(m.id, now);
  const [detected] = await db.$queryRaw<LatencyRow[]>(q.detected);
  const [delivered] = await db.$queryRaw<LatencyRow[]>(q.delivered);
  const a = windows(detected);
  const b = windows(delivered);
  return {
    last24h: { detected: a.day, delivered: b.day },
    last7d: { detected: a.week, delivered: b.week },
  };
}

/** The monitor's coverage (the caller checked that the monitor is the account's). */
export async function readMonitorCoverage(
  db: Db,
  of: CoverageMonitor,
  now: Date = new Date(),
): Promise<MonitorCoverage> {
  const monitor: Keyed = { ...of, targetKey: of.targetKey ?? QUERY_CURSOR_KEY };
  const [until, gapList, speed, account] = await Promise.all([
    of.targetKey === null ? queryCoveredUntil(db, of.id) : coveredUntil(db, monitor),
    gaps(db, monitor, now, of.targetKey === null),
    latency(db, monitor, now),
    of.targetKey === null ? null : intake(db, monitor),
  ]);
  return { coveredUntil: until, gaps: gapList, intake: account, latency: speed };
}
