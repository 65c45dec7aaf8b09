/**
 * The dispatcher's PostgreSQL access (Prisma; the two statements on every delivery's path as SQL
 * on the client's node-postgres pool). Monitor look-ups and attempt writes are micro-batched (see
 * batch.ts); everything a delivery needs comes from one look-up: the monitor, its account's plan
 * and its webhook endpoint.
 */
import {
  dateOrNull,
  hitSelect,
  isDatabaseUnavailable,
  MONITOR_CONTEXT_SQL,
  monitorContextOf,
  Prisma,
  sqlPool,
  type Db,
  type HitRow as HitRecord,
  type MonitorContext,
  type MonitorContextRow,
  type SqlPool,
} from '@sts/db';
import type { HeaderPairs } from '../domain/attemptDetail';
import { DISABLE_AFTER_MS, FAILING_AFTER } from '../domain/health';
import type { MonitorContextCache } from '../contextCache';
import { createBatcher } from './batch';
import type { DeliveryEvent } from './consumer';

export type { MonitorContext };

type AttemptOutcome = 'delivered' | 'failed' | 'skipped' | 'exhausted';

/** one send's final outcome, counted towards its endpoint's health */
interface HealthOutcome {
  endpointId: string;
  delivered: boolean;
  at: Date;
}

/** an endpoint's health after a counted outcome, and what changed */
interface HealthChange {
  consecutiveFailures: number;
  firstFailureAt: Date | null;
  disabledAt: Date | null;
  /** this outcome made it failing (FAILING_AFTER in a row) or disabled */
  becameFailing: boolean;
  becameDisabled: boolean;
}

interface AttemptRecord {
  id: string;
  monitorId: string;
  hitId: string | null;
  event: string;
  deliveryId: string;
  outcome: AttemptOutcome;
}

export interface NewAttempt {
  monitorId: string;
  hitId: string | null;
  event: DeliveryEvent;
  deliveryId: string;
  url: string;
  outcome: AttemptOutcome;
  /** the attempt's number in its delivery's schedule (1: the first); when the next one is due */
  attempt?: number | null;
  nextAttemptAt?: Date | null;
  statusCode: number | null;
  latencyMs: number | null;
  error: string | null;
  responseSnippet: string | null;
  /** attempt detail (absent for skipped attempts and sends that never started) */
  requestHeaders?: HeaderPairs | null;
  requestBody?: string | null;
  responseHeaders?: HeaderPairs | null;
  responseBody?: Buffer | null;
}

/** a delivery to wait in webhook_deliveries_due: its next attempt (a retry), or its turn (fifo) */
export interface NewDue {
  deliveryId: string;
  monitorId: string;
  webhookId: string;
  event: DeliveryEvent;
  hitId: string | null;
  /** the event's payload as first sent */
  payload: unknown;
  /** the number of the attempt due */
  attempt: number;
  dueAt: Date;
}

/**
 * What an attempt does to its delivery's due row; written in the attempt row's statement. `claimed`:
 * the attempt number of the due row this attempt was claimed from. The change then applies only
 * while the row is still at that attempt: a row another replica settled or moved on meanwhile (its
 * claim having run out here) is neither brought back nor moved back. Without it (a first attempt,
 * a held event) a retry is written only when the delivery has no due row yet, and `done` (a
 * redelivery that succeeded) removes whatever waits.
 */
export type DueChange =
  { kind: 'due'; due: NewDue; claimed?: number } | { kind: 'done'; deliveryId: string; claimed?: number };

/** a due delivery claimed by this process (until its lease ends) */
export interface ClaimedDue {
  deliveryId: string;
  monitorId: string;
  webhookId: string;
  event: string;
  hitId: string | null;
  payload: unknown;
  attempt: number;
}

interface DueClaim {
  limit: number;
  /** per webhook at most this many in one claim */
  perWebhook: number;
  /** webhooks left out (this process has enough of theirs in flight) */
  busyWebhooks: readonly string[];
  leaseMs: number;
}

export interface DispatcherRepository {
  getMonitor(id: string): Promise<MonitorContext | null>;
  /** a recorded hit with its sequence number (null: recorded before events were numbered) */
  getHit(id: string): Promise<(HitRecord & { sequence: bigint | null }) | null>;
  /** a stored monitor.profile_changed / monitor.target_unavailable event (its payload as first sent) */
  getMonitorEvent(id: string): Promise<{ id: string; kind: string; payload: unknown } | null>;
  getAttempt(id: string): Promise<AttemptRecord | null>;
  /**
   * Resolves once the row is committed. With `due`, the delivery's due row is written or deleted
   * by the same statement (a retry is never scheduled without its failed attempt, nor the reverse).
   */
  recordAttempt(attempt: NewAttempt, due?: DueChange): Promise<void>;
  /** a delivery waits for its turn (fifo) without an attempt yet; nothing when it waits already */
  enqueueDue(due: NewDue): Promise<void>;
  /**
   * Claims due deliveries (FOR UPDATE SKIP LOCKED, a lease of `leaseMs`): of a fifo webhook only
   * its oldest, and only while no other process holds it.
   */
  claimDue(claim: DueClaim): Promise<ClaimedDue[]>;
  /** extends the claims of these deliveries (still at these attempts) by `leaseMs` from now: they are in flight here */
  renewDue(claims: readonly { deliveryId: string; attempt: number }[], leaseMs: number): Promise<void>;
  /** gives a claimed delivery back unsent (stopping): due again at once */
  releaseDue(deliveryId: string): Promise<void>;
  /** drops a due delivery that can never go out (its stored event is not one a webhook receives) */
  dropDue(deliveryId: string): Promise<void>;
  /** the attempts already logged with this delivery id (outcome and status) */
  loggedAttempts(deliveryId: string): Promise<LoggedAttempt[]>;
  /**
   * Counts a send's final outcome towards the endpoint's health (batched, one statement) and, in
   * the same statement, writes `account.webhook.failing` to `account_events` when the endpoint
   * becomes failing or disabled, or recovers (state `recovered`). Null when the endpoint is gone.
   */
  recordHealth(outcome: HealthOutcome): Promise<HealthChange | null>;
  /** marks broken; when it was not broken yet, also writes `account.webhook.failing` (state broken) */
  markBroken(endpointId: string, reason: string): Promise<void>;
  /** clears broken; when it was broken, also writes `account.webhook.failing` (state recovered) */
  clearBroken(endpointId: string): Promise<void>;
  ping(): Promise<void>;
}

interface LoggedAttempt {
  outcome: AttemptOutcome;
  statusCode: number | null;
  /** its number in the delivery's schedule (null: logged before attempts were numbered) */
  attempt: number | null;
}

/**
 * True when the database could not be reached or dropped the connection: worth trying the
 * message again later. A query the database refuses (constraint, trigger, bad data) is not.
 */
export const isTransientDbError = isDatabaseUnavailable;

/** A foreign key no longer holds (the monitor or hit was deleted meanwhile). */
export function isMissingParent(err: unknown): boolean {
  // the attempt insert runs on node-postgres (sqlPool): its error carries PostgreSQL's SQLSTATE
  if (
    err instanceof Error &&
    (err as { code?: unknown }).code === '23503' &&
    !(err instanceof Prisma.PrismaClientKnownRequestError)
  )
    return true;
  if (!(err instanceof Prisma.PrismaClientKnownRequestError)) return false;
  if (err.code === 'P2003' || err.code === 'P2025') return true;
  // a raw statement (the attempt insert): PostgreSQL's foreign_key_violation
  const cause = (err.meta as { driverAdapterError?: { cause?: { originalCode?: unknown } } } | undefined)
    ?.driverAdapterError?.cause;
  return err.code === 'P2010' && cause?.originalCode === '23503';
}

/**
 * The two statements on every delivery's path are SQL on the client's node-postgres pool
 * (`sqlPool`), not Prisma queries: Prisma 7 compiles each model query (its query compiler runs in
 * WebAssembly) and interprets the plan in JavaScript, and even a raw query goes through its
 * runtime (argument mapping, plan interpreter, result conversion), a measurable share of the
 * dispatcher's CPU per delivery (README "CPU per delivery"). The rest stays on Prisma. The monitor
 * look-up is @sts/db's MONITOR_CONTEXT_SQL; the attempt insert is below.
 */

/**
 * many attempts in one statement, the rows as one JSON parameter (one `JSON.stringify` of the
 * batch: node-postgres would escape every element of fourteen array parameters in JavaScript);
 * the pending redeliveries of their deliveries (Recover's marks) are cleared by the same
 * statement. The detail's headers are JSON arrays in the rows (jsonb as they are), its response
 * body base64 text, turned into bytea by the statement.
 */
const INSERTED_ATTEMPTS_CTE = `
  inserted AS (
    INSERT INTO delivery_attempts
      (monitor_id, hit_id, event, delivery_id, url, outcome, attempt, next_attempt_at, status_code, latency_ms,
       error, response_snippet, request_headers, request_body, response_headers, response_body)
    SELECT m, h, e, d, u, o::"DeliveryOutcome", n, na, s, l, er, rs, rqh, rqb, rsh, decode(rsb, 'base64')
    FROM json_to_recordset($1::json)
         AS t(m uuid, h uuid, e text, d text, u text, o text, n int, na timestamptz, s int, l int, er text, rs text,
              rqh jsonb, rqb text, rsh jsonb, rsb text)
    RETURNING delivery_id)`;

// an attempt of a delivery ends its pending redelivery (Recover queues it again only after that)
const INSERT_ATTEMPTS_SQL = `
  WITH ${INSERTED_ATTEMPTS_CTE}
  DELETE FROM pending_redeliveries p USING inserted i WHERE p.delivery_id = i.delivery_id`;

/** a due row, its parameters from $p on (dueParams); its event's sequence (a fifo webhook's order) from the payload */
const INSERT_DUE_SQL = (p: number) => `
  INSERT INTO webhook_deliveries_due
    (delivery_id, monitor_id, webhook_id, event, hit_id, payload, attempt, due_at, event_sequence)
  VALUES ($${p}, $${p + 1}::uuid, $${p + 2}::uuid, $${p + 3}, $${p + 4}::uuid, $${p + 5}::jsonb, $${p + 6}::int,
          $${p + 7}::timestamptz, COALESCE(($${p + 5}::jsonb ->> 'sequence')::bigint, 0))`;

/** a retry of a delivery without a due row (its first attempt, a held event): one row, whoever writes it first */
const INSERT_RETRY_SQL = `${INSERT_DUE_SQL(2)} ON CONFLICT (delivery_id) DO NOTHING`;

/** the claimed row moved to its next attempt (keeping its place, seq), only while still at the claimed attempt */
const MOVE_DUE_SQL = `
  UPDATE webhook_deliveries_due SET attempt = $3::int, due_at = $4::timestamptz, claimed_until = NULL
  WHERE delivery_id = $2 AND attempt = $5::int`;

/** a fifo turn: a message handled twice (redelivered by the broker) waits once */
const ENQUEUE_DUE_SQL = `${INSERT_DUE_SQL(1)} ON CONFLICT (delivery_id) DO NOTHING`;

const dueParams = (d: NewDue) => [
  d.deliveryId,
  d.monitorId,
  d.webhookId,
  d.event,
  d.hitId,
  JSON.stringify(d.payload),
  d.attempt,
  d.dueAt.toISOString(),
];

/** the attempt row and its delivery's due row, in one statement */
function dueChangeSql(change: DueChange): { sql: string; params: unknown[] } {
  if (change.kind === 'due') {
    const { due, claimed } = change;
    if (claimed === undefined) return { sql: INSERT_RETRY_SQL, params: dueParams(due) };
    return { sql: MOVE_DUE_SQL, params: [due.deliveryId, due.attempt, due.dueAt.toISOString(), claimed] };
  }
  if (change.claimed === undefined)
    return { sql: 'DELETE FROM webhook_deliveries_due WHERE delivery_id = $2', params: [change.deliveryId] };
  return {
    sql: 'DELETE FROM webhook_deliveries_due WHERE delivery_id = $2 AND attempt = $3::int',
    params: [change.deliveryId, change.claimed],
  };
}

function attemptWithDue(attempt: NewAttempt, change: DueChange): { sql: string; params: unknown[] } {
  const due = dueChangeSql(change);
  return {
    sql: `WITH ${INSERTED_ATTEMPTS_CTE},
      pending AS (DELETE FROM pending_redeliveries p USING inserted i WHERE p.delivery_id = i.delivery_id),
      due AS (${due.sql})
      SELECT 1`,
    params: [attemptsJson([attempt]), ...due.params],
  };
}

/**
 * Due deliveries, claimed: candidates by due time (at most `perWebhook` of a webhook; of a fifo
 * webhook only its first row by the event's sequence, then by when it was queued, and none while
 * one of its rows is claimed), locked with SKIP LOCKED and re-checked on the locked version, then
 * leased.
 *
 * Its cost follows the webhooks with rows and what it claims, never the rows waiting behind them:
 * `hooks` walks the distinct webhook ids of the table (one index descent each, a loose index
 * scan), and per webhook one LATERAL reads at most `perWebhook` rows in (webhook_id, due_at, seq)
 * order, or for a fifo webhook its head in (webhook_id, event_sequence, seq) order and its claimed
 * rows (the partial index webhook_deliveries_due_claimed_idx). The branch that does not apply to a
 * webhook's ordering is a one-time filter: never read.
 */
const CLAIM_DUE_SQL = `
  WITH RECURSIVE hooks(webhook_id) AS (
    (SELECT webhook_id FROM webhook_deliveries_due ORDER BY webhook_id LIMIT 1)
    UNION ALL
    SELECT (SELECT d.webhook_id FROM webhook_deliveries_due d WHERE d.webhook_id > h.webhook_id
            ORDER BY d.webhook_id LIMIT 1)
    FROM hooks h WHERE h.webhook_id IS NOT NULL
  ), cand AS (
    SELECT c.delivery_id, c.due_at, c.seq
    FROM hooks h
    JOIN webhook_endpoints w ON w.id = h.webhook_id
    CROSS JOIN LATERAL (
      (SELECT d.delivery_id, d.due_at, d.seq FROM webhook_deliveries_due d
       WHERE w.ordering = 'unordered' AND d.webhook_id = h.webhook_id AND d.due_at <= now()
         AND (d.claimed_until IS NULL OR d.claimed_until < now())
       ORDER BY d.due_at, d.seq LIMIT $3)
      UNION ALL
      -- a fifo webhook's head (of all its rows, due or not), when due and unclaimed
      (SELECT head.delivery_id, head.due_at, head.seq
       FROM (SELECT d.delivery_id, d.due_at, d.seq, d.claimed_until FROM webhook_deliveries_due d
             WHERE w.ordering = 'fifo' AND d.webhook_id = h.webhook_id
             ORDER BY d.event_sequence, d.seq LIMIT least($3, 1)) head
       WHERE head.due_at <= now() AND (head.claimed_until IS NULL OR head.claimed_until < now())
         -- nor while another of its rows is in flight (one queued since with a lower sequence waits for it)
         AND NOT EXISTS (SELECT 1 FROM webhook_deliveries_due o
                         WHERE o.webhook_id = h.webhook_id AND o.claimed_until IS NOT NULL
                           AND o.claimed_until >= now()))
    ) c
    WHERE NOT (h.webhook_id = ANY($2::uuid[]))
  ), picked AS (
    SELECT d.delivery_id FROM webhook_deliveries_due d
    WHERE d.delivery_id IN (SELECT delivery_id FROM cand ORDER BY due_at, seq LIMIT $1)
      AND (d.claimed_until IS NULL OR d.claimed_until < now())
    FOR UPDATE SKIP LOCKED
  )
  UPDATE webhook_deliveries_due d SET claimed_until = now() + $4::int * interval '1 millisecond'
  FROM picked WHERE d.delivery_id = picked.delivery_id
  RETURNING d.delivery_id, d.monitor_id, d.webhook_id, d.event, d.hit_id, d.payload, d.attempt`;

/** claims still held (claimed_until set, the row at the claimed attempt) extended by $3 ms from now */
const RENEW_DUE_SQL = `
  UPDATE webhook_deliveries_due d SET claimed_until = now() + $3::int * interval '1 millisecond'
  FROM unnest($1::text[], $2::int[]) AS c(delivery_id, attempt)
  WHERE d.delivery_id = c.delivery_id AND d.attempt = c.attempt AND d.claimed_until IS NOT NULL`;

interface ClaimedRow {
  delivery_id: string;
  monitor_id: string;
  webhook_id: string;
  event: string;
  hit_id: string | null;
  payload: unknown;
  attempt: number;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * U+FFFD for an unpaired surrogate (what UTF-8 encoding made of it before): PostgreSQL's JSON
 * refuses its escape. Only the error text can hold one (bodies are JSON, snippets decoded UTF-8).
 */
const wellFormed = (s: string) => s.replace(LONE_SURROGATE, '\uFFFD');

/** the rows as INSERT_ATTEMPTS_SQL's parameter */
function attemptsJson(rows: NewAttempt[]): string {
  return JSON.stringify(
    rows.map((r) => ({
      m: r.monitorId,
      h: r.hitId,
      e: r.event,
      d: r.deliveryId,
      u: r.url,
      o: r.outcome,
      n: r.attempt ?? null,
      na: r.nextAttemptAt?.toISOString() ?? null,
      s: r.statusCode,
      l: r.latencyMs,
      er: r.error === null ? null : wellFormed(r.error),
      rs: r.responseSnippet,
      rqh: r.requestHeaders ?? null,
      rqb: r.requestBody ?? null,
      rsh: r.responseHeaders ?? null,
      rsb: r.responseBody ? r.responseBody.toString('base64') : null,
    })),
  );
}

/**
 * \`account.webhook.failing\` rows for the dashboard's relay (services/dashboard mail/accountEvents.ts),
 * from a CTE \`ev(account_id, monitor_id, state, failures, at)\`. The key and payload are @sts/messaging's
 * accountEventKey and contract (once per monitor, state and UTC day; tested against them).
 */
export const INSERT_WEBHOOK_EVENTS_SQL = `
  INSERT INTO account_events (dedup_key, routing_key, account_id, payload)
  SELECT 'webhook:' || ev.account_id || ':' || ev.monitor_id || ':' || ev.state || ':'
           || to_char(ev.at AT TIME ZONE 'UTC', 'YYYY-MM-DD'),
         'account.webhook.failing', ev.account_id,
         jsonb_build_object('accountId', ev.account_id::text, 'monitorId', ev.monitor_id::text, 'state', ev.state,
           'consecutiveFailures', ev.failures,
           'occurredAt', to_char(ev.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
  FROM ev
  ON CONFLICT (dedup_key) DO NOTHING`;

/**
 * Endpoint health for a batch of outcomes, in order (ordinality): per endpoint, the failures after
 * its last success in the batch continue the stored streak (or start a new one after a success);
 * a success clears \`disabled_at\`; a streak of at least FAILING_AFTER that began DISABLE_AFTER_MS
 * before the outcome disables. The rows are locked (FOR UPDATE) so two batches count in turn.
 * A failing or disabled endpoint that a success brings back below FAILING_AFTER and enabled writes
 * the notice `recovered`.
 */
const HEALTH_SQL = `
  WITH input AS (
    SELECT * FROM unnest($1::uuid[], $2::boolean[], $3::timestamptz[]) WITH ORDINALITY AS i(endpoint_id, ok, at, n)
  ), tail AS (
    SELECT i.endpoint_id, l.last_ok IS NOT NULL AS any_ok, max(i.at) AS last_at,
           count(*) FILTER (WHERE NOT i.ok AND i.n > coalesce(l.last_ok, 0))::int AS fails,
           min(i.at) FILTER (WHERE NOT i.ok AND i.n > coalesce(l.last_ok, 0)) AS first_fail
    FROM input i
    JOIN (SELECT endpoint_id, max(n) FILTER (WHERE ok) AS last_ok FROM input GROUP BY endpoint_id) l USING (endpoint_id)
    GROUP BY i.endpoint_id, l.last_ok
  ), prev AS (
    SELECT w.id, w.monitor_id, w.consecutive_failures, w.first_failure_at, w.disabled_at
    FROM webhook_endpoints w WHERE w.id IN (SELECT endpoint_id FROM tail) FOR UPDATE
  ), calc AS (
    SELECT p.id, p.monitor_id, t.last_at, t.any_ok, p.consecutive_failures AS old_count, p.disabled_at AS old_disabled,
           CASE WHEN t.any_ok THEN t.fails ELSE p.consecutive_failures + t.fails END AS failures,
           CASE WHEN t.fails = 0 THEN NULL WHEN t.any_ok THEN t.first_fail
                ELSE coalesce(p.first_failure_at, t.first_fail) END AS first_at
    FROM prev p JOIN tail t ON t.endpoint_id = p.id
  ), fin AS (
    SELECT c.*,
           CASE WHEN c.any_ok THEN NULL WHEN c.old_disabled IS NOT NULL THEN c.old_disabled
                WHEN c.failures >= ${FAILING_AFTER}
                     AND c.first_at <= c.last_at - interval '${DISABLE_AFTER_MS} milliseconds' THEN c.last_at
           END AS disabled_at
    FROM calc c
  ), upd AS (
    UPDATE webhook_endpoints w
    SET consecutive_failures = f.failures, first_failure_at = f.first_at, disabled_at = f.disabled_at
    FROM fin f WHERE w.id = f.id
    RETURNING w.id
  ), ev AS (
    SELECT m.account_id, f.monitor_id, s.state, f.failures, f.last_at AS at
    FROM fin f JOIN monitors m ON m.id = f.monitor_id
    CROSS JOIN LATERAL (VALUES
      ('failing', f.old_count < ${FAILING_AFTER} AND f.failures >= ${FAILING_AFTER}),
      ('disabled', f.old_disabled IS NULL AND f.disabled_at IS NOT NULL),
      ('recovered', (f.old_count >= ${FAILING_AFTER} OR f.old_disabled IS NOT NULL)
                    AND f.failures < ${FAILING_AFTER} AND f.disabled_at IS NULL)) AS s(state, happened)
    WHERE s.happened
  ), ins AS (${INSERT_WEBHOOK_EVENTS_SQL})
  SELECT f.id, f.failures, f.first_at, f.disabled_at,
         f.old_count < ${FAILING_AFTER} AND f.failures >= ${FAILING_AFTER} AS became_failing,
         f.old_disabled IS NULL AND f.disabled_at IS NOT NULL AS became_disabled
  FROM fin f`;

interface HealthRow {
  id: string;
  failures: number;
  first_at: Date | string | null;
  disabled_at: Date | string | null;
  became_failing: boolean;
  became_disabled: boolean;
}

/** marks broken; writes the event only when it was not broken before (the row is locked meanwhile) */
const MARK_BROKEN_SQL = `
  WITH prev AS (
    SELECT id, monitor_id, is_broken AS was_broken, consecutive_failures FROM webhook_endpoints WHERE id = $1::uuid FOR UPDATE
  ), upd AS (
    UPDATE webhook_endpoints w SET is_broken = true, broken_reason = $2 FROM prev WHERE w.id = prev.id RETURNING w.id
  ), ev AS (
    SELECT m.account_id, prev.monitor_id, 'broken' AS state, prev.consecutive_failures AS failures, $3::timestamptz AS at
    FROM prev JOIN monitors m ON m.id = prev.monitor_id WHERE NOT prev.was_broken
  ), ins AS (${INSERT_WEBHOOK_EVENTS_SQL})
  SELECT 1`;

/** clears the broken flag; writes `account.webhook.failing` (state recovered) only when it was broken */
const CLEAR_BROKEN_SQL = `
  WITH prev AS (
    SELECT id, monitor_id, consecutive_failures FROM webhook_endpoints WHERE id = $1::uuid AND is_broken FOR UPDATE
  ), upd AS (
    UPDATE webhook_endpoints w SET is_broken = false, broken_reason = NULL FROM prev WHERE w.id = prev.id RETURNING w.id
  ), ev AS (
    SELECT m.account_id, prev.monitor_id, 'recovered' AS state, prev.consecutive_failures AS failures, $2::timestamptz AS at
    FROM prev JOIN monitors m ON m.id = prev.monitor_id
  ), ins AS (${INSERT_WEBHOOK_EVENTS_SQL})
  SELECT 1`;

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

/**
 * Rows that make an attempt insert go at once instead of lingering: 64, and never more than a
 * quarter of the prefetch. Each row holds its message unacknowledged, so a fill mark near the
 * prefetch would leave no message to fill the batch with, and every batch would wait out the linger.
 */
export function recordFillMark(prefetch: number): number {
  return Math.max(1, Math.min(64, Math.floor(prefetch / 4)));
}

/**
 * attempt rows, batched: one INSERT for the rows of a tick (what keeps 1,000+ deliveries/s); below
 * `fillTo` rows an insert waits up to `lingerMs` for more, so lone deliveries share commits
 */
function attemptWriter(sql: SqlPool, lingerMs: number, fillTo: number) {
  const insertAttempts = (rows: NewAttempt[]) => sql.query(INSERT_ATTEMPTS_SQL, [attemptsJson(rows)]);
  const writeRows = async (rows: NewAttempt[]): Promise<(Error | null)[]> => {
    try {
      await insertAttempts(rows);
      return rows.map(() => null);
    } catch (err) {
      if (rows.length === 1 || isTransientDbError(err)) throw err;
      // one bad row (its monitor deleted meanwhile) must not fail the others: write them one by one
      const results = await Promise.allSettled(rows.map((row) => insertAttempts([row])));
      return results.map((r) =>
        r.status === 'rejected' ? (r.reason instanceof Error ? r.reason : new Error(String(r.reason))) : null,
      );
    }
  };
  return createBatcher(writeRows, { lingerMs, fillTo });
}

/** health outcomes, batched: one statement per tick (HEALTH_SQL) */
function healthWriter(db: Db) {
  return createBatcher<HealthOutcome, HealthChange | null>(async (outcomes) => {
    const rows = await db.$queryRawUnsafe<HealthRow[]>(
      HEALTH_SQL,
      outcomes.map((o) => o.endpointId),
      outcomes.map((o) => o.delivered),
      outcomes.map((o) => o.at.toISOString()),
    );
    const byId = new Map(rows.map((r) => [r.id, r]));
    // the change is the batch's: reported to the endpoint's last outcome in it, the others get the state
    const last = new Map(outcomes.map((o, i) => [o.endpointId, i]));
    return outcomes.map((o, i) => {
      const r = byId.get(o.endpointId);
      if (!r) return null;
      const own = last.get(o.endpointId) === i;
      return {
        consecutiveFailures: r.failures,
        firstFailureAt: dateOrNull(r.first_at),
        disabledAt: dateOrNull(r.disabled_at),
        becameFailing: own && r.became_failing,
        becameDisabled: own && r.became_disabled,
      };
    });
  });
}

export interface RepositoryOptions {
  /** monitor contexts kept between deliveries (contextCache.ts); without it every delivery reads its monitor */
  cache?: MonitorContextCache<MonitorContext>;
  /** DISPATCH_RECORD_LINGER_MS: how long an attempt row may wait for others to share its insert (0: the next turn) */
  recordLingerMs?: number;
  /** with a linger: rows that make an insert go at once (recordFillMark of the prefetch; default 64) */
  recordFillTo?: number;
}

export function createPrismaRepository(db: Db, options: RepositoryOptions = {}): DispatcherRepository {
  const { cache } = options;
  const sql = sqlPool(db);
  const loadMonitors = monitorLoader(sql, cache);
  const writeAttempts = attemptWriter(sql, options.recordLingerMs ?? 0, options.recordFillTo ?? 64);
  const writeHealth = healthWriter(db);

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
    recordAttempt: async (attempt, due) => {
      if (due) {
        const { sql: text, params } = attemptWithDue(attempt, due);
        await sql.query(text, params);
        return;
      }
      const failed = await writeAttempts(attempt);
      if (failed) throw failed;
    },
    enqueueDue: async (due) => {
      await sql.query(ENQUEUE_DUE_SQL, dueParams(due));
    },
    claimDue: async (claim) => {
      const { rows } = await sql.query<ClaimedRow>(CLAIM_DUE_SQL, [
        claim.limit,
        claim.busyWebhooks,
        claim.perWebhook,
        claim.leaseMs,
      ]);
      return rows.map((r) => ({
        deliveryId: r.delivery_id,
        monitorId: r.monitor_id,
        webhookId: r.webhook_id,
        event: r.event,
        hitId: r.hit_id,
        payload: r.payload,
        attempt: r.attempt,
      }));
    },
    renewDue: async (claims, leaseMs) => {
      if (claims.length === 0) return;
      await sql.query(RENEW_DUE_SQL, [claims.map((c) => c.deliveryId), claims.map((c) => c.attempt), leaseMs]);
    },
    releaseDue: async (deliveryId) => {
      await sql.query('UPDATE webhook_deliveries_due SET claimed_until = NULL WHERE delivery_id = $1', [deliveryId]);
    },
    dropDue: async (deliveryId) => {
      await sql.query('DELETE FROM webhook_deliveries_due WHERE delivery_id = $1', [deliveryId]);
    },
    loggedAttempts: (deliveryId) =>
      db.deliveryAttempt.findMany({
        where: { deliveryId },
        select: { outcome: true, statusCode: true, attempt: true },
      }),
    recordHealth: async (outcome) => {
      const change = await writeHealth(outcome);
      cache?.endpointWritten(outcome.endpointId);
      return change;
    },
    markBroken: async (endpointId, reason) => {
      await db.$queryRawUnsafe(MARK_BROKEN_SQL, endpointId, reason, new Date().toISOString());
      cache?.endpointWritten(endpointId);
    },
    clearBroken: async (endpointId) => {
      await sql.query(CLEAR_BROKEN_SQL, [endpointId, new Date().toISOString()]);
      cache?.endpointWritten(endpointId);
    },
    ping: async () => {
      await db.$queryRaw`SELECT 1`;
    },
  };
}
