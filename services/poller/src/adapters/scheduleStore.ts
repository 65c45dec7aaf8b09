/**
 * The schedule store: which targets are due and who watches them, in PostgreSQL.
 * A tick CLAIMS its due targets (`claimDue`): the oldest-due rows, at most `limit`, locked with
 * FOR UPDATE SKIP LOCKED and moved to a claim expiry in one statement, so each due target goes to
 * one replica per interval; a replica that dies leaves its claims to expire.
 */
import { Prisma, WATCHING_MONITOR_COLUMNS, type Db, type QueryWatcher, type WatchingMonitor } from '@sts/db';
import type { TargetStatus } from '@sts/messaging';
import type { PlanName } from '@sts/core';
import { pgTime, type ReadTime, type ScheduleWrite, type TargetState } from '../domain/schedule';

/** A target a tick claimed: its schedule row holds `until` until the poll writes its next due time. */
export interface Claim {
  targetKey: string;
  /** the claim's expiry, as stored (next_due_at) */
  until: string;
  /** next_due_at before the claim: what a release puts back (the target keeps its place) */
  dueAt: string;
}

/** what a tick claimed: the targets, their claims and the read time on PostgreSQL's clock */
interface Claimed {
  readAt: ReadTime;
  targets: TargetState[];
  claims: Claim[];
}

export interface ScheduleStore {
  /** every target with active monitors (a forced cycle) */
  targets(): Promise<TargetState[]>;
  /**
   * Claims up to `limit` due targets, oldest next_due_at first, for `ttlMs` (poll_targets,
   * indexed; rows another replica is claiming are skipped): what a tick reads. The read time is
   * PostgreSQL's clock (with its microseconds).
   */
  claimDue(limit: number, ttlMs: number): Promise<Claimed>;
  /** gives back claims this replica did not poll: each target is due again at its old time */
  release(claims: readonly Claim[]): Promise<void>;
  /** one target's state (null: no active monitor watches it) */
  target(targetKey: string): Promise<TargetState | null>;
  /**
   * The pushed targets (pushed = true, an active monitor): what the push polls once when its LISTEN
   * connection came back (the committed tweets notified meanwhile were lost).
   */
  pushedTargets(): Promise<string[]>;
  /** writes re-evaluated schedules of targets that were read as due but are not */
  reschedule(rows: (ScheduleWrite & { targetKey: string })[]): Promise<void>;
  monitorsFor(targetKey: string): Promise<WatchingMonitor[]>;
  /** every active query monitor (the query intake matches each committed post against them) */
  queryMonitors(): Promise<WatchingMonitor[]>;
  /** every active query monitor with its account's plan (X: its rule or its search, its interval) */
  queryWatchers(): Promise<QueryWatcher[]>;
  /** the active monitors of several targets in one read, by target */
  monitorsForMany(targetKeys: readonly string[]): Promise<Map<string, WatchingMonitor[]>>;
}

interface TargetRow {
  target_key: string;
  username: string;
  plans: PlanName[];
  free_trial_ends_at: Date | null;
  last_polled_at: Date | null;
  last_success_at: Date | null;
  target_status: TargetStatus | null;
}

/**
 * One row per target among `keys` (every target with `all`): its distinct plans, and the latest
 * trial end among its Free accounts (enough to tell whether any of them is on an active trial).
 * A key list reads just those targets' monitors, one (target_key, is_active) index probe each
 * (LATERAL; OFFSET 0 keeps the planner from flattening it into a hash join over a scan of
 * monitors), whatever share of the table they are: a tick's work follows what it claimed.
 */
function targetRows(db: Db, keys: readonly string[] | 'all'): Promise<TargetRow[]> {
  const watching =
    keys === 'all'
      ? Prisma.sql`SELECT target_key, target_username, account_id FROM monitors WHERE is_active`
      : Prisma.sql`
          SELECT w.* FROM unnest(${keys}::text[]) AS k(key)
          CROSS JOIN LATERAL (
            SELECT m.target_key, m.target_username, m.account_id FROM monitors m
            WHERE m.target_key = k.key AND m.is_active
            OFFSET 0
          ) w`;
  return db.$queryRaw<TargetRow[]>`
    SELECT m.target_key, min(m.target_username) AS username,
           array_agg(DISTINCT a.plan::text) AS plans,
           max(a.trial_ends_at) FILTER (WHERE a.plan = 'free') AS free_trial_ends_at,
           c.last_polled_at, c.last_success_at, tp.status AS target_status
    FROM (${watching}) m
    JOIN accounts a ON a.id = m.account_id
    LEFT JOIN poll_cursors c ON c.target_key = m.target_key
    LEFT JOIN target_profiles tp ON tp.target_key = m.target_key
    GROUP BY m.target_key, c.last_polled_at, c.last_success_at, tp.status`;
}

function toTarget(r: TargetRow): TargetState {
  return {
    targetKey: r.target_key,
    username: r.username,
    accounts: r.plans.map((plan) => ({ plan, trialEndsAt: plan === 'free' ? r.free_trial_ends_at : null })),
    lastPolledAt: r.last_polled_at,
    lastSuccessAt: r.last_success_at,
    targetStatus: r.target_status,
  };
}

/**
 * Claims up to `limit` due targets for `ttlMs` and reads them. The read time comes from
 * PostgreSQL's clock, taken once after the statement's snapshot (every change visible to it was
 * stamped before), in microseconds like the triggers' stamps. The due rows come oldest first off
 * the next_due_at index, at most `limit` (an outage's backlog drains in that order, `limit` a
 * tick); a row another replica is claiming, or a monitor change is writing, is skipped (SKIP
 * LOCKED: that one stays due for the next tick). The locked rows are updated by ctid (= ANY: a
 * TID scan, not a join over the whole table).
 */
async function claimDue(db: Db, limit: number, ttlMs: number): Promise<Claimed> {
  const rows = await db.$queryRaw<
    { at_ms: number; at_exact: string; target_key: string | null; until: string | null; due_at: string | null }[]
  >`
      WITH t AS MATERIALIZED (SELECT clock_timestamp() AS at),
      due AS (
        SELECT p.ctid, p.target_key, p.next_due_at FROM poll_targets p
        WHERE p.next_due_at <= (SELECT at FROM t)
        ORDER BY p.next_due_at
        LIMIT ${limit}
        FOR UPDATE SKIP LOCKED
      ),
      claimed AS (
        UPDATE poll_targets p SET next_due_at = (SELECT at FROM t) + ${ttlMs} * interval '1 millisecond'
        FROM due WHERE p.ctid = ANY (ARRAY(SELECT ctid FROM due)) AND p.ctid = due.ctid
        RETURNING p.target_key, p.next_due_at AS until, due.next_due_at AS due_at
      )
      SELECT floor(extract(epoch FROM t.at) * 1000)::float8 AS at_ms,
             to_char(t.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at_exact,
             c.target_key, c.until::text AS until, c.due_at::text AS due_at
      FROM t LEFT JOIN claimed c ON true
      ORDER BY c.due_at`;
  const readAt: ReadTime = Object.assign(new Date(Number(rows[0]!.at_ms)), { exact: rows[0]!.at_exact });
  const claims = rows.flatMap((r) =>
    r.target_key === null ? [] : [{ targetKey: r.target_key, until: r.until!, dueAt: r.due_at! }],
  );
  if (claims.length === 0) return { readAt, targets: [], claims };
  const keys = claims.map((c) => c.targetKey);
  const targets = (await targetRows(db, keys)).map(toTarget);
  return { readAt, targets, claims };
}

/**
 * The active monitors of these targets, by target key (one query; raw, the columns matching needs:
 * a popular target's tens of thousands of rows cost a third of Prisma's findMany).
 */
async function watchingMonitors(db: Db, targetKeys: readonly string[]): Promise<Map<string, WatchingMonitor[]>> {
  const rows = await db.$queryRaw<(WatchingMonitor & { targetKey: string })[]>`
    SELECT ${WATCHING_MONITOR_COLUMNS}, m.target_key AS "targetKey"
    FROM monitors m WHERE m.target_key = ANY (${[...targetKeys]}::text[]) AND m.is_active`;
  const out = new Map<string, WatchingMonitor[]>();
  for (const { targetKey, ...m } of rows) {
    const list = out.get(targetKey);
    if (list) list.push(m);
    else out.set(targetKey, [m]);
  }
  return out;
}

async function queryWatchers(db: Db): Promise<QueryWatcher[]> {
  const rows = await db.$queryRaw<(WatchingMonitor & { query: string; plan: PlanName; trialEndsAt: Date | null })[]>`
    SELECT ${WATCHING_MONITOR_COLUMNS}, a.plan::text AS plan, a.trial_ends_at AS "trialEndsAt"
    FROM monitors m JOIN accounts a ON a.id = m.account_id
    WHERE m.query IS NOT NULL AND m.is_active
    ORDER BY m.created_at, m.id`;
  return rows.map(({ plan, trialEndsAt, ...m }) => ({ ...m, account: { plan, trialEndsAt } }));
}

/** The active query monitors (monitors_query_active_idx). */
async function queryMonitors(db: Db): Promise<WatchingMonitor[]> {
  return db.$queryRaw<WatchingMonitor[]>`
    SELECT ${WATCHING_MONITOR_COLUMNS} FROM monitors m WHERE m.query IS NOT NULL AND m.is_active`;
}

export function createScheduleStore(db: Db): ScheduleStore {
  return {
    async targets() {
      return (await targetRows(db, 'all')).map(toTarget);
    },

    claimDue: (limit, ttlMs) => claimDue(db, limit, ttlMs),

    async release(claims) {
      if (claims.length === 0) return;
      // only where the claim still stands: a poll, a reschedule or a monitor change since wins
      await db.$executeRaw`
        UPDATE poll_targets p SET next_due_at = r.due_at
        FROM unnest(${claims.map((c) => c.targetKey)}::text[], ${claims.map((c) => c.until)}::timestamptz[],
                    ${claims.map((c) => c.dueAt)}::timestamptz[]) AS r(target_key, until, due_at)
        WHERE p.target_key = r.target_key AND p.next_due_at = r.until`;
    },

    async target(targetKey) {
      const [row] = await targetRows(db, [targetKey]);
      return row ? toTarget(row) : null;
    },

    async pushedTargets() {
      const rows = await db.$queryRaw<{ target_key: string }[]>`
        SELECT target_key FROM poll_targets WHERE pushed AND active_monitors > 0`;
      return rows.map((r) => r.target_key);
    },

    async reschedule(rows) {
      if (rows.length === 0) return;
      await db.$executeRaw`
        UPDATE poll_targets p SET
          next_due_at = CASE WHEN p.active_monitors = 0 THEN '9999-12-31 00:00:00+00'::timestamptz
                             WHEN p.changed_at >= r.read_at THEN p.next_due_at
                             ELSE r.next_due_at END,
          pushed = r.pushed
        FROM unnest(${rows.map((r) => r.targetKey)}::text[], ${rows.map((r) => r.nextDueAt)}::timestamptz[],
                    ${rows.map((r) => r.pushed)}::boolean[], ${rows.map((r) => pgTime(r.readAt))}::timestamptz[])
             AS r(target_key, next_due_at, pushed, read_at)
        WHERE p.target_key = r.target_key`;
    },

    monitorsFor: async (targetKey) => (await watchingMonitors(db, [targetKey])).get(targetKey) ?? [],

    monitorsForMany: (targetKeys) => watchingMonitors(db, targetKeys),

    queryMonitors: () => queryMonitors(db),

    queryWatchers: () => queryWatchers(db),
  };
}
