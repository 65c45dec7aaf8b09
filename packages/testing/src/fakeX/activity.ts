/**
 * The fake X's X Activity API (XAA), written from X's documentation (docs.x.com, x-api/activity:
 * introduction, quickstart, event payloads; x-api/stream/activity-stream):
 *
 *   POST   /2/activity/subscriptions       `{event_type, filter: {user_id}, tag?, webhook_id?}`; answers
 *                                           `data.subscription` {subscription_id, event_type, filter, tag,
 *                                           created_at, updated_at} and `meta.total_subscriptions`
 *   GET    /2/activity/subscriptions       `data` [subscription], `meta` {total_subscriptions, result_count,
 *                                           next_token}; `max_results` 1..100 (default 100), `pagination_token`
 *   DELETE /2/activity/subscriptions/:id   `data.deleted`, `meta.total_subscriptions`
 *   GET    /2/activity/stream              chunked, one envelope per line ending in \r\n:
 *                                           `{data: {event_uuid, filter: {user_id}, event_type, tag, payload,
 *                                           includes}}`; a bare \r\n keep-alive every `keepAliveMs`; one
 *                                           connection (a second gets 429 TooManyConnections);
 *                                           `backfill_minutes` (0..5) or `start_time` (ISO, at most
 *                                           `replayMinutes` back: older events are gone) replays the events
 *                                           missed, oldest first, with their first `event_uuid`; `end_time`
 *                                           stops the replay there
 *
 * The tier bounds the subscriptions (`maxSubscriptions`, Pro 2,500): one more is refused with a 400
 * problem titled `SubscriptionCapExceeded` (X documents the limit, not its error body: this is the
 * filtered stream's rule-cap problem's shape). An event type the tier is not offered
 * (`refusedTypes`) is refused with 403 `client-forbidden`; an unknown one, a bad user id or tag
 * with 400 `invalid-request` naming the field; the same type and account twice with 409
 * `DuplicateSubscription`. Events come from the state's `'activity'` (posts, deletions, profile
 * changes) and reach the stream when a subscription matches their type and account. `post.create`
 * carries the post object and `includes.users`; `post.delete` {id, author_id} and `includes.users`
 * as `[{data: user}]`; `profile.update.*` {before, after}. Tests steer the connection as the filtered
 * stream's: `disconnect()`, `stall()`, `outage()`.
 */
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { invalidRequest, send, userObject } from './format';
import { readBody, type FakeXContext, type FakeXRoute } from './routes';
import { StreamSlot } from './streamSlot';
import type { FakeXActivity, FakeXState } from './state';

/** The types X lists for XAA subscriptions filtered by user_id (introduction, event payloads). */
export const FAKE_XAA_EVENT_TYPES = [
  'post.create',
  'post.delete',
  'profile.update.bio',
  'profile.update.profile_picture',
  'profile.update.banner_picture',
  'profile.update.screenname',
  'profile.update.handle',
  'profile.update.geo',
  'profile.update.url',
  'profile.update.verified_badge',
  'profile.update.affiliate_badge',
] as const;

export interface FakeActivityOptions {
  /** keep-alive interval; default 20 000 ms (the filtered stream's) */
  keepAliveMs?: number;
  /** the tier's limit: Basic 50, Pro 2,500, Enterprise 20,000 */
  maxSubscriptions?: number;
  /** event types this tier is not offered: their creation is refused (403) */
  refusedTypes?: readonly string[];
  /** how far back a reconnect can replay; default 5 minutes */
  replayMinutes?: number;
}

export interface FakeSubscription {
  subscription_id: string;
  event_type: string;
  filter: { user_id: string };
  tag?: string;
  created_at: string;
  updated_at: string;
}

export interface FakeActivity extends EventEmitter {
  routes: FakeXRoute[];
  subscriptions(): FakeSubscription[];
  connections(): number;
  connects(): number;
  /** the query parameters of the last connection accepted */
  lastParams(): URLSearchParams | null;
  /** envelopes written (live and replayed) */
  delivered(): number;
  disconnect(): void;
  stall(): void;
  outage(on: boolean): void;
}

const SUBSCRIPTIONS = '/2/activity/subscriptions';
const STREAM = '/2/activity/stream';
const PROBLEMS = 'https://api.twitter.com/2/problems';

interface Logged {
  uuid: string;
  event: FakeXActivity;
}

/** X's event_uuid: a signed 64-bit number as a string */
function eventUuid(): string {
  return randomBytes(8).readBigInt64BE().toString();
}

function bodyError(res: ServerResponse, field: string, value: string, message: string): true {
  return send(res, 400, {
    errors: [{ parameters: { [field]: [value] }, message }],
    title: 'Invalid Request',
    detail: 'One or more parameters to your request was invalid.',
    type: `${PROBLEMS}/invalid-request`,
  });
}

/** The subscriptions and their calls, as X answers them. */
class FakeSubscriptionBook {
  readonly subs = new Map<string, FakeSubscription>();
  private nextId = 1_900_000_000_000_000_000n;

  constructor(private readonly options: Required<Pick<FakeActivityOptions, 'maxSubscriptions' | 'refusedTypes'>>) {}

  matching(eventType: string, userId: string): FakeSubscription[] {
    return [...this.subs.values()].filter((s) => s.event_type === eventType && s.filter.user_id === userId);
  }

  list(res: ServerResponse, params: URLSearchParams): true {
    const maxRaw = params.get('max_results') ?? '100';
    const max = Number(maxRaw);
    if (!/^[0-9]+$/.test(maxRaw) || max < 1 || max > 100) return invalidRequest(res, 'max_results', maxRaw);
    const token = params.get('pagination_token');
    const from = token === null ? 0 : Number(Buffer.from(token, 'base64url').toString('utf8').replace(/^s1:/, ''));
    if (!Number.isInteger(from) || from < 0) return invalidRequest(res, 'pagination_token', token ?? '');
    const all = [...this.subs.values()];
    const data = all.slice(from, from + max);
    const meta: Record<string, unknown> = { total_subscriptions: all.length, result_count: data.length };
    if (from + max < all.length) meta.next_token = Buffer.from(`s1:${from + max}`).toString('base64url');
    return send(res, 200, { ...(data.length > 0 && { data }), meta });
  }

  create(res: ServerResponse, body: Record<string, unknown>): true {
    const type = typeof body.event_type === 'string' ? body.event_type : '';
    const filter = (body.filter ?? {}) as Record<string, unknown>;
    const userId = typeof filter.user_id === 'string' ? filter.user_id : '';
    if (!(FAKE_XAA_EVENT_TYPES as readonly string[]).includes(type))
      return bodyError(res, 'event_type', type, `The \`event_type\` value [${type}] is not one of the event types`);
    if (!/^[0-9]{1,19}$/.test(userId))
      return bodyError(res, 'filter.user_id', userId, `The \`filter.user_id\` value [${userId}] is not a user id`);
    if (body.tag !== undefined && (typeof body.tag !== 'string' || body.tag.length < 1 || body.tag.length > 200))
      return bodyError(res, 'tag', JSON.stringify(body.tag), 'The `tag` must be 1 to 200 characters');
    if (this.options.refusedTypes.includes(type))
      return send(res, 403, {
        title: 'Forbidden',
        detail: `The event type ${type} is not available for your account's tier.`,
        type: `${PROBLEMS}/client-forbidden`,
        status: 403,
      });
    if (this.matching(type, userId).length > 0)
      return send(res, 409, {
        title: 'DuplicateSubscription',
        detail: `A subscription to ${type} for user ${userId} already exists.`,
        type: `${PROBLEMS}/duplicate-subscription`,
        status: 409,
      });
    if (this.subs.size >= this.options.maxSubscriptions)
      return send(res, 400, {
        title: 'SubscriptionCapExceeded',
        detail: `You have exceeded the maximum number of subscriptions (${this.options.maxSubscriptions})`,
        type: `${PROBLEMS}/subscription-cap`,
        status: 400,
      });
    const now = new Date().toISOString();
    const sub: FakeSubscription = {
      subscription_id: String(this.nextId++),
      event_type: type,
      filter: { user_id: userId },
      ...(typeof body.tag === 'string' && { tag: body.tag }),
      created_at: now,
      updated_at: now,
    };
    this.subs.set(sub.subscription_id, sub);
    return send(res, 200, {
      data: { subscription: sub, total_subscriptions_for_instance_id: this.subs.size },
      meta: { total_subscriptions: this.subs.size },
    });
  }

  delete(res: ServerResponse, id: string): true {
    if (!this.subs.delete(id))
      return send(res, 404, {
        title: 'Not Found Error',
        detail: `Could not find subscription with subscription_id: [${id}].`,
        type: `${PROBLEMS}/resource-not-found`,
        status: 404,
      });
    return send(res, 200, { data: { deleted: true }, meta: { total_subscriptions: this.subs.size } });
  }
}

function subscriptionsRouteOf(book: FakeSubscriptionBook): FakeXRoute {
  return async (req, res, url) => {
    if (url.pathname === SUBSCRIPTIONS && req.method === 'GET') return book.list(res, url.searchParams);
    if (url.pathname === SUBSCRIPTIONS && req.method === 'POST') {
      let body: unknown;
      try {
        body = JSON.parse(await readBody(req));
      } catch {
        body = null;
      }
      if (typeof body !== 'object' || body === null)
        return bodyError(res, 'body', '', 'The request body is not a JSON object');
      return book.create(res, body as Record<string, unknown>);
    }
    const m = /^\/2\/activity\/subscriptions\/([0-9]{1,19})$/.exec(url.pathname);
    if (m && req.method === 'DELETE') return book.delete(res, m[1]!);
    return false;
  };
}

/** the envelope's `includes` for an event, as X's examples show them */
function includesOf(event: FakeXActivity, state: FakeXState): Record<string, unknown> | undefined {
  const user = state.users.get(event.user_id);
  if (!user) return undefined;
  const fields = new URLSearchParams({ 'user.fields': 'created_at,description,profile_image_url,protected,verified' });
  if (event.event_type === 'post.create') return { tweets: [event.payload], users: [userObject(user, fields)] };
  if (event.event_type === 'post.delete') return { users: [{ data: userObject(user, fields) }] };
  return undefined;
}

/** the envelopes' `data` of an event, one per subscription it matches */
function envelopes({ event, uuid }: Logged, book: FakeSubscriptionBook, state: FakeXState): Record<string, unknown>[] {
  return book.matching(event.event_type, event.user_id).map((sub) => {
    const inc = includesOf(event, state);
    return {
      event_uuid: uuid,
      filter: { user_id: event.user_id },
      event_type: event.event_type,
      ...(sub.tag !== undefined && { tag: sub.tag }),
      payload: event.payload,
      ...(inc && { includes: inc }),
    };
  });
}

interface ReplayWindow {
  from: number;
  to: number;
}

/** which logged events a connection replays (null: none asked), or the bad parameter's answer */
function replayWindow(res: ServerResponse, params: URLSearchParams, replayMs: number): ReplayWindow | null | true {
  const backfill = params.get('backfill_minutes');
  const start = params.get('start_time');
  const end = params.get('end_time');
  if (backfill !== null && !/^[0-5]$/.test(backfill))
    return invalidRequest(
      res,
      'backfill_minutes',
      backfill,
      `The \`backfill_minutes\` value [${backfill}] is not between 0 and 5`,
    );
  for (const [name, v] of [
    ['start_time', start],
    ['end_time', end],
  ] as const)
    if (v !== null && Number.isNaN(Date.parse(v))) return invalidRequest(res, name, v);
  const now = Date.now();
  const oldest = now - replayMs;
  const to = end === null ? now : Date.parse(end);
  if (start !== null) return { from: Math.max(oldest, Date.parse(start)), to };
  if (backfill !== null && backfill !== '0') return { from: Math.max(oldest, now - Number(backfill) * 60_000), to };
  return null;
}

export function createFakeActivity(options: FakeActivityOptions = {}): FakeActivity {
  const keepAliveMs = options.keepAliveMs ?? 20_000;
  const replayMs = (options.replayMinutes ?? 5) * 60_000;
  const emitter = new EventEmitter() as FakeActivity;
  const book = new FakeSubscriptionBook({
    maxSubscriptions: options.maxSubscriptions ?? 2500,
    refusedTypes: options.refusedTypes ?? [],
  });
  const log: Logged[] = [];
  let watching: FakeXState | null = null;
  const slot = new StreamSlot(keepAliveMs);
  let params: URLSearchParams | null = null;
  let delivered = 0;

  function write(entry: Logged, state: FakeXState): void {
    if (!slot.writable()) return;
    for (const data of envelopes(entry, book, state)) {
      slot.write({ data });
      delivered++;
      emitter.emit('delivered', data);
    }
  }

  /** every state event is logged (a reconnect's replay), whether a stream is open or not */
  function watch(state: FakeXState): void {
    if (watching === state) return;
    watching = state;
    state.on('activity', (event: FakeXActivity) => {
      const entry = { uuid: eventUuid(), event };
      log.push(entry);
      while (log.length > 0 && log[0]!.event.at < Date.now() - replayMs) log.shift();
      write(entry, state);
    });
  }

  const streamRoute: FakeXRoute = (req, res, url, ctx: FakeXContext) => {
    watch(ctx.state);
    if (url.pathname !== STREAM || req.method !== 'GET') return false;
    const window = replayWindow(res, url.searchParams, replayMs);
    if (window === true || slot.busy(res) || slot.unavailable(res)) return true;
    slot.accept(res);
    params = url.searchParams;
    if (window) for (const e of log) if (e.event.at >= window.from && e.event.at <= window.to) write(e, ctx.state);
    emitter.emit('connected');
    return true;
  };

  return Object.assign(emitter, {
    routes: [
      // the first route sees every request: the event log starts with the fake's first request
      (req: IncomingMessage, res: ServerResponse, url: URL, ctx: FakeXContext) => {
        watch(ctx.state);
        return subscriptionsRouteOf(book)(req, res, url, ctx);
      },
      streamRoute,
    ],
    subscriptions: () => [...book.subs.values()],
    lastParams: () => params,
    delivered: () => delivered,
    ...slot.controls(),
  });
}
