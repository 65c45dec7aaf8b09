/**
 * The X Activity API endpoints (app-only bearer token; docs.x.com x-api/activity):
 *
 *   GET    /2/activity/subscriptions       paged (`max_results` 100, `pagination_token`)
 *   POST   /2/activity/subscriptions       `{event_type, filter: {user_id}, tag}`
 *   DELETE /2/activity/subscriptions/:id
 *   GET    /2/activity/stream              one envelope per \r\n-ended line, bare \r\n keep-alives;
 *                                           `start_time` (or `backfill_minutes`) replays a gap
 *
 * Every call asks the fleet's X governor first (subscription calls count in the `rules` family, the
 * stream's connect in `stream_connect`) and reports X's answer back. Calls are made with fetch, not
 * the provider's helper: a 403 here is X refusing an event type for the tier (not bad
 * credentials), and a 429 TooManyConnections on the stream is our own previous connection, not a
 * rate limit. A creation X refuses comes back as `{ ok: false, refusal }` (the caller leaves that
 * account on the polled path); a transient failure (429, 5xx, network, governor) throws
 * XActivityError with `transient` set.
 */
import { readStreamLines, type XGovernor } from '@sts/social';
import { isXaaEventType, type XaaEvent, type XaaSubscription, type XaaSubscriptionKey } from './types';

export class XActivityError extends Error {
  override name = 'XActivityError';
  constructor(
    message: string,
    readonly status: number | null,
    /** worth retrying later (rate limit, X failing, network); false: X refuses it as asked */
    readonly transient: boolean,
    /** when to retry, ms from now (X's reset or the governor's) */
    readonly retryAfterMs: number | null = null,
  ) {
    super(message);
  }
}

/** why X refused a subscription: the tier's limit, a type the tier is not offered, or invalid */
export type XaaRefusal = 'limit' | 'forbidden' | 'invalid';

type CreateResult = { ok: true; subscription: XaaSubscription } | { ok: false; refusal: XaaRefusal; detail: string };

export interface StreamReplay {
  /** X replays the events from this time (it keeps a few minutes) */
  startTime?: Date;
}

export interface StreamHandlers {
  onEvent(event: XaaEvent): void;
  /**
   * a chunk arrived, keep-alives included, after the events it ended; `partial`: a line is still
   * unfinished, so the stream's position has not moved past it
   */
  onActivity(partial: boolean): void;
}

export interface XActivityApi {
  list(): Promise<XaaSubscription[]>;
  create(key: XaaSubscriptionKey, tag: string): Promise<CreateResult>;
  remove(id: string): Promise<void>;
  /** resolves once X accepted the connection; `closed` settles when it ends (rejects on X's disconnect notice) */
  connect(handlers: StreamHandlers, signal: AbortSignal, replay?: StreamReplay): Promise<{ closed: Promise<void> }>;
}

export interface XActivityApiOptions {
  baseUrl: string;
  bearerToken: string;
  governor: Pick<XGovernor, 'tryAcquire' | 'observe'>;
  /** each call, and the stream's connect until X's headers; default 10 s */
  timeoutMs?: number;
}

interface Problem {
  title?: string;
  detail?: string;
  connection_issue?: string;
  errors?: { message?: string; title?: string; parameters?: Record<string, unknown> }[];
}

interface WireSubscription {
  subscription_id: string;
  event_type: string;
  filter?: { user_id?: string };
  tag?: string;
}

function describe(status: number, body: Problem | null): string {
  const first = body?.errors?.[0];
  const parts = [body?.title, body?.detail, first?.title, first?.message].filter(Boolean);
  return `X answered ${status}${parts.length ? `: ${parts.join(' — ')}` : ''}`;
}

function retryAfter(headers: Headers): number | null {
  const reset = Number(headers.get('x-rate-limit-reset'));
  if (Number.isFinite(reset) && reset > 0) return Math.max(0, reset * 1000 - Date.now());
  return null;
}

function toSubscription(w: WireSubscription): XaaSubscription | null {
  const userId = w.filter?.user_id;
  if (!userId || !isXaaEventType(w.event_type)) return null;
  return { id: w.subscription_id, eventType: w.event_type, userId, tag: w.tag ?? null };
}

/** the refusal a 4xx creation answer means (X documents the limit, not its body: any 400 naming it) */
function refusalOf(status: number, body: Problem | null): XaaRefusal {
  if (status === 403) return 'forbidden';
  const text = `${body?.title ?? ''} ${body?.detail ?? ''}`;
  return /cap|limit|maximum/i.test(text) ? 'limit' : 'invalid';
}

export function createXActivityApi(options: XActivityApiOptions): XActivityApi {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const url = (path: string) => new URL(path, options.baseUrl).toString();
  const headers = { authorization: `Bearer ${options.bearerToken}`, 'content-type': 'application/json' };

  async function call(method: string, path: string, body?: unknown): Promise<{ status: number; json: unknown }> {
    const grant = await options.governor.tryAcquire('rules', 'high');
    if (!grant.ok) throw new XActivityError('the X rules budget is spent', 429, true, grant.retryAfterMs);
    let res: Response;
    try {
      res = await fetch(url(path), {
        method,
        headers,
        ...(body !== undefined && { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (err) {
      throw new XActivityError(`X could not be reached: ${(err as Error).message}`, null, true);
    }
    await options.governor.observe('rules', { status: res.status, headers: res.headers }).catch(() => undefined);
    const json: unknown = await res.json().catch(() => null);
    if (res.status === 429 || res.status >= 500)
      throw new XActivityError(describe(res.status, json as Problem), res.status, true, retryAfter(res.headers));
    if (res.status === 401) throw new XActivityError(describe(res.status, json as Problem), 401, false);
    return { status: res.status, json };
  }

  return {
    async list() {
      const out: XaaSubscription[] = [];
      let token: string | undefined;
      do {
        const q = new URLSearchParams({ max_results: '100', ...(token && { pagination_token: token }) });
        const { status, json } = await call('GET', `/2/activity/subscriptions?${q.toString()}`);
        if (status !== 200) throw new XActivityError(describe(status, json as Problem), status, false);
        const page = json as { data?: WireSubscription[]; meta?: { next_token?: string } };
        for (const w of page.data ?? []) {
          const s = toSubscription(w);
          if (s) out.push(s);
        }
        token = page.meta?.next_token;
      } while (token);
      return out;
    },
    async create(key, tag) {
      const { status, json } = await call('POST', '/2/activity/subscriptions', {
        event_type: key.eventType,
        filter: { user_id: key.userId },
        tag,
      });
      if (status === 200 || status === 201) {
        const data = (json as { data?: { subscription?: WireSubscription } & WireSubscription }).data;
        const s = data && toSubscription(data.subscription ?? data);
        if (s) return { ok: true, subscription: s };
        throw new XActivityError('X answered a creation without the subscription', status, true);
      }
      // the same type and account twice: X holds it already (an earlier call that timed out)
      if (status === 409) throw new XActivityError(describe(status, json as Problem), status, true);
      return { ok: false, refusal: refusalOf(status, json as Problem), detail: describe(status, json as Problem) };
    },
    async remove(id) {
      const { status, json } = await call('DELETE', `/2/activity/subscriptions/${encodeURIComponent(id)}`);
      // already gone is what was asked
      if (status !== 200 && status !== 404) throw new XActivityError(describe(status, json as Problem), status, false);
    },
    async connect(handlers, signal, replay = {}) {
      const res = await openStream(options, timeoutMs, signal, replay);
      return { closed: readEnvelopes(res.body!.getReader(), handlers) };
    },
  };
}

async function openStream(
  options: XActivityApiOptions,
  timeoutMs: number,
  signal: AbortSignal,
  replay: StreamReplay,
): Promise<Response> {
  const grant = await options.governor.tryAcquire('stream_connect', 'high');
  if (!grant.ok) throw new XActivityError('the X stream_connect budget is spent', 429, true, grant.retryAfterMs);
  const q = replay.startTime ? `?start_time=${replay.startTime.toISOString().replace(/\.\d{3}Z$/, 'Z')}` : '';
  // the time limit covers the connect (until X's headers), not the stream that follows
  const connecting = AbortSignal.timeout(timeoutMs);
  let res: Response;
  try {
    res = await fetch(`${new URL('/2/activity/stream', options.baseUrl).toString()}${q}`, {
      headers: { authorization: `Bearer ${options.bearerToken}` },
      signal: AbortSignal.any([signal, connecting]),
    });
  } catch (err) {
    throw new XActivityError(`the activity stream could not connect: ${(err as Error).message}`, null, true);
  }
  const body = res.status === 200 ? null : ((await res.json().catch(() => null)) as Problem | null);
  // our own previous connection X has not closed yet is not a rate limit
  const observed = body?.connection_issue === 'TooManyConnections' ? 200 : res.status;
  await options.governor.observe('stream_connect', { status: observed, headers: res.headers }).catch(() => undefined);
  if (res.status !== 200 || !res.body)
    throw new XActivityError(
      describe(res.status, body),
      res.status,
      res.status === 429 || res.status >= 500,
      res.status === 429 ? retryAfter(res.headers) : null,
    );
  return res;
}

interface WireEnvelope {
  data?: {
    event_uuid?: string;
    filter?: { user_id?: string };
    event_type?: string;
    tag?: string;
    payload?: Record<string, unknown>;
    includes?: Record<string, unknown>;
  };
  errors?: { title?: string; detail?: string }[];
}

/** Reads the envelopes until the stream ends; an `errors` line (X's disconnect notice) ends it too. */
function readEnvelopes(reader: ReadableStreamDefaultReader<Uint8Array>, handlers: StreamHandlers): Promise<void> {
  return readStreamLines<WireEnvelope>(reader, {
    onChunk: (partial) => handlers.onActivity(partial),
    onLine: ({ data: d, errors }) => {
      if (d?.event_uuid && d.event_type && d.filter?.user_id) {
        handlers.onEvent({
          uuid: d.event_uuid,
          userId: d.filter.user_id,
          eventType: d.event_type,
          tag: d.tag ?? null,
          payload: d.payload ?? {},
          includes: d.includes ?? null,
        });
      } else if (errors) {
        const notice = errors.map((e) => e.title ?? e.detail).join(', ');
        return new XActivityError(`activity stream ended by X: ${notice}`, null, true);
      }
      return undefined;
    },
  });
}
