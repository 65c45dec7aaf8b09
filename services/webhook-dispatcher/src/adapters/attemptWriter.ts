/**
 * The attempt writer: what an attempt's answer writes. The attempt row (batched into one INSERT
 * per tick, with its delivery's due row in one statement when it has one), the endpoint's health
 * (batched, one statement per tick) and its broken flag, each with the customer's
 * `account.webhook.failing` notice when the endpoint's state changes; a write to an endpoint drops
 * its monitor from the context cache (contextCache.ts) so the next look-up reads it again.
 */
import {
  dateOrNull,
  isDatabaseUnavailable,
  Prisma,
  sqlPool,
  type Db,
  type MonitorContext,
  type SqlPool,
} from '@sts/db';
import type { HeaderPairs } from '../domain/attemptDetail';
import { DISABLE_AFTER_MS, FAILING_AFTER } from '../domain/health';
import type { MonitorContextCache } from '../contextCache';
import { createBatcher } from './batch';
import type { DeliveryEvent } from './consumer';
import { dueChangeSql, type DueChange } from './dueStore';

export type AttemptOutcome = 'delivered' | 'failed' | 'skipped' | 'exhausted';

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

export interface AttemptWriter {
  /**
   * Resolves once the row is committed. With `due`, the delivery's due row is written or deleted
   * by the same statement (a retry is never scheduled without its failed attempt, nor the reverse).
   */
  recordAttempt(attempt: NewAttempt, due?: DueChange): Promise<void>;
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
 * The attempt insert is SQL on the client's node-postgres pool (`sqlPool`), not a Prisma query,
 * like the monitor look-up (monitorReader.ts) and the due rows (dueStore.ts): Prisma 7 compiles
 * each model query (its query compiler runs in WebAssembly) and interprets the plan in JavaScript,
 * and even a raw query goes through its runtime (argument mapping, plan interpreter, result
 * conversion), a measurable share of the dispatcher's CPU per delivery (README "CPU per
 * delivery"). The health statement and the rest stay on Prisma.
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
function attemptInserts(sql: SqlPool, lingerMs: number, fillTo: number) {
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

export interface AttemptWriterOptions {
  /** monitor contexts kept between deliveries (contextCache.ts): an endpoint written here drops its monitor */
  cache?: MonitorContextCache<MonitorContext>;
  /** DISPATCH_RECORD_LINGER_MS: how long an attempt row may wait for others to share its insert (0: the next turn) */
  recordLingerMs?: number;
  /** with a linger: rows that make an insert go at once (recordFillMark of the prefetch; default 64) */
  recordFillTo?: number;
}

export function createAttemptWriter(db: Db, options: AttemptWriterOptions = {}): AttemptWriter {
  const { cache } = options;
  const sql = sqlPool(db);
  const writeAttempts = attemptInserts(sql, options.recordLingerMs ?? 0, options.recordFillTo ?? 64);
  const writeHealth = healthWriter(db);
  return {
    recordAttempt: async (attempt, due) => {
      if (due) {
        const { sql: text, params } = attemptWithDue(attempt, due);
        await sql.query(text, params);
        return;
      }
      const failed = await writeAttempts(attempt);
      if (failed) throw failed;
    },
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
  };
}
