/** The delivery log and the hit history in PostgreSQL (Prisma; the recovery's query as SQL). */
import { hitSelect, type Db, type Prisma } from '@sts/db';
import type { CursorPosition } from '../cursor';
import type { AttemptRecord, LogsRepository } from '../repositories/logs';

const attemptSelect = {
  id: true,
  event: true,
  deliveryId: true,
  hitId: true,
  outcome: true,
  attempt: true,
  nextAttemptAt: true,
  statusCode: true,
  latencyMs: true,
  error: true,
  url: true,
  responseSnippet: true,
  createdAt: true,
} as const satisfies Prisma.DeliveryAttemptSelect satisfies Record<Exclude<keyof AttemptRecord, 'held'>, true>;

/**
 * `held` for each attempt: its delivery waits in the hold (held_events) to go out as the attempt
 * after it, a retry that fell due while the webhook was disabled
 */
async function withHeld<T extends { deliveryId: string; attempt: number | null }>(
  db: Db,
  rows: T[],
): Promise<(T & { held: boolean })[]> {
  const ids = [...new Set(rows.filter((r) => r.attempt !== null).map((r) => r.deliveryId))];
  const held =
    ids.length === 0
      ? []
      : await db.heldEvent.findMany({
          where: { deliveryId: { in: ids } },
          select: { deliveryId: true, attempt: true },
        });
  const next = new Map(held.map((h) => [h.deliveryId, h.attempt]));
  return rows.map((r) => ({ ...r, held: r.attempt !== null && next.get(r.deliveryId) === r.attempt + 1 }));
}

type Newest = 'createdAt' | 'detectedAt';

/**
 * A monitor's rows newest first in (field desc, id desc), strictly older than the cursor when
 * there is one: the keyset the (monitor_id, time desc) indexes serve.
 */
function newestFirst<F extends Newest>(field: F, monitorId: string, after: CursorPosition | undefined, take: number) {
  const older = after ? { OR: [{ [field]: { lt: after.at } }, { [field]: after.at, id: { lt: after.id } }] } : {};
  const orderBy = [{ [field]: 'desc' } as Record<F, 'desc'>, { id: 'desc' as const }];
  return { where: { monitorId, ...older }, orderBy, take };
}

/** The plan's window on the partition key: old weeks are pruned from the plan, not read. */
function within<Q extends { where: object }, K extends string>(q: Q, key: K, since: Date) {
  return { ...q, where: { ...q.where, [key]: { gte: since } } };
}

export function prismaLogs(db: Db): LogsRepository {
  return {
    attempts: async (monitorId, after, take, since) =>
      withHeld(
        db,
        await db.deliveryAttempt.findMany({
          ...within(newestFirst('createdAt', monitorId, after, take), 'createdAt', since),
          select: attemptSelect,
        }),
      ),

    async findAttempt(accountId, id) {
      const a = await db.deliveryAttempt.findFirst({
        where: { id, monitor: { accountId } },
        select: { ...attemptSelect, monitorId: true, monitor: { select: { accountId: true } } },
      });
      if (!a) return null;
      const { monitor, ...attempt } = a;
      const [withFlag] = await withHeld(db, [attempt]);
      return { ...withFlag!, accountId: monitor.accountId };
    },

    attemptDetail: (id) =>
      db.deliveryAttempt.findFirstOrThrow({
        where: { id },
        select: { requestHeaders: true, requestBody: true, responseHeaders: true, responseBody: true },
      }),

    async attemptDetails(ids) {
      const rows = await db.deliveryAttempt.findMany({
        where: { id: { in: ids } },
        select: { id: true, requestHeaders: true, requestBody: true, responseHeaders: true, responseBody: true },
      });
      return new Map(rows.map(({ id, ...detail }) => [id, detail]));
    },

    async ownerOfAttempt(id) {
      const a = await db.deliveryAttempt.findFirst({
        where: { id },
        select: { monitor: { select: { accountId: true } } },
      });
      return a?.monitor.accountId ?? null;
    },

    async recoverableDeliveries(monitorId, { since, until, outcomes }, max, pendingAfter) {
      // outcomes compared as text: an outcome the enum does not have (yet) matches nothing
      const wanted = [...outcomes];
      const rows = await db.$queryRaw<{ id: string; delivery_id: string; total: number }[]>`
        WITH latest AS (
          SELECT DISTINCT ON (a.delivery_id) a.id, a.delivery_id, a.outcome, a.hit_id, a.event, a.created_at
          FROM delivery_attempts a
          WHERE a.monitor_id = ${monitorId}::uuid AND a.event <> 'monitor.test'
            AND a.delivery_id IN (SELECT f.delivery_id FROM delivery_attempts f
                                  WHERE f.monitor_id = ${monitorId}::uuid AND f.outcome::text = ANY(${wanted}::text[])
                                    AND f.created_at >= ${since}
                                    AND (${until}::timestamptz IS NULL OR f.created_at <= ${until}::timestamptz))
          ORDER BY a.delivery_id, a.created_at DESC, a.id DESC)
        SELECT id, delivery_id, (count(*) OVER ())::int AS total FROM latest
        WHERE outcome::text = ANY(${wanted}::text[]) AND hit_id IS NOT NULL
          AND CASE WHEN event = 'monitor.hit' THEN EXISTS (SELECT 1 FROM hits h WHERE h.id = latest.hit_id)
                   ELSE EXISTS (SELECT 1 FROM monitor_events e WHERE e.id = latest.hit_id) END
          AND NOT EXISTS (SELECT 1 FROM pending_redeliveries p
                          WHERE p.delivery_id = latest.delivery_id AND p.queued_at > ${pendingAfter})
        ORDER BY created_at, id
        LIMIT ${max}`;
      return { attempts: rows.map((r) => ({ id: r.id, deliveryId: r.delivery_id })), total: rows[0]?.total ?? 0 };
    },

    async claimRedeliveries(accountId, monitorId, deliveryIds, now, pendingAfter) {
      if (deliveryIds.length === 0) return [];
      const rows = await db.$queryRaw<{ delivery_id: string }[]>`
        INSERT INTO pending_redeliveries (delivery_id, account_id, monitor_id, queued_at)
        SELECT d, ${accountId}::uuid, ${monitorId}::uuid, ${now} FROM unnest(${deliveryIds}::text[]) AS d
        ON CONFLICT (delivery_id) DO UPDATE SET queued_at = EXCLUDED.queued_at
          WHERE pending_redeliveries.queued_at <= ${pendingAfter}
        RETURNING delivery_id`;
      return rows.map((r) => r.delivery_id);
    },

    async releaseRedeliveries(deliveryIds) {
      if (deliveryIds.length > 0) await db.pendingRedelivery.deleteMany({ where: { deliveryId: { in: deliveryIds } } });
    },

    hits: (monitorId, after, take, since) =>
      db.hit.findMany({
        ...within(newestFirst('detectedAt', monitorId, after, take), 'tweetCreatedAt', since),
        select: hitSelect,
      }),

    hitExists: async (hitId) => (await db.hit.findFirst({ where: { id: hitId }, select: { id: true } })) !== null,

    latestHit: (monitorId) =>
      db.hit.findFirst({
        ...newestFirst('detectedAt', monitorId, undefined, 1),
        select: { ...hitSelect, sequence: true },
      }),
  };
}
