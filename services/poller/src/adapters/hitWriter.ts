/**
 * The hit writer: what a poll, a search and the X stream's recording write to PostgreSQL.
 * - `recordBatch` writes the hits of one batch of tweets with their monitor.hit events (outbox)
 *   in chunks of at most HIT_CHUNK hits, each one statement (so one transaction, one round trip)
 *   that also wakes the relay; the last chunk in a transaction with the advanced cursor and
 *   schedule. Every hit commits with its event (unique on monitor + tweet), and the cursor moves
 *   only after every chunk: a crash mid-way re-reads the page and records the rest, nothing
 *   twice. The cursor only moves forward: a replica whose lease lapsed mid-poll cannot move it back.
 * - A poll writes the target's rows only (poll_cursors, poll_targets), never its monitors: what a
 *   monitor shows as its last check and error is read from its target's cursor (@sts/db lastCheck).
 */
import { Prisma, type Db } from '@sts/db';
import { hitChunks, inLanes } from '../domain/chunks';
import { HIT_CHUNK, OUTBOX_CHANNEL, type CursorState, type NewHit, type StoredCursor } from '../domain/pipeline';
import { pgTime, type ScheduleWrite } from '../domain/schedule';
import { retryConflicts, sequenceCtes } from './sequences';

export interface HitWriter {
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
/**
 * `last_error` on the target's cursor (a failed poll, a budget refusal, the stream's account
 * check), which its active monitors show; with `polledAt` it was a poll: last_polled_at moves too.
 * One row, however many monitors watch the target.
 */
async function writeLastError(
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
 * empty; poller.test compares them), its `tweet` and `detectedAt` part from the post's event.
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

export function createHitWriter(db: Db): HitWriter {
  return {
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
