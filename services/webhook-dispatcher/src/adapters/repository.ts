/**
 * The dispatcher's PostgreSQL access (Prisma; the two statements on every delivery's path as raw
 * SQL). Monitor look-ups and attempt writes are micro-batched (see batch.ts); everything a
 * delivery needs comes from one look-up: the monitor, its account's plan and its webhook endpoint.
 */
import { hitSelect, isDatabaseUnavailable, Prisma, type Db, type HitRow as HitRecord } from '@sts/db';
import type { PlanName } from '@sts/core';
import type { WebhookKind } from '../domain/payloads';
import type { HeaderPairs } from '../domain/attemptDetail';
import { createBatcher } from './batch';

export interface MonitorContext {
  id: string;
  accountId: string;
  targetUsername: string;
  keywords: string[];
  isActive: boolean;
  plan: PlanName;
  trialEndsAt: Date | null;
  webhook: {
    id: string;
    url: string;
    kind: WebhookKind;
    secretCiphertext: string;
    /** an overlapped rotation: the old secret, in force for X-Service-Signature until `previousSecretUntil` */
    previousSecretCiphertext: string | null;
    previousSecretUntil: Date | null;
    isBroken: boolean;
    brokenReason: string | null;
  } | null;
}

interface AttemptRecord {
  id: string;
  monitorId: string;
  hitId: string | null;
  event: string;
  deliveryId: string;
  outcome: 'delivered' | 'failed' | 'skipped';
}

export interface NewAttempt {
  monitorId: string;
  hitId: string | null;
  event: 'monitor.hit' | 'monitor.test';
  deliveryId: string;
  url: string;
  outcome: 'delivered' | 'failed' | 'skipped';
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

export interface DispatcherRepository {
  getMonitor(id: string): Promise<MonitorContext | null>;
  getHit(id: string): Promise<HitRecord | null>;
  getAttempt(id: string): Promise<AttemptRecord | null>;
  /** resolves once the row is committed */
  recordAttempt(attempt: NewAttempt): Promise<void>;
  /** the attempts already logged with this delivery id (outcome and status) */
  loggedAttempts(deliveryId: string): Promise<LoggedAttempt[]>;
  markBroken(endpointId: string, reason: string): Promise<void>;
  clearBroken(endpointId: string): Promise<void>;
  ping(): Promise<void>;
  /**
   * Deletes up to `batch` attempts created before `cutoff`; returns how many. Rows another
   * replica is deleting at the same time are skipped (FOR UPDATE SKIP LOCKED), never waited for.
   */
  deleteAttemptsBefore(cutoff: Date, batch: number): Promise<number>;
}

interface LoggedAttempt {
  outcome: 'delivered' | 'failed' | 'skipped';
  statusCode: number | null;
}

/**
 * True when the database could not be reached or dropped the connection: worth trying the
 * message again later. A query the database refuses (constraint, trigger, bad data) is not.
 */
export const isTransientDbError = isDatabaseUnavailable;

/** A foreign key no longer holds (the monitor or hit was deleted meanwhile). */
export function isMissingParent(err: unknown): boolean {
  if (!(err instanceof Prisma.PrismaClientKnownRequestError)) return false;
  if (err.code === 'P2003' || err.code === 'P2025') return true;
  // a raw statement (the attempt insert): PostgreSQL's foreign_key_violation
  const cause = (err.meta as { driverAdapterError?: { cause?: { originalCode?: unknown } } } | undefined)
    ?.driverAdapterError?.cause;
  return err.code === 'P2010' && cause?.originalCode === '23503';
}

/**
 * The two statements on every delivery's path are raw SQL, not Prisma model queries: Prisma 7
 * compiles each model query (its query compiler runs in WebAssembly) and interprets the plan in
 * JavaScript, which cost about 0.5–2 ms of CPU per delivery, the largest share of the dispatcher's
 * CPU (measured, README "Throughput"). Raw SQL skips both; the rest stays on Prisma.
 */
const MONITOR_SQL = `
  SELECT m.id, m.account_id, m.target_username, m.keywords, m.is_active, a.plan, a.trial_ends_at,
         w.id AS webhook_id, w.url AS webhook_url, w.kind::text AS webhook_kind,
         w.secret_ciphertext, w.previous_secret_ciphertext, w.previous_secret_until, w.is_broken, w.broken_reason
  FROM monitors m
  JOIN accounts a ON a.id = m.account_id
  LEFT JOIN webhook_endpoints w ON w.monitor_id = m.id
  WHERE m.id = ANY($1::uuid[])`;

interface MonitorRow {
  id: string;
  account_id: string;
  target_username: string;
  keywords: string[];
  is_active: boolean;
  plan: PlanName;
  trial_ends_at: Date | string | null;
  webhook_id: string | null;
  webhook_url: string | null;
  webhook_kind: WebhookKind | null;
  secret_ciphertext: string | null;
  previous_secret_ciphertext: string | null;
  previous_secret_until: Date | string | null;
  is_broken: boolean | null;
  broken_reason: string | null;
}

function monitorOf(r: MonitorRow): MonitorContext {
  return {
    id: r.id,
    accountId: r.account_id,
    targetUsername: r.target_username,
    keywords: r.keywords,
    isActive: r.is_active,
    plan: r.plan,
    trialEndsAt: r.trial_ends_at === null ? null : new Date(r.trial_ends_at),
    webhook:
      r.webhook_id === null
        ? null
        : {
            id: r.webhook_id,
            url: r.webhook_url!,
            kind: r.webhook_kind!,
            secretCiphertext: r.secret_ciphertext!,
            previousSecretCiphertext: r.previous_secret_ciphertext,
            previousSecretUntil: r.previous_secret_until === null ? null : new Date(r.previous_secret_until),
            isBroken: r.is_broken!,
            brokenReason: r.broken_reason,
          },
  };
}

/**
 * many attempts in one statement: one array parameter per column. The detail's headers travel as
 * JSON text and its response body as base64 text (plain text arrays: the driver's array encoding
 * is the same for every column), turned into jsonb / bytea by the statement itself.
 */
const INSERT_ATTEMPTS_SQL = `
  INSERT INTO delivery_attempts
    (monitor_id, hit_id, event, delivery_id, url, outcome, status_code, latency_ms, error, response_snippet,
     request_headers, request_body, response_headers, response_body)
  SELECT m, h, e, d, u, o, s, l, er, rs, rqh::jsonb, rqb, rsh::jsonb, decode(rsb, 'base64')
  FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::"DeliveryOutcome"[],
              $7::int[], $8::int[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[])
       AS t(m, h, e, d, u, o, s, l, er, rs, rqh, rqb, rsh, rsb)`;

const jsonOrNull = (v: unknown) => (v === null || v === undefined ? null : JSON.stringify(v));

function attemptColumns(rows: NewAttempt[]): unknown[] {
  return [
    rows.map((r) => r.monitorId),
    rows.map((r) => r.hitId),
    rows.map((r) => r.event),
    rows.map((r) => r.deliveryId),
    rows.map((r) => r.url),
    rows.map((r) => r.outcome),
    rows.map((r) => r.statusCode),
    rows.map((r) => r.latencyMs),
    rows.map((r) => r.error),
    rows.map((r) => r.responseSnippet),
    rows.map((r) => jsonOrNull(r.requestHeaders)),
    rows.map((r) => r.requestBody ?? null),
    rows.map((r) => jsonOrNull(r.responseHeaders)),
    rows.map((r) => (r.responseBody ? r.responseBody.toString('base64') : null)),
  ];
}

export function createPrismaRepository(db: Db): DispatcherRepository {
  const loadMonitors = createBatcher<string, MonitorContext | null>(async (ids) => {
    const rows = await db.$queryRawUnsafe<MonitorRow[]>(MONITOR_SQL, [...new Set(ids)]);
    const byId = new Map(rows.map((r) => [r.id, monitorOf(r)]));
    return ids.map((id) => byId.get(id) ?? null);
  });

  const insertAttempts = (rows: NewAttempt[]) => db.$executeRawUnsafe(INSERT_ATTEMPTS_SQL, ...attemptColumns(rows));
  const writeAttempts = createBatcher<NewAttempt, Error | null>(async (rows) => {
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
  });

  return {
    getMonitor: (id) => loadMonitors(id),
    getHit: (id) => db.hit.findUnique({ where: { id }, select: hitSelect }),
    getAttempt: (id) =>
      db.deliveryAttempt.findUnique({
        where: { id },
        select: { id: true, monitorId: true, hitId: true, event: true, deliveryId: true, outcome: true },
      }),
    recordAttempt: async (attempt) => {
      const failed = await writeAttempts(attempt);
      if (failed) throw failed;
    },
    loggedAttempts: (deliveryId) =>
      db.deliveryAttempt.findMany({ where: { deliveryId }, select: { outcome: true, statusCode: true } }),
    markBroken: async (endpointId, reason) => {
      await db.webhookEndpoint.updateMany({
        where: { id: endpointId },
        data: { isBroken: true, brokenReason: reason },
      });
    },
    clearBroken: async (endpointId) => {
      await db.webhookEndpoint.updateMany({
        where: { id: endpointId, isBroken: true },
        data: { isBroken: false, brokenReason: null },
      });
    },
    ping: async () => {
      await db.$queryRaw`SELECT 1`;
    },
    deleteAttemptsBefore: async (cutoff, batch) =>
      db.$executeRaw`
        WITH doomed AS (
          SELECT id FROM delivery_attempts WHERE created_at < ${cutoff} LIMIT ${batch} FOR UPDATE SKIP LOCKED
        )
        DELETE FROM delivery_attempts d USING doomed WHERE d.id = doomed.id`,
  };
}
