/**
 * The poller's PostgreSQL side.
 * - A tick CLAIMS its due targets (`claimDue`): the oldest-due rows, at most `limit`, locked with
 *   FOR UPDATE SKIP LOCKED and moved to a claim expiry in one statement, so each due target goes
 *   to one replica per interval; a replica that dies leaves its claims to expire.
 * - `recordBatch` writes the hits of one batch of tweets with their monitor.hit events (outbox)
 *   in chunks of at most HIT_CHUNK hits, each one statement (so one transaction, one round trip)
 *   that also wakes the relay; the last chunk in a transaction with the advanced cursor and schedule. Every hit commits with its event (unique on monitor + tweet),
 *   and the cursor moves only after every chunk: a crash mid-way re-reads the page and records
 *   the rest, nothing twice. The cursor only moves forward: a replica whose lease lapsed mid-poll
 *   cannot move it back.
 * - A poll writes the target's rows only (poll_cursors, poll_targets), never its monitors: what a
 *   monitor shows as its last check and error is read from its target's cursor (@sts/db lastCheck).
 */
import { Prisma, type Db, type HitRow } from '@sts/db';
import type { MonitorHitEvent, TargetStatus } from '@sts/messaging';
import type { PlanName } from '@sts/core';
import type { WatchingMonitor } from '../domain/hits';
import { hitChunks, inLanes } from '../domain/chunks';
import type { ReadTime, ScheduleWrite, TargetState, WatchingAccount } from '../domain/schedule';
import { retryConflicts, sequenceCtes } from './sequences';

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

export interface PollerRepository {
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
  pushedTargets?(): Promise<string[]>;
  /** writes re-evaluated schedules of targets that were read as due but are not */
  reschedule(rows: (ScheduleWrite & { targetKey: string })[]): Promise<void>;
  monitorsFor(targetKey: string): Promise<WatchingMonitor[]>;
  /** every active query monitor (the query intake matches each committed post against them) */
  queryMonitors(): Promise<WatchingMonitor[]>;
  /** every active query monitor with its account's plan (X: its rule or its search, its interval) */
  queryWatchers(): Promise<QueryWatcher[]>;
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
  /** recordBatch for several distinct targets (no schedule) in one statement: the stream's recording */
  recordMany(
    batches: readonly { targetKey: string; hits: NewHit[]; cursor: CursorState }[],
    polledAt: Date,
  ): Promise<NewHit[]>;
  /** Records a failed poll: cursor position untouched; the error goes on the target's cursor. */
  recordFailure(targetKey: string, error: string, polledAt: Date, schedule?: ScheduleWrite): Promise<void>;
  /**
   * A poll the fleet's budget refused before any read: the error shows on the target's cursor
   * (so on its monitors), but it is no poll (last_polled_at stays), so the target stays due.
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
 * `last_error` on the target's cursor (a failed poll, a budget refusal, the stream's account
 * check), which its active monitors show; with `polledAt` it was a poll: last_polled_at moves too.
 * One row, however many monitors watch the target.
 */
export async function writeLastError(
  tx: Pick<Db, 'pollCursor'>,
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

/**
 * Hits (and their events) per transaction: a post to a target of 20,000 watchers is 20 short
 * transactions, each well inside the transaction timeout, instead of one that grows with them.
 */
export const HIT_CHUNK = 1000;

/**
 * Chunk statements of one batch run at once (each on its own pool connection): a chunk's time is
 * PostgreSQL's work per row (index and trigger maintenance, docs/benchmarks.md "Fan-out"), so a
 * large fan-out's latency is its chunks over the lanes; two keep most of the pool for other polls.
 */
const CHUNK_LANES = 2;

/** The distinct posts of a chunk (one per tweet and detection time) and each hit's index into them. */
function chunkPosts(hits: readonly NewHit[]): { posts: NewHit[]; index: number[] } {
  const at = new Map<string, number>();
  const posts: NewHit[] = [];
  const index = hits.map((h) => {
    const key = `${h.tweetId} ${h.detectedAt.getTime()}`;
    let i = at.get(key);
    if (i === undefined) {
      i = posts.push(h);
      at.set(key, i);
    }
    return i;
  });
  return { posts, index };
}

/**
 * The CTEs `post`, `input`, `fresh` (the hits this statement's snapshot does not hold yet), their
 * sequence numbers (./sequences.ts: `counts`, `seq`, `numbered`), `ins` (inserts
 * them with their numbers, unique on monitor + tweet; returns the new ones), `events` (an outbox
 * event for each new one, its number in the payload: the events join the rows the insert
 * returned, so a hit already recorded gets no second event) and `guard` (fails the statement when
 * a numbered hit was not inserted: another transaction committed it meanwhile; the writer runs
 * the statement again, see retryConflicts). What goes over the wire
 * is each hit's monitor id and the chunk's posts once: the rows are built in PostgreSQL from
 * `monitors`, the event's `monitor` part too (as @sts/messaging monitorRef: keywords null when
 * empty; repository.test compares them), its `tweet` and `detectedAt` part from the post's event.
 * Events are written in the hits' order. A monitor deleted since it was read gets no hit.
 */
/** each hit once: a numbered hit the insert skipped as a duplicate would fail the guard on every run */
function uniqueHits(hits: readonly NewHit[]): NewHit[] {
  const seen = new Set<string>();
  return hits.filter((h) => {
    const key = `${h.monitorId}:${h.tweetId}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

function hitCtes(all: readonly NewHit[]): Prisma.Sql {
  const hits = uniqueHits(all);
  const { posts, index } = chunkPosts(hits);
  // the posts' time span, as parameters: the probe of `fresh` reads only the week partitions of
  // `hits` that can hold them (pruned when the statement starts, not probed per row)
  const times = posts.map((p) => p.tweetCreatedAt.getTime());
  const [first, last] =
    times.length === 0 ? [new Date(0), new Date(0)] : [new Date(Math.min(...times)), new Date(Math.max(...times))];
  return Prisma.sql`
    post AS (
      SELECT * FROM unnest(
        ${posts.map((p) => p.tweetId)}::text[], ${posts.map((p) => p.tweetText)}::text[],
        ${posts.map((p) => p.tweetAuthorId)}::text[], ${posts.map((p) => p.tweetAuthorUsername)}::text[],
        ${posts.map((p) => p.tweetCreatedAt)}::timestamptz[], ${posts.map((p) => p.detectedAt)}::timestamptz[],
        ${posts.map((p) => JSON.stringify({ tweet: p.event.tweet, detectedAt: p.event.detectedAt }))}::jsonb[]
      ) WITH ORDINALITY AS p(tweet_id, tweet_text, tweet_author_id, tweet_author_username, tweet_created_at, detected_at,
                             event, n)
    ),
    input AS (
      SELECT i.ord, m.id AS monitor_id, m.account_id, m.target_username, m.query, m.keywords, p.tweet_id, p.tweet_text,
             p.tweet_author_id, p.tweet_author_username, p.tweet_created_at, p.detected_at, p.event
      FROM unnest(${hits.map((h) => h.monitorId)}::uuid[], ${index}::int[]) WITH ORDINALITY AS i(monitor_id, n, ord)
      JOIN post p ON p.n = i.n
      JOIN monitors m ON m.id = i.monitor_id
    ),
    fresh AS (
      SELECT i.* FROM input i
      WHERE NOT EXISTS (SELECT 1 FROM hits h WHERE h.monitor_id = i.monitor_id AND h.tweet_id = i.tweet_id
                                              AND h.tweet_created_at = i.tweet_created_at
                                              AND h.tweet_created_at BETWEEN ${first} AND ${last})
    ),
    ${sequenceCtes('fresh')},
    ins AS (
      INSERT INTO hits (monitor_id, tweet_id, tweet_text, tweet_author_id, tweet_author_username, tweet_created_at, detected_at,
                        sequence)
      SELECT monitor_id, tweet_id, tweet_text, tweet_author_id, tweet_author_username, tweet_created_at, detected_at,
             sequence
      FROM numbered ORDER BY ord
      ON CONFLICT (monitor_id, tweet_id, tweet_created_at) DO NOTHING
      RETURNING id, monitor_id, tweet_id
    ),
    events AS (
      INSERT INTO outbox (routing_key, message_id, payload, headers)
      SELECT 'monitor.hit', gen_random_uuid()::text,
             jsonb_build_object('event', 'monitor.hit', 'monitor', jsonb_build_object(
               'id', i.monitor_id::text, 'targetUsername', i.target_username, 'query', i.query,
               'keywords', CASE WHEN cardinality(i.keywords) > 0 THEN to_jsonb(i.keywords) END)) || i.event
               || jsonb_build_object('sequence', i.sequence),
             jsonb_build_object('accountId', i.account_id::text, 'hitId', ins.id::text)
      FROM ins JOIN numbered i ON i.monitor_id = ins.monitor_id AND i.tweet_id = ins.tweet_id
      ORDER BY i.ord
    ),
    guard AS MATERIALIZED (
      SELECT sts_hits_sequenced((SELECT count(*) FROM ins), (SELECT count(*) FROM numbered)) AS ok
    )`;
}

/** the hits among `hits` that the insert returned (the new ones) */
function freshOf(hits: readonly NewHit[], inserted: readonly { monitor_id: string; tweet_id: string }[]): NewHit[] {
  const fresh = new Set(inserted.map((r) => `${r.monitor_id}:${r.tweet_id}`));
  return hits.filter((h) => fresh.has(`${h.monitorId}:${h.tweetId}`));
}

/**
 * One chunk's statement: hitCtes and the relay's wake-up when any hit was new (pg_notify,
 * delivered at commit), in ONE statement. One statement is one atomic transaction by itself, so a
 * chunk outside the batch's last needs no BEGIN/COMMIT round trips.
 */
function hitChunkSql(hits: readonly NewHit[]): Prisma.Sql {
  return Prisma.sql`
    WITH ${hitCtes(hits)},
    wake AS MATERIALIZED (SELECT pg_notify(${OUTBOX_CHANNEL}, '') FROM (SELECT 1 FROM ins LIMIT 1) AS any_new)
    SELECT ins.monitor_id::text AS monitor_id, ins.tweet_id FROM ins CROSS JOIN (SELECT count(*) FROM wake) AS woken
    UNION ALL
    SELECT NULL, NULL FROM guard WHERE NOT guard.ok`;
}

type InsertedRow = { monitor_id: string | null; tweet_id: string | null };

/** the rows the insert returned, without the guard's and the wake-up's (null) rows */
function insertedOf(rows: readonly InsertedRow[]): { monitor_id: string; tweet_id: string }[] {
  return rows.filter((r): r is { monitor_id: string; tweet_id: string } => r.monitor_id !== null);
}

/** Runs one chunk's statement (hitChunkSql) on `runner` (the pool, or a transaction); returns the new hits. */
async function insertHits(runner: Pick<Db, '$queryRaw'>, hits: NewHit[]): Promise<NewHit[]> {
  if (hits.length === 0) return [];
  return freshOf(hits, insertedOf(await runner.$queryRaw<InsertedRow[]>(hitChunkSql(hits))));
}

async function moveCursor(tx: Tx, targetKey: string, cursor: CursorState, polledAt: Date): Promise<void> {
  await tx.$executeRaw(cursorUpsert([{ targetKey, cursor }], polledAt));
}

/**
 * The upsert moving several distinct targets' cursors (a statement of its own or a CTE): forward
 * only, keeping the stored id and position when already past this batch's. Positions are
 * "<provider>.<n>[.<n>]" and compare as number arrays; another provider's replaces it.
 */
function cursorUpsert(rows: readonly { targetKey: string; cursor: CursorState }[], polledAt: Date): Prisma.Sql {
  return Prisma.sql`
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

/**
 * Several distinct targets' hits, events and cursors in ONE statement (atomic on its own: no
 * transaction, one round trip): hitCtes, the cursors' upsert as a CTE (a data-modifying CTE runs
 * whether read or not), and the relay's wake-up when a hit was new (the second branch's subquery
 * yields a row, and calls pg_notify, only when `ins` returned one). Returns the new hits.
 */
async function recordMany(
  db: Db,
  batches: readonly { targetKey: string; hits: NewHit[]; cursor: CursorState }[],
  polledAt: Date,
): Promise<NewHit[]> {
  if (batches.length === 0) return [];
  const hits = batches.flatMap((b) => b.hits);
  const rows = await retryConflicts(
    () => db.$queryRaw<InsertedRow[]>`
      WITH ${hitCtes(hits)},
      cursors AS (${cursorUpsert(batches, polledAt)})
      SELECT monitor_id::text AS monitor_id, tweet_id FROM ins
      UNION ALL
      SELECT NULL, NULL FROM (SELECT pg_notify(${OUTBOX_CHANNEL}, '') FROM (SELECT 1 FROM ins LIMIT 1) one) woken
      UNION ALL
      SELECT NULL, NULL FROM guard WHERE NOT guard.ok`,
  );
  return freshOf(hits, insertedOf(rows));
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
async function claimDue(db: Db, limit: number, ttlMs: number): ReturnType<PollerRepository['claimDue']> {
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
    SELECT id::text AS id, account_id::text AS "accountId", target_username AS "targetUsername", query,
           target_key AS "targetKey", keywords, exclude_types AS "excludeTypes", langs, created_at AS "createdAt"
    FROM monitors WHERE target_key = ANY (${[...targetKeys]}::text[]) AND is_active`;
  const out = new Map<string, WatchingMonitor[]>();
  for (const { targetKey, ...m } of rows) {
    const list = out.get(targetKey);
    if (list) list.push(m);
    else out.set(targetKey, [m]);
  }
  return out;
}

/** An active query monitor and the plan of the account that owns it. */
export interface QueryWatcher extends WatchingMonitor {
  query: string;
  account: WatchingAccount;
}

async function queryWatchers(db: Db): Promise<QueryWatcher[]> {
  const rows = await db.$queryRaw<(WatchingMonitor & { query: string; plan: PlanName; trialEndsAt: Date | null })[]>`
    SELECT m.id::text AS id, m.account_id::text AS "accountId", m.target_username AS "targetUsername", m.query,
           m.keywords, m.exclude_types AS "excludeTypes", m.langs, m.created_at AS "createdAt",
           a.plan::text AS plan, a.trial_ends_at AS "trialEndsAt"
    FROM monitors m JOIN accounts a ON a.id = m.account_id
    WHERE m.query IS NOT NULL AND m.is_active
    ORDER BY m.created_at, m.id`;
  return rows.map(({ plan, trialEndsAt, ...m }) => ({ ...m, account: { plan, trialEndsAt } }));
}

/** The active query monitors (monitors_query_active_idx). */
async function queryMonitors(db: Db): Promise<WatchingMonitor[]> {
  return db.$queryRaw<WatchingMonitor[]>`
    SELECT id::text AS id, account_id::text AS "accountId", target_username AS "targetUsername", query,
           keywords, exclude_types AS "excludeTypes", langs, created_at AS "createdAt"
    FROM monitors WHERE query IS NOT NULL AND is_active`;
}

export function createPollerRepository(db: Db): PollerRepository {
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

    async cursor(targetKey) {
      const row = await db.pollCursor.findUnique({
        where: { targetKey },
        select: { lastTweetId: true, lastTweetAt: true, position: true, lastPolledAt: true },
      });
      return row;
    },

    async recordBatch(targetKey, hits, cursor, polledAt, schedule) {
      // every chunk but the last one statement (its own transaction), CHUNK_LANES at once; the
      // last, once they all committed, in a transaction with the cursor and schedule
      const { chunks, ordered } = hitChunks(hits, HIT_CHUNK);
      const last = chunks.pop() ?? [];
      const fresh = (
        await inLanes(chunks, ordered ? 1 : CHUNK_LANES, (c) => retryConflicts(() => insertHits(db, c)))
      ).flat();
      return retryConflicts(() =>
        db.$transaction(async (tx) => {
          const lastFresh = await insertHits(tx, last);
          await moveCursor(tx, targetKey, cursor, polledAt);
          if (schedule) await writeSchedule(tx, targetKey, schedule);
          return [...fresh, ...lastFresh];
        }),
      );
    },

    recordMany: (batches, polledAt) => recordMany(db, batches, polledAt),

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
