/**
 * The poller's PostgreSQL side. `recordBatch` writes the hits of one batch of tweets, their
 * monitor.hit events (outbox) and the advanced cursor in ONE transaction, and wakes the relay.
 * The cursor only moves forward: a replica whose lease lapsed mid-poll cannot move it back.
 */
import { randomUUID } from 'node:crypto';
import { Prisma, type Db, type HitRow } from '@sts/db';
import type { MonitorHitEvent } from '@sts/messaging';
import type { PlanName } from '@sts/core';
import type { WatchingMonitor } from '../domain/hits';
import type { ReadTime, ScheduleWrite, TargetState } from '../domain/schedule';

export const OUTBOX_CHANNEL = 'sts_outbox';

/** A hit to record: the hit row (without its generated id) plus what the insert and its event need. */
export interface NewHit extends Omit<HitRow, 'id'> {
  accountId: string;
  tweetAuthorId: string;
  event: MonitorHitEvent;
}

export interface CursorState {
  /** newest tweet (by id) examined; informational */
  lastTweetId: string | null;
  lastTweetAt: Date | null;
  /** the source's poll position: where the next poll starts */
  position: string | null;
}

export interface StoredCursor extends CursorState {
  lastPolledAt: Date | null;
}

export interface PollerRepository {
  /** every target with active monitors (a forced cycle) */
  targets(): Promise<TargetState[]>;
  /**
   * the targets whose schedule row is due (poll_targets.next_due_at, indexed): what a tick reads,
   * and the read time on PostgreSQL's clock (with its microseconds)
   */
  dueTargets(): Promise<{ readAt: ReadTime; targets: TargetState[] }>;
  /** one target's state (null: no active monitor watches it) */
  target(targetKey: string): Promise<TargetState | null>;
  /** writes re-evaluated schedules of targets that were read as due but are not */
  reschedule(rows: (ScheduleWrite & { targetKey: string })[]): Promise<void>;
  monitorsFor(targetKey: string): Promise<WatchingMonitor[]>;
  /** the active monitors of several targets in one read, by target */
  monitorsForMany(targetKeys: readonly string[]): Promise<Map<string, WatchingMonitor[]>>;
  cursor(targetKey: string): Promise<StoredCursor | null>;
  /**
   * Inserts the hits not yet recorded (unique on monitor + tweet) with their events, moves the
   * cursor and, with `schedule`, the target's next due time. Returns the hits that were new.
   */
  recordBatch(
    targetKey: string,
    hits: NewHit[],
    cursor: CursorState,
    polledAt: Date,
    schedule?: ScheduleWrite,
  ): Promise<NewHit[]>;
  /** recordBatch for several targets (no schedule) in one transaction: the stream's recording */
  recordMany(
    batches: readonly { targetKey: string; hits: NewHit[]; cursor: CursorState }[],
    polledAt: Date,
  ): Promise<NewHit[]>;
  /** Records a failed poll: cursor untouched; the error goes on the target's monitors. */
  recordFailure(targetKey: string, error: string, polledAt: Date, schedule?: ScheduleWrite): Promise<void>;
  /**
   * A poll the fleet's budget refused before any read: the error shows on the target's monitors
   * and cursor, but it is no poll (last_polled_at and last_check_at stay), so the target stays due.
   */
  recordRefusal(targetKey: string, error: string, schedule: ScheduleWrite): Promise<void>;
}

interface TargetRow {
  target_key: string;
  username: string;
  plans: PlanName[];
  free_trial_ends_at: Date | null;
  last_polled_at: Date | null;
  last_success_at: Date | null;
}

/**
 * One row per target among `keys` (a subquery of target keys): its distinct plans, and the latest
 * trial end among its Free accounts (enough to tell whether any of them is on an active trial).
 */
function targetRows(db: Db, keys: Prisma.Sql): Promise<TargetRow[]> {
  return db.$queryRaw<TargetRow[]>`
    SELECT m.target_key, min(m.target_username) AS username,
           array_agg(DISTINCT a.plan::text) AS plans,
           max(a.trial_ends_at) FILTER (WHERE a.plan = 'free') AS free_trial_ends_at,
           c.last_polled_at, c.last_success_at
    FROM monitors m
    JOIN accounts a ON a.id = m.account_id
    LEFT JOIN poll_cursors c ON c.target_key = m.target_key
    WHERE m.is_active AND m.target_key IN (${keys})
    GROUP BY m.target_key, c.last_polled_at, c.last_success_at`;
}

function toTarget(r: TargetRow): TargetState {
  return {
    targetKey: r.target_key,
    username: r.username,
    accounts: r.plans.map((plan) => ({ plan, trialEndsAt: plan === 'free' ? r.free_trial_ends_at : null })),
    lastPolledAt: r.last_polled_at,
    lastSuccessAt: r.last_success_at,
  };
}

/**
 * `last_error` on the target's cursor and active monitors (a failed poll, a budget refusal, the
 * stream's account check); with `polledAt` it was a poll: last_polled_at and last_check_at move too.
 */
export async function writeLastError(
  tx: Pick<Db, 'pollCursor' | 'monitor'>,
  targetKey: string,
  error: string,
  polledAt?: Date,
): Promise<void> {
  const polled = polledAt ? { lastPolledAt: polledAt } : {};
  await tx.pollCursor.upsert({
    where: { targetKey },
    create: { targetKey, ...polled, lastError: error },
    update: { ...polled, lastError: error },
  });
  await tx.monitor.updateMany({
    where: { targetKey, isActive: true },
    data: { ...(polledAt && { lastCheckAt: polledAt }), lastError: error },
  });
}

/** a read time for SQL: PostgreSQL's exact one when the tick has it */
function pgTime(readAt: ReadTime): string {
  return readAt.exact ?? readAt.toISOString();
}

/**
 * The schedule write of a poll: its next due time, unless a monitor or plan change was stamped
 * after the poller read the target (then due at once, re-evaluated by the next tick), or no active
 * monitor is left (never due).
 */
function writeSchedule(db: Pick<Db, '$executeRaw'>, targetKey: string, s: ScheduleWrite): Promise<number> {
  return db.$executeRaw`
    UPDATE poll_targets SET
      next_due_at = CASE WHEN active_monitors = 0 THEN '9999-12-31 00:00:00+00'::timestamptz
                         WHEN changed_at >= ${pgTime(s.readAt)}::timestamptz THEN least(next_due_at, now())
                         ELSE ${s.nextDueAt} END,
      pushed = ${s.pushed}
    WHERE target_key = ${targetKey}`;
}

type Tx = Parameters<Parameters<Db['$transaction']>[0]>[0];

/** Inserts the hits not recorded yet and an outbox event for each new one; returns the new ones. */
async function insertHits(tx: Tx, hits: NewHit[]): Promise<NewHit[]> {
  let inserted: { id: string; monitor_id: string; tweet_id: string }[] = [];
  if (hits.length > 0) {
    inserted = await tx.$queryRaw<{ id: string; monitor_id: string; tweet_id: string }[]>`
      INSERT INTO hits (monitor_id, tweet_id, tweet_text, tweet_author_id, tweet_author_username, tweet_created_at, detected_at)
      SELECT * FROM unnest(
        ${hits.map((h) => h.monitorId)}::uuid[], ${hits.map((h) => h.tweetId)}::text[], ${hits.map((h) => h.tweetText)}::text[],
        ${hits.map((h) => h.tweetAuthorId)}::text[], ${hits.map((h) => h.tweetAuthorUsername)}::text[],
        ${hits.map((h) => h.tweetCreatedAt)}::timestamptz[], ${hits.map((h) => h.detectedAt)}::timestamptz[])
      ON CONFLICT (monitor_id, tweet_id) DO NOTHING
      RETURNING id, monitor_id, tweet_id`;
  }
  if (inserted.length > 0) {
    const byKey = new Map(hits.map((h) => [`${h.monitorId}:${h.tweetId}`, h]));
    const rows = inserted.map((r) => {
      const h = byKey.get(`${r.monitor_id}:${r.tweet_id}`)!;
      return {
        routingKey: 'monitor.hit',
        messageId: randomUUID(),
        payload: h.event,
        headers: { accountId: h.accountId, hitId: r.id },
      };
    });
    await tx.outboxEvent.createMany({ data: rows });
    await tx.$executeRaw`SELECT pg_notify(${OUTBOX_CHANNEL}, '')`;
  }
  const fresh = new Set(inserted.map((r) => `${r.monitor_id}:${r.tweet_id}`));
  return hits.filter((h) => fresh.has(`${h.monitorId}:${h.tweetId}`));
}

async function moveCursor(tx: Tx, targetKey: string, cursor: CursorState, polledAt: Date): Promise<void> {
  await moveCursors(tx, [{ targetKey, cursor }], polledAt);
}

/** moveCursor for several distinct targets in one statement */
async function moveCursors(
  tx: Tx,
  rows: readonly { targetKey: string; cursor: CursorState }[],
  polledAt: Date,
): Promise<void> {
  if (rows.length === 0) return;
  // forward only: keep the stored id and position when already past this batch's. Positions
  // are "<provider>.<n>[.<n>]" and compare as number arrays; another provider's replaces it.
  await tx.$executeRaw`
    INSERT INTO poll_cursors (target_key, last_tweet_id, last_tweet_at, position, last_polled_at, last_success_at, last_error, updated_at)
    SELECT k, i, a, p, ${polledAt}, ${polledAt}, NULL, now() FROM unnest(
      ${rows.map((r) => r.targetKey)}::text[], ${rows.map((r) => r.cursor.lastTweetId)}::text[],
      ${rows.map((r) => r.cursor.lastTweetAt)}::timestamptz[], ${rows.map((r) => r.cursor.position)}::text[]) AS c(k, i, a, p)
    ON CONFLICT (target_key) DO UPDATE SET
      position = CASE
        WHEN EXCLUDED.position IS NULL THEN poll_cursors.position
        WHEN poll_cursors.position IS NULL
          OR split_part(EXCLUDED.position, '.', 1) <> split_part(poll_cursors.position, '.', 1)
          OR string_to_array(substr(EXCLUDED.position, 3), '.')::numeric[]
             > string_to_array(substr(poll_cursors.position, 3), '.')::numeric[]
        THEN EXCLUDED.position ELSE poll_cursors.position END,
      last_tweet_id = CASE WHEN poll_cursors.last_tweet_id IS NULL OR EXCLUDED.last_tweet_id::numeric > poll_cursors.last_tweet_id::numeric
                           THEN EXCLUDED.last_tweet_id ELSE poll_cursors.last_tweet_id END,
      last_tweet_at = CASE WHEN poll_cursors.last_tweet_id IS NULL OR EXCLUDED.last_tweet_id::numeric > poll_cursors.last_tweet_id::numeric
                           THEN coalesce(EXCLUDED.last_tweet_at, poll_cursors.last_tweet_at) ELSE poll_cursors.last_tweet_at END,
      last_polled_at = greatest(poll_cursors.last_polled_at, EXCLUDED.last_polled_at),
      last_success_at = greatest(poll_cursors.last_success_at, EXCLUDED.last_success_at),
      last_error = NULL,
      updated_at = now()`;
}

export function createPollerRepository(db: Db): PollerRepository {
  return {
    async targets() {
      return (await targetRows(db, Prisma.sql`SELECT target_key FROM monitors WHERE is_active`)).map(toTarget);
    },

    async dueTargets() {
      // the read time from PostgreSQL's clock, taken once after the statement's snapshot (every
      // change visible to it was stamped before), in microseconds like the triggers' stamps; then
      // the due keys (an index range on next_due_at: nothing due, nothing else read) and their
      // monitors through the (target_key, is_active) index
      const rows = await db.$queryRaw<{ at_ms: number; at_exact: string; target_key: string | null }[]>`
        WITH t AS MATERIALIZED (SELECT clock_timestamp() AS at)
        SELECT floor(extract(epoch FROM t.at) * 1000)::float8 AS at_ms,
               to_char(t.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at_exact,
               p.target_key
        FROM t LEFT JOIN poll_targets p ON p.next_due_at <= t.at`;
      const readAt: ReadTime = Object.assign(new Date(Number(rows[0]!.at_ms)), { exact: rows[0]!.at_exact });
      const keys = rows.flatMap((r) => (r.target_key === null ? [] : [r.target_key]));
      if (keys.length === 0) return { readAt, targets: [] };
      return { readAt, targets: (await targetRows(db, Prisma.sql`SELECT unnest(${keys}::text[])`)).map(toTarget) };
    },

    async target(targetKey) {
      const [row] = await targetRows(db, Prisma.sql`${targetKey}`);
      return row ? toTarget(row) : null;
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

    async monitorsFor(targetKey) {
      const rows = await db.monitor.findMany({
        where: { targetKey, isActive: true },
        select: {
          id: true,
          accountId: true,
          targetUsername: true,
          keywords: true,
          excludeTypes: true,
          langs: true,
          createdAt: true,
        },
      });
      return rows;
    },

    async monitorsForMany(targetKeys) {
      const rows = await db.monitor.findMany({
        where: { targetKey: { in: [...targetKeys] }, isActive: true },
        select: {
          id: true,
          accountId: true,
          targetUsername: true,
          targetKey: true,
          keywords: true,
          excludeTypes: true,
          langs: true,
          createdAt: true,
        },
      });
      const out = new Map<string, WatchingMonitor[]>();
      for (const { targetKey, ...m } of rows) out.set(targetKey, [...(out.get(targetKey) ?? []), m]);
      return out;
    },

    async cursor(targetKey) {
      const row = await db.pollCursor.findUnique({
        where: { targetKey },
        select: { lastTweetId: true, lastTweetAt: true, position: true, lastPolledAt: true },
      });
      return row;
    },

    async recordBatch(targetKey, hits, cursor, polledAt, schedule) {
      return db.$transaction(async (tx) => {
        const fresh = await insertHits(tx, hits);
        await moveCursor(tx, targetKey, cursor, polledAt);
        await tx.monitor.updateMany({
          where: { targetKey, isActive: true },
          data: { lastCheckAt: polledAt, lastError: null },
        });
        if (schedule) await writeSchedule(tx, targetKey, schedule);
        return fresh;
      });
    },

    async recordMany(batches, polledAt) {
      if (batches.length === 0) return [];
      return db.$transaction(
        async (tx) => {
          const fresh = await insertHits(
            tx,
            batches.flatMap((b) => b.hits),
          );
          await moveCursors(tx, batches, polledAt);
          await tx.monitor.updateMany({
            where: { targetKey: { in: batches.map((b) => b.targetKey) }, isActive: true },
            data: { lastCheckAt: polledAt, lastError: null },
          });
          return fresh;
          // a batch of many targets on a busy database: more than Prisma's 5 s default
        },
        { timeout: 30_000, maxWait: 10_000 },
      );
    },

    async recordFailure(targetKey, error, polledAt, schedule) {
      await db.$transaction(async (tx) => {
        await writeLastError(tx, targetKey, error, polledAt);
        if (schedule) await writeSchedule(tx, targetKey, schedule);
      });
    },

    async recordRefusal(targetKey, error, schedule) {
      await db.$transaction(async (tx) => {
        await writeLastError(tx, targetKey, error);
        await writeSchedule(tx, targetKey, schedule);
      });
    },
  };
}
