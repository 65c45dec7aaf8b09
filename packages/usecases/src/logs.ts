/**
 * A monitor's delivery log and hit history: newest first, paged with opaque cursors over
 * (created_at / detected_at, id), both served by (monitor_id, time desc) indexes. Redeliver
 * publishes webhook.redeliver for one logged attempt; the dispatcher sends it again with the same
 * X-Service-Delivery and a fresh signature.
 */
import { readPage } from './cursor';
import { DEFAULT_PLAN_RETENTION, retentionSince } from '@sts/core';
import { idOrNotFound, loadAccount, planOf, type Ctx } from './context';
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
  /** list() with each attempt's detail (the request as sent and the response), read in one query */
  listDetailed(accountId: string, monitorId: string, page?: PageRequest): Promise<Page<DeliveryDetail>>;
  /** one attempt with the request as sent and the response (attempt detail) */
  detail(accountId: string, attemptId: string): Promise<DeliveryDetail>;
  /** publishes webhook.redeliver; ConflictError('hit_gone') when the attempt's hit was deleted */
  redeliver(accountId: string, attemptId: string): Promise<Queued & { attemptId: string; monitorId: string }>;
  /**
   * "Redeliver what failed, was skipped or exhausted its retries between T and U": each event
   * delivery of the monitor (not test pings) with an attempt of one of `outcomes` in the window
   * whose latest attempt still has one of them and has no redelivery pending, oldest first, at
   * most RECOVER_MAX per call and what the account's redelivery budget grants (`remaining` says
   * how many more wait; `retryAfterSec` when the budget stopped it: call again then). Each goes
   * out as a webhook.redeliver of its latest attempt: same X-Service-Delivery, paced by the
   * dispatcher's lanes like any redelivery, sharing a host's lane fairly with other accounts.
   */
  recover(accountId: string, monitorId: string, window: RecoverWindow): Promise<Recovered>;
}

export const RECOVER_MAX = 1000;

/** the outcomes Recover takes (`exhausted`: a retry schedule that ran out) */
export const RECOVER_OUTCOMES = ['failed', 'skipped', 'exhausted'] as const;
export type RecoverOutcome = (typeof RECOVER_OUTCOMES)[number];

export interface RecoverWindow {
  since: Date;
  /** default: now */
  until?: Date | undefined;
  /** default: all three */
  outcomes?: readonly RecoverOutcome[] | undefined;
}

export interface Recovered {
  queued: number;
  /** matching deliveries not queued by this call (the per-call maximum or the budget) */
  remaining: number;
  deliveryIds: string[];
  /** the budget left some out: seconds until it grants more (null when it did not) */
  retryAfterSec: number | null;
}

const TIME_HINT = 'must be an ISO 8601 time such as 2026-11-24T10:00:00Z';

/** the window checked: times valid and not in the future, until not before since, known outcomes */
function checkWindow(w: RecoverWindow, now: Date): { since: Date; until: Date | null; outcomes: RecoverOutcome[] } {
  const valid = (d: unknown): d is Date => d instanceof Date && !Number.isNaN(d.getTime());
  if (!valid(w.since)) throw new ValidationError('since', TIME_HINT);
  if (w.since.getTime() > now.getTime()) throw new ValidationError('since', 'is in the future');
  if (w.until !== undefined && !valid(w.until)) throw new ValidationError('until', TIME_HINT);
  if (w.until !== undefined && w.until.getTime() < w.since.getTime()) {
    throw new ValidationError('until', 'is before since');
  }
  const outcomes = [...new Set(w.outcomes ?? RECOVER_OUTCOMES)];
  const unknown = outcomes.find((o) => !(RECOVER_OUTCOMES as readonly string[]).includes(o));
  if (outcomes.length === 0 || unknown !== undefined) {
    throw new ValidationError('outcomes', `must be one or more of ${RECOVER_OUTCOMES.join(', ')}`);
  }
  return { since: w.since, until: w.until ?? null, outcomes };
}

/** how far before the delivery log's retention a Recover's `since` may reach (a client's "N days ago" computed a moment early) */
const RECOVER_SINCE_SLACK_MS = 86_400_000;

/**
 * `since` within the delivery log's retention (with a day's slack): nothing older is kept, and a
 * time before it is a mistake worth telling (PostgreSQL cannot even store year 0).
 */
function checkSince(since: Date, logSince: Date, days: number): void {
  const floor = new Date(logSince.getTime() - RECOVER_SINCE_SLACK_MS);
  if (since.getTime() < floor.getTime()) {
    throw new ValidationError(
      'since',
      `is before the delivery log's retention (${days} days on this plan): give ${floor.toISOString()} or later`,
    );
  }
}

/** the stored [name, value] pairs (jsonb), keeping only well-formed ones */
function headerPairs(json: unknown): HeaderPair[] {
  if (!Array.isArray(json)) return [];
  return json.filter(
    (p): p is HeaderPair => Array.isArray(p) && p.length === 2 && typeof p[0] === 'string' && typeof p[1] === 'string',
  );
}

type AttemptDetailRecord = Awaited<ReturnType<Ctx['repos']['logs']['attemptDetail']>>;

/** an attempt view (its URL already masked) with the request as sent and the response */
function withDetail<V extends DeliveryView>(view: V, d: AttemptDetailRecord): V & Omit<DeliveryDetail, 'monitorId'> {
  const { url } = view;
  return {
    ...view,
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
 * The latest attempt of each delivery with an attempt of the outcomes in the window, when that
 * latest one still has one of them and no redelivery of it is pending; at most what the account's
 * redelivery budget grants. Each is marked pending before it is published, so a second click, or
 * a concurrent one, queues none of them again until the dispatcher has recorded its attempt.
 */
async function recoverWindow(
  ctx: Ctx,
  accountId: string,
  monitorId: string,
  window: ReturnType<typeof checkWindow>,
): Promise<Recovered> {
  const now = ctx.now();
  const pendingAfter = new Date(now.getTime() - PENDING_REDELIVERY_MAX_AGE_MS);
  const { attempts, total } = await ctx.repos.logs.recoverableDeliveries(monitorId, window, RECOVER_MAX, pendingAfter);
  if (attempts.length === 0) return { queued: 0, remaining: 0, deliveryIds: [], retryAfterSec: null };
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
    retryAfterSec: granted < attempts.length ? retryAfterSec : null,
  };
}

function toHitView({ monitorId: _m, tweetText: text, tweetAuthorUsername: authorUsername, ...h }: HitRow): HitView {
  return { ...h, text, authorUsername, postUrl: postUrl(authorUsername, h.tweetId) };
}

export function logUseCases(ctx: Ctx): { deliveries: DeliveryUseCases; hits: HitUseCases; admin: LogAdminUseCases } {
  const repo = ctx.repos.logs;
  const retention = ctx.opts.retention ?? DEFAULT_PLAN_RETENTION;

  /** the oldest hit (by the post's time) and attempt the account's plan shows */
  async function windowOf(accountId: string): Promise<{ hits: Date; attempts: Date }> {
    const r = retention[planOf(ctx, await loadAccount(ctx, accountId))];
    const now = ctx.now();
    return { hits: retentionSince(r.hitsDays, now), attempts: retentionSince(r.deliveryLogDays, now) };
  }
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
        async (after, take) => {
          const id = await ownMonitor(ctx, accountId, monitorId);
          return repo.attempts(id, after, take, (await windowOf(accountId)).attempts);
        },
        // Discord and Slack URLs carry their token: the log shows them masked
        (r) => ({ ...r, url: maskWebhookUrl(r.url) }),
        (r) => r.createdAt,
      ),

    async listDetailed(accountId, monitorId, page = {}) {
      const id = await ownMonitor(ctx, accountId, monitorId);
      const window = (await windowOf(accountId)).attempts;
      const listed = await readPage(
        page,
        (after, take) => repo.attempts(id, after, take, window),
        (r) => ({ ...r, url: maskWebhookUrl(r.url) }),
        (r) => r.createdAt,
      );
      const details = await repo.attemptDetails(listed.items.map((a) => a.id));
      const items = listed.items.map((view) => {
        const d = details.get(view.id);
        return {
          ...withDetail(
            view,
            d ?? { requestHeaders: null, requestBody: null, responseHeaders: null, responseBody: null },
          ),
          monitorId: id,
        };
      });
      return { items, nextCursor: listed.nextCursor };
    },

    async get(accountId, attemptId) {
      const { accountId: _owner, ...view } = await loadAttempt(accountId, attemptId);
      return { ...view, url: maskWebhookUrl(view.url) };
    },

    async detail(accountId, attemptId) {
      const { accountId: _owner, ...view } = await loadAttempt(accountId, attemptId);
      const d = await repo.attemptDetail(view.id);
      return withDetail({ ...view, url: maskWebhookUrl(view.url) }, d);
    },

    async redeliver(accountId, attemptId) {
      const a = await loadAttempt(accountId, attemptId);
      if (a.event === 'monitor.hit' && (!a.hitId || !(await repo.hitExists(a.hitId)))) {
        throw new ConflictError('hit_gone', `the hit of attempt ${a.id} no longer exists; nothing to redeliver`);
      }
      const messageId = await ctx.publish('webhook.redeliver', { attemptId: a.id }, { accountId: a.accountId });
      return { messageId, deliveryId: a.deliveryId, attemptId: a.id, monitorId: a.monitorId };
    },

    async recover(accountId, monitorId, window) {
      const checked = checkWindow(window, ctx.now());
      const days = retention[planOf(ctx, await loadAccount(ctx, accountId))].deliveryLogDays;
      checkSince(checked.since, (await windowOf(accountId)).attempts, days);
      return recoverWindow(ctx, accountId, await ownMonitor(ctx, accountId, monitorId), checked);
    },
  };

  const hits: HitUseCases = {
    list: (accountId, monitorId, page = {}) =>
      readPage(
        page,
        async (after, take) => {
          const id = await ownMonitor(ctx, accountId, monitorId);
          return repo.hits(id, after, take, (await windowOf(accountId)).hits);
        },
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
