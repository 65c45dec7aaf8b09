/**
 * A monitor's delivery log and hit history: newest first, paged with opaque cursors over
 * (created_at / detected_at, id), both served by (monitor_id, time desc) indexes. Redeliver
 * publishes webhook.redeliver for one logged attempt; the dispatcher sends it again with the same
 * X-Service-Delivery and a fresh signature.
 */
import { readPage } from './cursor';
import { idOrNotFound, type Ctx } from './context';
import { ConflictError, NotFoundError, RateLimitedError, ValidationError } from './errors';
import { ownMonitor } from './monitors';
import type { HitRow } from '@sts/db';
import type { DeliveryDetail, DeliveryView, HeaderPair, HitView, Page, PageRequest, Queued } from './types';
import { maskWebhookUrl } from './webhookUrl';

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
   * attempt at or after `since` whose latest attempt is still a failure and has no redelivery
   * pending, oldest first, at most RECOVER_MAX per call and what the account's redelivery budget
   * grants (`remaining` says how many more wait; call again). Each goes out as a
   * webhook.redeliver of its latest attempt: same X-Service-Delivery, paced by the dispatcher's
   * lanes like any redelivery, sharing a host's lane fairly with other accounts.
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

/** a pending redelivery older than this counts as lost: Recover may queue the delivery again */
const PENDING_REDELIVERY_MAX_AGE_MS = 3_600_000;

/**
 * The latest attempt of each hit delivery that failed since T, when that latest one is still a
 * failure and no redelivery of it is pending; at most what the account's redelivery budget
 * grants. Each is marked pending before it is published, so a second click, or a concurrent one,
 * queues none of them again until the dispatcher has recorded its attempt.
 */
async function recoverFailed(ctx: Ctx, accountId: string, monitorId: string, since: Date) {
  const now = ctx.now();
  const pendingAfter = new Date(now.getTime() - PENDING_REDELIVERY_MAX_AGE_MS);
  const { attempts, total } = await ctx.repos.logs.failedDeliveries(monitorId, since, RECOVER_MAX, pendingAfter);
  if (attempts.length === 0) return { queued: 0, remaining: 0, deliveryIds: [] };
  // one click (or one CLI run) is one outbound action, however many it queues (at most RECOVER_MAX)
  await ctx.outboundAllowed(accountId, 'recoveries');
  const budget = ctx.opts.redeliveryBudget;
  const { granted, retryAfterSec } = budget
    ? await budget(accountId, attempts.length)
    : { granted: attempts.length, retryAfterSec: 0 };
  if (granted <= 0) {
    throw new RateLimitedError(
      `this account's redeliveries for the hour are used up; try again in ${retryAfterSec} s`,
      retryAfterSec,
    );
  }
  const wanted = attempts.slice(0, granted);
  const claimed = new Set(
    await ctx.repos.logs.claimRedeliveries(
      accountId,
      monitorId,
      wanted.map((a) => a.deliveryId),
      now,
      pendingAfter,
    ),
  );
  const queued = wanted.filter((a) => claimed.has(a.deliveryId));
  for (const [i, a] of queued.entries()) {
    try {
      await ctx.publish('webhook.redeliver', { attemptId: a.id }, { accountId }, { limited: false });
    } catch (err) {
      // not queued: their marks go, so the next Recover can queue them
      await ctx.repos.logs.releaseRedeliveries(queued.slice(i).map((q) => q.deliveryId)).catch(() => undefined);
      throw err;
    }
  }
  return {
    queued: queued.length,
    remaining: total - queued.length,
    deliveryIds: queued.map((a) => a.deliveryId),
  };
}

function toHitView({ monitorId: _m, tweetText: text, tweetAuthorUsername: authorUsername, ...h }: HitRow): HitView {
  return { ...h, text, authorUsername, postUrl: postUrl(authorUsername, h.tweetId) };
}

export function logUseCases(ctx: Ctx): { deliveries: DeliveryUseCases; hits: HitUseCases; admin: LogAdminUseCases } {
  const repo = ctx.repos.logs;
  const noAttempt = (id: string) => new NotFoundError('delivery', `no delivery attempt with id ${id}`);

  /** the account's attempt (with its monitor id and owner), or NotFound */
  async function loadAttempt(accountId: string, attemptId: string) {
    const id = idOrNotFound(attemptId, 'delivery', `no delivery attempt with id ${attemptId}`);
    const owner = idOrNotFound(accountId, 'delivery', `no delivery attempt with id ${attemptId}`);
    const a = await repo.findAttempt(owner, id);
    if (!a) throw noAttempt(attemptId);
    return a;
  }

  const deliveries: DeliveryUseCases = {
    list: (accountId, monitorId, page = {}) =>
      readPage(
        page,
        async (after, take) => repo.attempts(await ownMonitor(ctx, accountId, monitorId), after, take),
        // Discord and Slack URLs carry their token: the log shows them masked
        (r) => ({ ...r, url: maskWebhookUrl(r.url) }),
        (r) => r.createdAt,
      ),

    async get(accountId, attemptId) {
      const { accountId: _owner, ...view } = await loadAttempt(accountId, attemptId);
      return { ...view, url: maskWebhookUrl(view.url) };
    },

    async detail(accountId, attemptId) {
      const { accountId: _owner, ...view } = await loadAttempt(accountId, attemptId);
      const d = await repo.attemptDetail(view.id);
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
      const messageId = await ctx.publish('webhook.redeliver', { attemptId: a.id }, { accountId: a.accountId });
      return { messageId, deliveryId: a.deliveryId, attemptId: a.id, monitorId: a.monitorId };
    },

    async recover(accountId, monitorId, since) {
      if (!(since instanceof Date) || Number.isNaN(since.getTime())) {
        throw new ValidationError('failedSince', 'must be an ISO 8601 time such as 2026-11-24T10:00:00Z');
      }
      if (since.getTime() > ctx.now().getTime()) throw new ValidationError('failedSince', 'is in the future');
      return recoverFailed(ctx, accountId, await ownMonitor(ctx, accountId, monitorId), since);
    },
  };

  const hits: HitUseCases = {
    list: (accountId, monitorId, page = {}) =>
      readPage(
        page,
        async (after, take) => repo.hits(await ownMonitor(ctx, accountId, monitorId), after, take),
        toHitView,
        (h) => h.detectedAt,
      ),
  };

  const admin: LogAdminUseCases = {
    async ownerOfDelivery(attemptId) {
      const id = idOrNotFound(attemptId, 'delivery', `no delivery attempt with id ${attemptId}`);
      const owner = await repo.ownerOfAttempt(id);
      if (owner === null) throw noAttempt(attemptId);
      return owner;
    },
  };

  return { deliveries, hits, admin };
}
