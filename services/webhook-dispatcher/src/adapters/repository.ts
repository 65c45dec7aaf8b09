/**
 * The dispatcher's PostgreSQL access (Prisma). Monitor look-ups and attempt writes are
 * micro-batched (see batch.ts); everything a delivery needs comes from one look-up: the monitor,
 * its account's plan and its webhook endpoint.
 */
import { hitSelect, isDatabaseUnavailable, Prisma, type Db, type HitRow as HitRecord } from '@sts/db';
import type { PlanName } from '@sts/core';
import type { WebhookKind } from '../domain/payloads';
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
    isBroken: boolean;
    brokenReason: string | null;
  } | null;
}

export type { HitRecord };

export interface AttemptRecord {
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

export interface LoggedAttempt {
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
  return err instanceof Prisma.PrismaClientKnownRequestError && (err.code === 'P2003' || err.code === 'P2025');
}

const monitorSelect = {
  id: true,
  accountId: true,
  targetUsername: true,
  keywords: true,
  isActive: true,
  account: { select: { plan: true, trialEndsAt: true } },
  webhook: {
    select: { id: true, url: true, kind: true, secretCiphertext: true, isBroken: true, brokenReason: true },
  },
} as const;

export function createPrismaRepository(db: Db): DispatcherRepository {
  const loadMonitors = createBatcher<string, MonitorContext | null>(async (ids) => {
    const rows = await db.monitor.findMany({ where: { id: { in: [...new Set(ids)] } }, select: monitorSelect });
    const byId = new Map(
      rows.map((r) => [
        r.id,
        {
          id: r.id,
          accountId: r.accountId,
          targetUsername: r.targetUsername,
          keywords: r.keywords,
          isActive: r.isActive,
          plan: r.account.plan,
          trialEndsAt: r.account.trialEndsAt,
          webhook: r.webhook,
        } satisfies MonitorContext,
      ]),
    );
    return ids.map((id) => byId.get(id) ?? null);
  });

  const writeAttempts = createBatcher<NewAttempt, Error | null>(async (rows) => {
    try {
      await db.deliveryAttempt.createMany({ data: rows });
      return rows.map(() => null);
    } catch (err) {
      if (rows.length === 1) throw err;
      // one bad row (its monitor deleted meanwhile) must not fail the others: write them one by one
      const results = await Promise.allSettled(
        rows.map((data) => db.deliveryAttempt.create({ data, select: { id: true } })),
      );
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
