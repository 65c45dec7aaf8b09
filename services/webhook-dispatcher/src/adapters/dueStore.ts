/**
 * The due store: webhook_deliveries_due, the deliveries that wait for a later attempt (a retry) or
 * for their turn (fifo). Rows are written with their attempt (adapters/attemptWriter.ts puts
 * `dueChangeSql` in the attempt row's statement) or queued here, then claimed with a lease, renewed
 * while in flight, released when stopping, dropped when they can never go out. SQL on the client's
 * node-postgres pool (see attemptWriter.ts for why).
 */
import { sqlPool, type Db } from '@sts/db';
import type { DeliveryEvent } from './consumer';

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

export interface DueStore {
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
}

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

/** the due row's part of an attempt's statement, its parameters from $2 on (the attempt rows are $1) */
export function dueChangeSql(change: DueChange): { sql: string; params: unknown[] } {
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

export function createDueStore(db: Db): DueStore {
  const sql = sqlPool(db);
  return {
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
  };
}
