/**
 * The hold in PostgreSQL (`held_events`, and `webhook_endpoints.held_count` / `held_dropped`
 * kept by the same statements that add and remove rows, the endpoint row locked by the update):
 * events held for a disabled endpoint, claimed one at a time, oldest first (detectedAt, id) for the release, dropped
 * past a bound with a skipped attempt row each and, at a hold's first drop, one
 * `account.webhook.failing` row (state `held_dropped`) for the account's mail. A retry that fell
 * due while the endpoint was disabled moves from its due row to the hold in one statement, with
 * the number of the attempt that was due, and its last logged attempt's `next_attempt_at` cleared
 * (the delivery log shows that attempt `held` instead: @sts/usecases adapters/logs.ts).
 *
 * The same bound holds for a webhook's deliveries waiting in webhook_deliveries_due (retries, fifo
 * turns; `webhook_endpoints.due_count` kept by triggers): past it the oldest waiting are dropped
 * the same way (one statement shape, dropSql), the account told at the first drop since the
 * webhook last had none waiting (state `due_dropped`).
 */
import { sqlPool, type Db, type SqlPool } from '@sts/db';
import type { DeliveryEvent } from './consumer';
import { INSERT_WEBHOOK_EVENTS_SQL } from './attemptWriter';

interface HeldEventInput {
  endpointId: string;
  monitorId: string;
  event: DeliveryEvent;
  deliveryId: string;
  hitId: string | null;
  payload: unknown;
  /** the redacted URL, as the attempt log shows it */
  url: string;
  /** the event's own time: the release's order */
  detectedAt: Date;
  /** a retry (or fifo turn) claimed from webhook_deliveries_due: its row moves to the hold, its attempt number kept */
  due?: { attempt: number };
}

export interface HeldEvent {
  id: string;
  monitorId: string;
  event: string;
  deliveryId: string;
  hitId: string | null;
  payload: unknown;
  /** claimed before by a dispatcher that did not finish it: it may have been sent and logged */
  reclaimed: boolean;
  /** the attempt it goes out as (1, or a held retry's number) */
  attempt: number;
}

export interface DropRule {
  /** held before this: dropped with `ageReason` */
  cutoff: Date;
  /** at most this many held per endpoint: the oldest beyond it dropped with `sizeReason` */
  max: number;
  ageReason: string;
  sizeReason: string;
}

interface DueDropRule {
  /** at most this many waiting per webhook */
  max: number;
  reason: string;
  /** the redacted URL, as the attempt log shows it */
  url: string;
}

export interface HoldingStore {
  /** holds an event; the endpoint's held count after it, or null when it was held already (same delivery id) */
  hold(input: HeldEventInput): Promise<number | null>;
  /**
   * Claims the endpoint's oldest held event for `leaseMs`, or null when there is none or another
   * dispatcher is sending it (its claim not yet expired): one at a time, in order.
   */
  claimNext(endpointId: string, leaseMs: number): Promise<HeldEvent | null>;
  /** extends a claim still held by `leaseMs` from now (its event is being sent here) */
  renew(id: string, leaseMs: number): Promise<void>;
  /** the claimed event went out (or was logged): removed from the hold */
  finish(id: string, endpointId: string): Promise<void>;
  /** the claim is given back (the endpoint was disabled again): it waits for the next release */
  unclaim(id: string): Promise<void>;
  /** drops the endpoint's held events past the rule (at most `limit`), logged as skipped; how many */
  drop(endpointId: string, rule: DropRule, limit: number): Promise<number>;
  /** webhooks with more than `max` deliveries waiting in webhook_deliveries_due (at most `limit`) */
  overDue(max: number, limit: number): Promise<{ endpointId: string; monitorId: string }[]>;
  /** drops the webhook's oldest waiting deliveries past the rule's `max` (at most `limit`), logged as skipped; how many */
  dropDue(endpointId: string, rule: DueDropRule, limit: number): Promise<number>;
  /** enabled endpoints with held events, in random order so replicas spread over them (at most `limit`) */
  releasable(limit: number): Promise<string[]>;
  /** endpoints with events held before `cutoff` (at most `limit` rows looked at) */
  expired(cutoff: Date, limit: number): Promise<string[]>;
}

// $9: the attempt number; with $10 the delivery's due row goes in the same statement (a retry
// moved to the hold is never both waiting and held, nor lost between the two), while it is still
// at that attempt (not when another replica moved it on meanwhile), and the attempt that scheduled
// it no longer names a time for the next one (the delivery log shows it held)
const HOLD_SQL = `
  WITH ins AS (
    INSERT INTO held_events (endpoint_id, monitor_id, event, delivery_id, hit_id, payload, url, detected_at, attempt)
    VALUES ($1::uuid, $2::uuid, $3, $4, $5::uuid, $6::jsonb, $7, $8::timestamptz, $9::int)
    ON CONFLICT (delivery_id) DO NOTHING
    RETURNING endpoint_id
  ), gone AS (DELETE FROM webhook_deliveries_due WHERE $10::boolean AND delivery_id = $4 AND attempt = $9::int)
  , scheduled AS (
    UPDATE delivery_attempts SET next_attempt_at = NULL
    WHERE $10::boolean AND delivery_id = $4 AND attempt = $9::int - 1 AND next_attempt_at IS NOT NULL
      AND EXISTS (SELECT 1 FROM ins))
  UPDATE webhook_endpoints w SET held_count = w.held_count + 1
  FROM ins WHERE w.id = ins.endpoint_id
  RETURNING w.held_count`;

// the head only (FOR UPDATE): two dispatchers claiming at once take turns on the same row, and
// the second finds it claimed, so an endpoint's events go out one at a time, oldest first; events
// detected at the same time (one poll's posts) in their monitor's sequence, whatever order they
// were held in (the index gives detected_at's order, the sequence is sorted within it). A fifo
// webhook's release waits while one of its deliveries waits for a retry: when that falls due it
// is held again (it goes to the head, by its time), so nothing overtakes it
const CLAIM_SQL = `
  WITH head AS (
    SELECT id, claimed_until FROM held_events WHERE endpoint_id = $1::uuid
    ORDER BY detected_at, (payload ->> 'sequence')::bigint NULLS FIRST, id LIMIT 1 FOR UPDATE)
  UPDATE held_events h SET claimed_until = now() + make_interval(secs => $2::float8 / 1000)
  FROM head
  WHERE h.id = head.id AND (head.claimed_until IS NULL OR head.claimed_until < now())
    AND NOT EXISTS (SELECT 1 FROM webhook_endpoints w JOIN webhook_deliveries_due d ON d.webhook_id = w.id
                    WHERE w.id = $1::uuid AND w.ordering = 'fifo')
  RETURNING h.id::text, h.monitor_id, h.event, h.delivery_id, h.hit_id, h.payload, h.attempt,
            head.claimed_until IS NOT NULL AS reclaimed`;

// an empty hold ends it: the next hold's first drop mails again
const FINISH_SQL = `
  WITH d AS (DELETE FROM held_events WHERE id = $1::bigint RETURNING endpoint_id)
  UPDATE webhook_endpoints w
  SET held_count = w.held_count - 1, held_dropped = CASE WHEN w.held_count <= 1 THEN 0 ELSE w.held_dropped END
  FROM d WHERE w.id = d.endpoint_id`;

/**
 * A drop of an endpoint's ($1) waiting events, logged as skipped: `removed` are CTEs defining `d`,
 * the rows deleted (monitor_id, hit_id, event, delivery_id, url, attempt, reason); `counters` the
 * endpoint's update, `n.n` the rows dropped, and `before` what its drop counter was before them
 * (0: this drop starts it, and one `account.webhook.failing` row with `state` tells the account).
 */
function dropSql(drop: { removed: string; counters: string; before: string; state: string }): string {
  return `
  WITH ${drop.removed}, att AS (
    INSERT INTO delivery_attempts (monitor_id, hit_id, event, delivery_id, url, outcome, attempt, error)
    SELECT monitor_id, hit_id, event, delivery_id, url, 'skipped'::"DeliveryOutcome", attempt, reason
    FROM d
  ), n AS (SELECT count(*)::int AS n FROM d
  ), upd AS (
    UPDATE webhook_endpoints w SET ${drop.counters}
    FROM n WHERE w.id = $1::uuid AND n.n > 0
    RETURNING w.monitor_id, w.consecutive_failures, ${drop.before} AS dropped_before
  ), ev AS (
    SELECT m.account_id, u.monitor_id, '${drop.state}' AS state, u.consecutive_failures AS failures, now() AS at
    FROM upd u JOIN monitors m ON m.id = u.monitor_id WHERE u.dropped_before = 0
  ), ins AS (${INSERT_WEBHOOK_EVENTS_SQL})
  SELECT n FROM n`;
}

const DROP_SQL = dropSql({
  removed: `first_over AS (
    SELECT detected_at, id FROM held_events WHERE endpoint_id = $1::uuid
    ORDER BY detected_at DESC, id DESC OFFSET $3 LIMIT 1
  ), over AS (
    SELECT h.id FROM held_events h
    WHERE h.endpoint_id = $1::uuid
      AND (h.held_at < $2::timestamptz
           OR (h.detected_at, h.id) <= (SELECT f.detected_at, f.id FROM first_over f))
      AND (h.claimed_until IS NULL OR h.claimed_until < now())
    ORDER BY h.detected_at, h.id LIMIT $6 FOR UPDATE SKIP LOCKED
  ), d AS (
    DELETE FROM held_events h USING over WHERE h.id = over.id
    RETURNING h.monitor_id, h.hit_id, h.event, h.delivery_id, h.url, h.attempt,
              CASE WHEN h.held_at < $2::timestamptz THEN $4::text ELSE $5::text END AS reason
  )`,
  counters: 'held_count = w.held_count - n.n, held_dropped = w.held_dropped + n.n',
  before: 'w.held_dropped - n.n',
  state: 'held_dropped',
});

// the webhook's due rows past $2 (due_count, kept by triggers), oldest queued first, none in
// flight (claimed): at most $5, each logged as the attempt it waited for, under the url $3; the
// failed attempt before a dropped retry loses its next attempt's time (the log shows none coming)
const DROP_DUE_SQL = dropSql({
  removed: `over AS (
    SELECT d.delivery_id FROM webhook_deliveries_due d
    WHERE d.webhook_id = $1::uuid AND (d.claimed_until IS NULL OR d.claimed_until < now())
    ORDER BY d.seq
    LIMIT least($5::int, greatest((SELECT w.due_count FROM webhook_endpoints w WHERE w.id = $1::uuid) - $2::int, 0))
    FOR UPDATE SKIP LOCKED
  ), d AS (
    DELETE FROM webhook_deliveries_due x USING over WHERE x.delivery_id = over.delivery_id
    RETURNING x.monitor_id, x.hit_id, x.event, x.delivery_id, $3::text AS url, x.attempt, $4::text AS reason
  ), unscheduled AS (
    -- the attempt that scheduled a dropped retry no longer names a time for it
    UPDATE delivery_attempts a SET next_attempt_at = NULL
    FROM d WHERE a.delivery_id = d.delivery_id AND a.attempt = d.attempt - 1 AND a.next_attempt_at IS NOT NULL
  )`,
  counters: 'due_dropped = w.due_dropped + n.n',
  before: 'w.due_dropped - n.n',
  state: 'due_dropped',
});

interface ClaimRow {
  id: string;
  monitor_id: string;
  event: string;
  delivery_id: string;
  hit_id: string | null;
  payload: unknown;
  attempt: number;
  reclaimed: boolean;
}

export interface HoldingStoreOptions {
  /** the process's own writes that start or end a hold drop the monitor from its cache at once */
  endpointWritten?: (endpointId: string) => void;
}

export function createHoldingStore(db: Db, options: HoldingStoreOptions = {}): HoldingStore {
  const sql: SqlPool = sqlPool(db);
  const written = options.endpointWritten ?? (() => undefined);
  return {
    async hold(e) {
      const { rows } = await sql.query<{ held_count: number }>(HOLD_SQL, [
        e.endpointId,
        e.monitorId,
        e.event,
        e.deliveryId,
        e.hitId,
        JSON.stringify(e.payload),
        e.url,
        e.detectedAt.toISOString(),
        e.due?.attempt ?? 1,
        e.due !== undefined,
      ]);
      const count = rows[0]?.held_count ?? null;
      if (count === 1) written(e.endpointId);
      return count;
    },
    async claimNext(endpointId, leaseMs) {
      const { rows } = await sql.query<ClaimRow>(CLAIM_SQL, [endpointId, leaseMs]);
      const r = rows[0];
      if (!r) return null;
      return {
        id: r.id,
        monitorId: r.monitor_id,
        event: r.event,
        deliveryId: r.delivery_id,
        hitId: r.hit_id,
        payload: r.payload,
        reclaimed: r.reclaimed,
        attempt: r.attempt,
      };
    },
    async finish(id, endpointId) {
      await sql.query(FINISH_SQL, [id]);
      written(endpointId);
    },
    async renew(id, leaseMs) {
      await sql.query(
        'UPDATE held_events SET claimed_until = now() + make_interval(secs => $2::float8 / 1000) WHERE id = $1::bigint AND claimed_until IS NOT NULL',
        [id, leaseMs],
      );
    },
    async unclaim(id) {
      await sql.query('UPDATE held_events SET claimed_until = NULL WHERE id = $1::bigint', [id]);
    },
    async drop(endpointId, rule, limit) {
      const { rows } = await sql.query<{ n: number }>(DROP_SQL, [
        endpointId,
        rule.cutoff.toISOString(),
        rule.max,
        rule.ageReason,
        rule.sizeReason,
        limit,
      ]);
      const n = rows[0]?.n ?? 0;
      if (n > 0) written(endpointId);
      return n;
    },
    async overDue(max, limit) {
      const { rows } = await sql.query<{ id: string; monitor_id: string }>(
        'SELECT id, monitor_id FROM webhook_endpoints WHERE due_count > $1 ORDER BY due_count DESC LIMIT $2',
        [max, limit],
      );
      return rows.map((r) => ({ endpointId: r.id, monitorId: r.monitor_id }));
    },
    async dropDue(endpointId, rule, limit) {
      const { rows } = await sql.query<{ n: number }>(DROP_DUE_SQL, [
        endpointId,
        rule.max,
        rule.url,
        rule.reason,
        limit,
      ]);
      return rows[0]?.n ?? 0;
    },
    async releasable(limit) {
      const { rows } = await sql.query<{ id: string }>(
        'SELECT id FROM webhook_endpoints WHERE held_count > 0 AND disabled_at IS NULL ORDER BY random() LIMIT $1',
        [limit],
      );
      return rows.map((r) => r.id);
    },
    async expired(cutoff, limit) {
      const { rows } = await sql.query<{ endpoint_id: string }>(
        'SELECT endpoint_id FROM held_events WHERE held_at < $1::timestamptz ORDER BY held_at LIMIT $2',
        [cutoff.toISOString(), limit],
      );
      return [...new Set(rows.map((r) => r.endpoint_id))];
    },
  };
}
