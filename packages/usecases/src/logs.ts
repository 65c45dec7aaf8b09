/**
 * A monitor's delivery log and hit history: newest first, paged with opaque cursors over
 * (created_at / detected_at, id), both served by (monitor_id, time desc) indexes. Redeliver
 * publishes webhook.redeliver for one logged attempt; the dispatcher sends it again with the same
 * X-Service-Delivery and a fresh signature.
 */
import { decodeCursor, encodeCursor, olderThan, pageLimit } from './cursor';
import { idOrNotFound, type Ctx } from './context';
import { ConflictError, NotFoundError, ValidationError } from './errors';
import type { DeliveryDetail, DeliveryView, HeaderPair, HitView, Page, PageRequest, Queued } from './types';
import { maskWebhookUrl } from './webhookUrl';

const deliverySelect = {
  id: true,
  event: true,
  deliveryId: true,
  hitId: true,
  outcome: true,
  statusCode: true,
  latencyMs: true,
  error: true,
  url: true,
  responseSnippet: true,
  createdAt: true,
} as const;

export function postUrl(username: string, tweetId: string): string {
  return `https://x.com/${encodeURIComponent(username)}/status/${encodeURIComponent(tweetId)}`;
}

export interface DeliveryUseCases {
  list(accountId: string, monitorId: string, page?: PageRequest): Promise<Page<DeliveryView>>;
  /** one attempt (attempt ids are what list() returns as `id`) */
  get(accountId: string, attemptId: string): Promise<DeliveryView & { monitorId: string }>;
  /** one attempt with the request as sent and the response (attempt detail) */
  detail(accountId: string, attemptId: string): Promise<DeliveryDetail>;
  /** publishes webhook.redeliver; ConflictError('hit_gone') when the attempt's hit was deleted */
  redeliver(accountId: string, attemptId: string): Promise<Queued & { attemptId: string; monitorId: string }>;
  /**
   * "Redeliver every failed delivery since T": each hit delivery of the monitor with a failed
   * attempt at or after `since` whose latest attempt is still a failure, oldest first, at most
   * RECOVER_MAX per call (`remaining` says how many more wait; call again). Each goes out as a
   * webhook.redeliver of its latest attempt: same X-Service-Delivery, paced by the dispatcher's
   * lanes like any redelivery.
   */
  recover(
    accountId: string,
    monitorId: string,
    since: Date,
  ): Promise<{ queued: number; remaining: number; deliveryIds: string[] }>;
}

export const RECOVER_MAX = 1000;

/** the stored [name, value] pairs (jsonb), keeping only well-formed ones */
function headerPairs(json: unknown): HeaderPair[] {
  if (!Array.isArray(json)) return [];
  return json.filter(
    (p): p is HeaderPair => Array.isArray(p) && p.length === 2 && typeof p[0] === 'string' && typeof p[1] === 'string',
  );
}

export interface HitUseCases {
  list(accountId: string, monitorId: string, page?: PageRequest): Promise<Page<HitView>>;
}

export interface LogAdminUseCases {
  /** the account that owns a delivery attempt (the CLI addresses attempts by id alone) */
  ownerOfDelivery(attemptId: string): Promise<string>;
}

/** The latest attempt of each hit delivery that failed since T, when that latest one is still a failure. */
async function recoverFailed(ctx: Ctx, accountId: string, monitorId: string, since: Date) {
  const rows = await ctx.db.$queryRaw<{ id: string; delivery_id: string; total: number }[]>`
    WITH latest AS (
      SELECT DISTINCT ON (a.delivery_id) a.id, a.delivery_id, a.outcome, a.hit_id, a.created_at
      FROM delivery_attempts a
      WHERE a.monitor_id = ${monitorId}::uuid AND a.event = 'monitor.hit'
        AND a.delivery_id IN (SELECT f.delivery_id FROM delivery_attempts f
                              WHERE f.monitor_id = ${monitorId}::uuid AND f.outcome = 'failed' AND f.created_at >= ${since})
      ORDER BY a.delivery_id, a.created_at DESC, a.id DESC)
    SELECT id, delivery_id, (count(*) OVER ())::int AS total FROM latest
    WHERE outcome = 'failed' AND hit_id IS NOT NULL
    ORDER BY created_at, id
    LIMIT ${RECOVER_MAX}`;
  // one click (or one CLI run) is one outbound action, however many it queues (at most RECOVER_MAX)
  if (rows.length > 0) await ctx.outboundAllowed(accountId, 'recoveries');
  for (const r of rows) await ctx.publish('webhook.redeliver', { attemptId: r.id }, { accountId }, { limited: false });
  const total = rows[0]?.total ?? 0;
  return { queued: rows.length, remaining: total - rows.length, deliveryIds: rows.map((r) => r.delivery_id) };
}

export function logUseCases(ctx: Ctx): { deliveries: DeliveryUseCases; hits: HitUseCases; admin: LogAdminUseCases } {
  const { db } = ctx;
  const noAttempt = (id: string) => new NotFoundError('delivery', `no delivery attempt with id ${id}`);

  async function ownMonitor(accountId: string, monitorId: string): Promise<string> {
    const message = `no monitor with id ${monitorId}`;
    const id = idOrNotFound(monitorId, 'monitor', message);
    const m = await db.monitor.findFirst({
      where: { id, accountId: idOrNotFound(accountId, 'monitor', message) },
      select: { id: true },
    });
    if (!m) throw new NotFoundError('monitor', message);
    return m.id;
  }

  async function loadAttempt(accountId: string, attemptId: string) {
    const id = idOrNotFound(attemptId, 'delivery', `no delivery attempt with id ${attemptId}`);
    const owner = idOrNotFound(accountId, 'delivery', `no delivery attempt with id ${attemptId}`);
    const a = await db.deliveryAttempt.findFirst({
      where: { id, monitor: { accountId: owner } },
      select: { ...deliverySelect, monitorId: true, monitor: { select: { accountId: true } } },
    });
    if (!a) throw noAttempt(attemptId);
    return a;
  }

  const deliveries: DeliveryUseCases = {
    async list(accountId, monitorId, page = {}) {
      const take = pageLimit(page.limit);
      const after = page.cursor ? decodeCursor(page.cursor) : undefined;
      const id = await ownMonitor(accountId, monitorId);
      const rows = await db.deliveryAttempt.findMany({
        where: { monitorId: id, ...(after ? olderThan('createdAt', after) : {}) },
        orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
        take: take + 1,
        select: deliverySelect,
      });
      // Discord and Slack URLs carry their token: the log shows them masked
      const items = rows.slice(0, take).map((r) => ({ ...r, url: maskWebhookUrl(r.url) }));
      const last = items.at(-1);
      return { items, nextCursor: rows.length > take && last ? encodeCursor(last.createdAt, last.id) : null };
    },

    async get(accountId, attemptId) {
      const { monitor: _m, ...view } = await loadAttempt(accountId, attemptId);
      return { ...view, url: maskWebhookUrl(view.url) };
    },

    async detail(accountId, attemptId) {
      const { monitor: _m, ...view } = await loadAttempt(accountId, attemptId);
      const d = await db.deliveryAttempt.findUniqueOrThrow({
        where: { id: view.id },
        select: { requestHeaders: true, requestBody: true, responseHeaders: true, responseBody: true },
      });
      const url = maskWebhookUrl(view.url);
      return {
        ...view,
        url,
        request: d.requestBody === null ? null : { url, headers: headerPairs(d.requestHeaders), body: d.requestBody },
        response:
          view.statusCode === null || d.responseHeaders === null
            ? null
            : {
                status: view.statusCode,
                headers: headerPairs(d.responseHeaders),
                body: Buffer.from(d.responseBody ?? new Uint8Array()),
              },
      };
    },

    async redeliver(accountId, attemptId) {
      const a = await loadAttempt(accountId, attemptId);
      if (a.event === 'monitor.hit' && !a.hitId) {
        throw new ConflictError('hit_gone', `the hit of attempt ${a.id} no longer exists; nothing to redeliver`);
      }
      const messageId = await ctx.publish('webhook.redeliver', { attemptId: a.id }, { accountId: a.monitor.accountId });
      return { messageId, deliveryId: a.deliveryId, attemptId: a.id, monitorId: a.monitorId };
    },

    async recover(accountId, monitorId, since) {
      if (!(since instanceof Date) || Number.isNaN(since.getTime())) {
        throw new ValidationError('failedSince', 'must be an ISO 8601 time such as 2026-11-24T10:00:00Z');
      }
      if (since.getTime() > ctx.now().getTime()) throw new ValidationError('failedSince', 'is in the future');
      return recoverFailed(ctx, accountId, await ownMonitor(accountId, monitorId), since);
    },
  };

  const hits: HitUseCases = {
    async list(accountId, monitorId, page = {}) {
      const take = pageLimit(page.limit);
      const after = page.cursor ? decodeCursor(page.cursor) : undefined;
      const id = await ownMonitor(accountId, monitorId);
      const rows = await db.hit.findMany({
        where: { monitorId: id, ...(after ? olderThan('detectedAt', after) : {}) },
        orderBy: [{ detectedAt: 'desc' }, { id: 'desc' }],
        take: take + 1,
      });
      const items: HitView[] = rows.slice(0, take).map((h) => ({
        id: h.id,
        tweetId: h.tweetId,
        text: h.tweetText,
        authorUsername: h.tweetAuthorUsername,
        tweetCreatedAt: h.tweetCreatedAt,
        detectedAt: h.detectedAt,
        postUrl: postUrl(h.tweetAuthorUsername, h.tweetId),
      }));
      const last = items.at(-1);
      return { items, nextCursor: rows.length > take && last ? encodeCursor(last.detectedAt, last.id) : null };
    },
  };

  const admin: LogAdminUseCases = {
    async ownerOfDelivery(attemptId) {
      const id = idOrNotFound(attemptId, 'delivery', `no delivery attempt with id ${attemptId}`);
      const a = await db.deliveryAttempt.findUnique({
        where: { id },
        select: { monitor: { select: { accountId: true } } },
      });
      if (!a) throw noAttempt(attemptId);
      return a.monitor.accountId;
    },
  };

  return { deliveries, hits, admin };
}
