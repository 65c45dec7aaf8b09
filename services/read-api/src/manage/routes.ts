/**
 * The management endpoints: monitors, their webhooks, the delivery log, redelivery and
 * recovery, for `manage` keys. Each calls the same use-case as the dashboard and the CLI
 * (@sts/usecases), so plan limits, the webhook URL rule (SSRF guard), the Free plan's rules and
 * every validation answer the same way, here in the API's envelope (./errors.ts). Bodies are
 * strict (./input.ts); every POST honours Idempotency-Key (./idempotent.ts). A monitor is answered
 * in the record GET /api/v1/monitors uses, read back after the change.
 */
import {
  MonitorEdit,
  MonitorPreviewInput,
  NewMonitor,
  RecoverInput,
  WebhookInput,
  WebhookSettingsInput,
  type MonitorWithSecret,
} from '@sts/api-contract';
import { ApiError, InvalidRequestError, NotFoundError, UnauthorizedError } from '@sts/common';
import type { Retention } from '@sts/core';
import { decodeCursor, encodeCursor, InvalidCursorError } from '@sts/social';
import type { UseCases } from '@sts/usecases';
import { z } from 'zod';
import type { IdempotencyStore } from '../adapters/idempotency';
import type { EventLog } from '../adapters/events';
import type { MonitorRepository } from '../adapters/monitors';
import { isUuid, parseAfter, parseCursor, parseFlag, parseLimit } from '../domain/params';
import { listBody, monitorRecord } from '../domain/records';
import { readJsonBody } from '../http/body';
import { hitsSince } from '../http/handlers';
import type { HandlerResult, RequestContext, Route } from '../http/router';
import { fromUseCaseError } from './errors';
import { fingerprint, idempotent } from './idempotent';
import { parseBody, parseIdempotencyKey } from './input';
import { deliveryRecord, previewRecord, webhookRecord, webhookWithSecret } from './records';

export interface ManageDeps {
  useCases: Pick<UseCases, 'monitors' | 'webhooks' | 'deliveries'>;
  idempotency: IdempotencyStore;
  /** the monitor records, as GET /api/v1/monitors answers them */
  monitors: MonitorRepository;
  /** the monitors' events by sequence (GET …/events) */
  events: EventLog;
  /** how far back each plan sees its hits: the events' window too */
  retention: Retention;
}

type Handler = (ctx: RequestContext) => Promise<HandlerResult>;
type Act = (accountId: string, body: unknown, ctx: RequestContext) => Promise<HandlerResult>;

const NoBody = z.strictObject({});

function requireManage(ctx: RequestContext): string {
  if (ctx.scope !== 'manage')
    throw new ApiError(403, 'INSUFFICIENT_SCOPE', 'this endpoint needs an API key with the manage scope');
  if (!ctx.accountId) throw new UnauthorizedError('missing or invalid x-account-id');
  return ctx.accountId;
}

const data = (status: number, value: unknown): HandlerResult => ({ status, body: { data: value } });

/**
 * One management call: scope, Idempotency-Key (POST), the body (`required` JSON object, `optional`
 * (absent or `{}`), or `none` read), then the act with the use-cases' errors in the API's envelope.
 */
function write(deps: ManageDeps, body: 'required' | 'optional' | 'none', act: Act, urlParam?: string): Handler {
  return async (ctx) => {
    const accountId = requireManage(ctx);
    const method = ctx.req.method ?? 'POST';
    const key = method === 'POST' ? parseIdempotencyKey(ctx.req.headers['idempotency-key']) : undefined;
    const input =
      body === 'none'
        ? {}
        : body === 'optional'
          ? parseBody(NoBody, (await readJsonBody(ctx.req, { optional: true })) ?? {})
          : await readJsonBody(ctx.req, { what: 'a JSON object' });
    const run = async () => {
      try {
        return await act(accountId, input, ctx);
      } catch (err) {
        throw fromUseCaseError(err, urlParam);
      }
    };
    if (key === undefined) return run();
    const call = {
      accountId,
      key,
      requestId: ctx.requestId,
      fingerprint: fingerprint(method, ctx.req.url ?? '', input),
    };
    try {
      return await idempotent(deps.idempotency, call, run);
    } catch (err) {
      // run() mapped its own errors already; this maps the store's (no SECRETS_ENCRYPTION_KEY: 503)
      throw fromUseCaseError(err, urlParam);
    }
  };
}

/** the filters of a body as the use-cases take them (undefined: leave as they are) */
function filterInput(f: { exclude?: string[] | undefined; lang?: string[] | undefined } | undefined) {
  return {
    ...(f?.exclude !== undefined ? { exclude: f.exclude } : {}),
    ...(f?.lang !== undefined ? { lang: f.lang } : {}),
  };
}

/** the monitor record GET /api/v1/monitors answers, read after the change; 404 when gone */
async function monitorOf(deps: ManageDeps, accountId: string, monitorId: string) {
  const row = await deps.monitors.findMonitor(accountId, monitorId);
  if (!row) throw new NotFoundError('NOT_FOUND', 'monitor not found');
  return monitorRecord(row);
}

function monitorRoutes(deps: ManageDeps): Route[] {
  const uc = deps.useCases;

  const createMonitor: Act = async (accountId, raw) => {
    const b = parseBody(NewMonitor, raw);
    const { monitor, secret } = await uc.monitors.create(accountId, {
      target: b.target_username,
      query: b.query,
      ...(b.keywords !== undefined ? { keywords: b.keywords } : {}),
      ...filterInput(b.filters),
      ...(b.events !== undefined ? { events: b.events } : {}),
      ...(b.check_interval_sec !== undefined ? { intervalSec: b.check_interval_sec } : {}),
      ...(b.webhook_url !== undefined ? { webhookUrl: b.webhook_url } : {}),
      webhookSettings: { retryPolicy: b.retry_policy, ordering: b.ordering },
    });
    const record: MonitorWithSecret = { ...(await monitorOf(deps, accountId, monitor.id)), webhook_secret: secret };
    return data(201, record);
  };

  const editMonitor: Act = async (accountId, raw, ctx) => {
    const b = parseBody(MonitorEdit, raw);
    const m = await uc.monitors.update(accountId, ctx.params.id!, {
      ...(b.target_username !== undefined ? { target: b.target_username } : {}),
      ...(b.query !== undefined ? { query: b.query } : {}),
      ...(b.keywords !== undefined ? { keywords: b.keywords } : {}),
      ...filterInput(b.filters),
      ...(b.events !== undefined ? { events: b.events } : {}),
      ...(b.check_interval_sec !== undefined ? { intervalSec: b.check_interval_sec } : {}),
    });
    return data(200, await monitorOf(deps, accountId, m.id));
  };

  const preview: Act = async (accountId, raw) => {
    const b = parseBody(MonitorPreviewInput, raw);
    const p = await uc.monitors.preview(accountId, {
      target: b.target_username,
      query: b.query,
      ...(b.keywords !== undefined ? { keywords: b.keywords } : {}),
      ...filterInput(b.filters),
    });
    return data(200, previewRecord(p));
  };

  const setStatus =
    (active: boolean): Act =>
    async (accountId, _raw, ctx) => {
      const id = ctx.params.id!;
      const m = active ? await uc.monitors.resume(accountId, id) : await uc.monitors.pause(accountId, id);
      return data(200, await monitorOf(deps, accountId, m.id));
    };

  return [
    { pattern: '/api/v1/monitors', handlers: { POST: write(deps, 'required', createMonitor) } },
    { pattern: '/api/v1/monitors/preview', handlers: { POST: write(deps, 'required', preview) } },
    {
      pattern: '/api/v1/monitors/:id',
      handlers: {
        GET: async (ctx) => {
          if (!ctx.accountId) throw new UnauthorizedError('missing or invalid x-account-id');
          return data(200, await monitorOf(deps, ctx.accountId, ctx.params.id!.toLowerCase()));
        },
        PATCH: write(deps, 'required', editMonitor),
        DELETE: write(deps, 'none', async (accountId, _raw, ctx) => {
          await uc.monitors.remove(accountId, ctx.params.id!);
          return data(200, { id: ctx.params.id!.toLowerCase(), deleted: true });
        }),
      },
    },
    { pattern: '/api/v1/monitors/:id/pause', handlers: { POST: write(deps, 'optional', setStatus(false)) } },
    { pattern: '/api/v1/monitors/:id/resume', handlers: { POST: write(deps, 'optional', setStatus(true)) } },
  ];
}

function webhookRoutes(deps: ManageDeps): Route[] {
  const uc = deps.useCases;
  const monitorId = (ctx: RequestContext) => ctx.params.id!.toLowerCase();
  const setWebhook: Act = async (accountId, raw, ctx) => {
    const b = parseBody(WebhookInput, raw);
    const settings = { retryPolicy: b.retry_policy, ordering: b.ordering };
    return data(
      200,
      webhookWithSecret(monitorId(ctx), await uc.webhooks.set(accountId, ctx.params.id!, b.url, settings)),
    );
  };
  const configureWebhook: Act = async (accountId, raw, ctx) => {
    const b = parseBody(WebhookSettingsInput, raw);
    const settings = { retryPolicy: b.retry_policy, ordering: b.ordering };
    return data(200, webhookRecord(monitorId(ctx), await uc.webhooks.configure(accountId, ctx.params.id!, settings)));
  };
  return [
    {
      pattern: '/api/v1/monitors/:id/webhook',
      handlers: {
        GET: write(deps, 'none', async (accountId, _raw, ctx) =>
          data(200, webhookRecord(monitorId(ctx), await uc.webhooks.get(accountId, ctx.params.id!))),
        ),
        PUT: write(deps, 'required', setWebhook, 'url'),
        PATCH: write(deps, 'required', configureWebhook),
        DELETE: write(deps, 'none', async (accountId, _raw, ctx) => {
          await uc.webhooks.remove(accountId, ctx.params.id!);
          return data(200, { id: monitorId(ctx), deleted: true });
        }),
      },
    },
    {
      pattern: '/api/v1/monitors/:id/webhook/test',
      handlers: {
        POST: write(deps, 'optional', async (accountId, _raw, ctx) => {
          const q = await uc.webhooks.sendTest(accountId, ctx.params.id!);
          return data(202, { delivery_id: q.deliveryId, monitor_id: monitorId(ctx) });
        }),
      },
    },
    {
      pattern: '/api/v1/monitors/:id/webhook/enable',
      handlers: {
        POST: write(deps, 'optional', async (accountId, _raw, ctx) => {
          const enabled = await uc.webhooks.enable(accountId, ctx.params.id!);
          return data(200, webhookRecord(monitorId(ctx), enabled));
        }),
      },
    },
    {
      pattern: '/api/v1/monitors/:id/webhook/rotate',
      handlers: {
        POST: write(deps, 'optional', async (accountId, _raw, ctx) => {
          const now = parseFlag(ctx.query, 'now');
          const rotated = await uc.webhooks.rotate(accountId, ctx.params.id!, { now });
          return data(200, webhookWithSecret(monitorId(ctx), rotated));
        }),
      },
    },
  ];
}

function deliveryRoutes(deps: ManageDeps): Route[] {
  const uc = deps.useCases;
  const listDeliveries = async (ctx: RequestContext): Promise<HandlerResult> => {
    const limit = parseLimit(ctx.query);
    const cursor = parseCursor(ctx.query);
    const accountId = requireManage(ctx);
    try {
      const page = await uc.deliveries.listDetailed(accountId, ctx.params.id!, {
        limit,
        ...(cursor !== undefined ? { cursor } : {}),
      });
      return { status: 200, body: listBody(page.items.map(deliveryRecord), page.nextCursor) };
    } catch (err) {
      throw fromUseCaseError(err);
    }
  };
  return [
    { pattern: '/api/v1/monitors/:id/deliveries', handlers: { GET: listDeliveries } },
    {
      pattern: '/api/v1/monitors/:id/recover',
      handlers: {
        POST: write(deps, 'required', async (accountId, raw, ctx) => {
          const b = parseBody(RecoverInput, raw);
          const r = await uc.deliveries.recover(accountId, ctx.params.id!, {
            since: new Date(b.since),
            until: b.until === undefined ? undefined : new Date(b.until),
            outcomes: b.outcomes,
          });
          const record = {
            queued: r.queued,
            remaining: r.remaining,
            delivery_ids: r.deliveryIds,
            retry_after: r.retryAfterSec,
          };
          // what the budget left out: when to call again
          const headers = r.retryAfterSec === null ? undefined : { 'Retry-After': String(r.retryAfterSec) };
          return { ...data(202, record), ...(headers && { headers }) };
        }),
      },
    },
    {
      pattern: '/api/v1/deliveries/:id/redeliver',
      handlers: {
        POST: write(deps, 'optional', async (accountId, _raw, ctx) => {
          const q = await uc.deliveries.redeliver(accountId, ctx.params.id!);
          return data(202, { delivery_id: q.deliveryId, monitor_id: q.monitorId, attempt_id: q.attemptId });
        }),
      },
    },
  ];
}

const EVENT_CURSOR = 'ev';

/** where a page of events starts: `after`, or the sequence a cursor of a previous page names */
function eventsAfter(ctx: RequestContext): number {
  const cursor = parseCursor(ctx.query);
  if (cursor === undefined) return parseAfter(ctx.query);
  if (ctx.query.has('after'))
    throw new InvalidRequestError('give after or cursor, not both (a cursor continues its listing)', 'cursor');
  const [after] = decodeCursor(cursor, EVENT_CURSOR, 1);
  try {
    return parseAfter(new Map([['after', [after!]]]));
  } catch {
    throw new InvalidCursorError('cursor is not valid');
  }
}

/** GET …/events: the monitor's events after a sequence, oldest first, within the plan's hit retention */
function eventRoutes(deps: ManageDeps): Route[] {
  const listEvents = async (ctx: RequestContext): Promise<HandlerResult> => {
    const limit = parseLimit(ctx.query);
    const after = eventsAfter(ctx);
    const accountId = requireManage(ctx);
    const id = ctx.params.id!.toLowerCase();
    const since = hitsSince(deps.retention, ctx.plan);
    const page = isUuid(id) ? await deps.events.list(accountId, id, { after, limit, since }) : null;
    if (!page) throw new NotFoundError('NOT_FOUND', 'monitor not found');
    const last = page.items[page.items.length - 1];
    const next = page.more && last && 'sequence' in last ? encodeCursor(EVENT_CURSOR, [String(last.sequence)]) : null;
    return { status: 200, body: listBody(page.items, next) };
  };
  return [{ pattern: '/api/v1/monitors/:id/events', handlers: { GET: listEvents } }];
}

export function manageRoutes(deps: ManageDeps): Route[] {
  return [...monitorRoutes(deps), ...webhookRoutes(deps), ...deliveryRoutes(deps), ...eventRoutes(deps)];
}
