/**
 * The X filtered-stream endpoints the `stream` mode calls (X API v2, app-only bearer token):
 *
 *   GET  /2/tweets/search/stream/rules    the rule set
 *   POST /2/tweets/search/stream/rules    add ({add}) or delete ({delete: {ids}}); `meta.summary`
 *   GET  /2/tweets/search/stream          the stream: one JSON object per line (\r\n), bare \r\n
 *                                          keep-alives; `matching_rules` on every tweet
 *
 * The rules calls go through the X provider's request helper (packages/social `XClient`: the
 * fleet's rate-limit governor, family `rules`, X's error mapping). The stream connect asks the
 * same governor (family `stream_connect`) and reports X's answer to it, but is read with fetch:
 * a long-lived chunked body, and a 429 TooManyConnections (our own previous connection X has not
 * closed yet, after a failover or a stall) is not a rate limit — the helper would stop the whole
 * family until the window's reset (15 minutes) — so it reaches the governor with its headers only.
 * Errors: XHttpError (status, X's problem title, retry-after) or a network error.
 */
import {
  mapXTweet,
  readStreamLines,
  SourceBusyError,
  X_TWEET_FIELDS,
  X_USER_FIELDS,
  type SocialTweet,
  type XClient,
  type XGovernor,
} from '@sts/social';
import type { NewRule, StreamRule } from './domain/streamRules';

/** X answered with an error status (or the gate refused the call: status 429, `gated`). */
export class XHttpError extends Error {
  override name = 'XHttpError';
  constructor(
    readonly status: number,
    message: string,
    /** when X (or the budget) says to try again, ms from now */
    readonly retryAfterMs: number | null,
    readonly gated = false,
    /** X's `connection_issue` (a second stream connection: TooManyConnections) */
    readonly connectionIssue: string | null = null,
  ) {
    super(message);
  }
}

interface StreamHandlers {
  onTweet(tweet: SocialTweet, matchingRuleIds: string[]): void;
  /**
   * a line ended (a post or a keep-alive): the stream is alive and its position moved. Bytes of an
   * unfinished line are not called activity, so a peer that trickles a line never ending it
   * stalls like one that sends nothing.
   */
  onActivity(): void;
}

export interface XStreamApi {
  listRules(): Promise<StreamRule[]>;
  /** the rules X created (a duplicate X already held is not among them) */
  addRules(rules: NewRule[]): Promise<StreamRule[]>;
  deleteRules(ids: string[]): Promise<void>;
  /**
   * Resolves when the connection is established (200); the returned promise ends with it.
   * `backfillMinutes` (1–5) asks X to replay what the app missed in the last minutes.
   */
  connect(handlers: StreamHandlers, signal: AbortSignal, backfillMinutes?: number): Promise<{ closed: Promise<void> }>;
}

export interface XStreamApiOptions {
  /** the X provider's request helper (its governor is the fleet's) */
  client: XClient;
  baseUrl: string;
  bearerToken: string;
  /** the stream's connect, until X's headers; default 10 s */
  timeoutMs?: number;
}

interface XProblemBody {
  title?: string;
  connection_issue?: string;
  detail?: string;
  errors?: { title?: string; message?: string; detail?: string; value?: string }[];
  meta?: { summary?: { created?: number; not_created?: number; deleted?: number; not_deleted?: number } };
  data?: { id: string; value: string; tag?: string }[];
}

function retryAfter(headers: Headers): number | null {
  const reset = Number(headers.get('x-rate-limit-reset'));
  if (Number.isFinite(reset) && reset > 0) return Math.max(0, reset * 1000 - Date.now());
  const after = Number(headers.get('retry-after'));
  return Number.isFinite(after) && after > 0 ? after * 1000 : null;
}

function problem(body: XProblemBody | null, status: number): string {
  const first = body?.errors?.[0];
  const parts = [body?.title, body?.detail, first?.title, first?.message ?? first?.detail].filter(Boolean);
  return `X answered ${status}${parts.length ? `: ${parts.join(' — ')}` : ''}`;
}

const STREAM_QUERY = new URLSearchParams({
  expansions: 'author_id',
  'tweet.fields': X_TWEET_FIELDS,
  'user.fields': X_USER_FIELDS,
}).toString();

function headerRecord(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  headers.forEach((v, k) => (out[k] = v));
  return out;
}

async function rulesCall(client: XClient, method: 'GET' | 'POST', data?: unknown): Promise<XProblemBody> {
  try {
    const answer = await client.request<XProblemBody['data']>({
      family: 'rules',
      path: '/2/tweets/search/stream/rules',
      method,
      ...(data !== undefined && { data }),
    });
    if (answer.status !== 200 && answer.status !== 201)
      throw new XHttpError(answer.status, problem(answer.body as XProblemBody, answer.status), null);
    return answer.body as XProblemBody;
  } catch (err) {
    if (err instanceof SourceBusyError) throw new XHttpError(429, err.message, err.retryAfterMs, true);
    throw err;
  }
}

/** GET the stream: governor first, X's answer reported; a connection issue is not a rate limit. */
async function openStream(
  options: XStreamApiOptions,
  governor: XGovernor,
  signal: AbortSignal,
  backfillMinutes: number,
): Promise<Response> {
  const grant = await governor.tryAcquire('stream_connect', 'high');
  if (!grant.ok) throw new XHttpError(429, 'X stream_connect budget spent', grant.retryAfterMs, true);
  const timeoutMs = options.timeoutMs ?? 10_000;
  // the time limit covers the connect (until X's headers), not the stream that follows
  const connecting = new AbortController();
  const timer = setTimeout(() => connecting.abort(), timeoutMs);
  const replay = backfillMinutes > 0 ? `&backfill_minutes=${Math.min(5, Math.ceil(backfillMinutes))}` : '';
  const res = await fetch(
    `${new URL('/2/tweets/search/stream', options.baseUrl).toString()}?${STREAM_QUERY}${replay}`,
    {
      headers: { authorization: `Bearer ${options.bearerToken}` },
      signal: AbortSignal.any([signal, connecting.signal]),
    },
  )
    .catch((err: unknown) => {
      throw connecting.signal.aborted ? new Error(`stream connect timed out after ${timeoutMs} ms`) : err;
    })
    .finally(() => clearTimeout(timer));
  const parsed =
    res.status === 200
      ? null
      : ((await res.json().catch(() => null)) as (XProblemBody & { connection_issue?: string }) | null);
  const issue = parsed?.connection_issue ?? null;
  const observed = issue === 'TooManyConnections' ? 200 : res.status;
  await governor
    .observe('stream_connect', { status: observed, headers: headerRecord(res.headers) })
    .catch(() => undefined);
  if (res.status !== 200 || !res.body)
    // X's reset bounds the retry of a 429 only: another error's rate-limit headers say nothing of it
    throw new XHttpError(
      res.status,
      problem(parsed, res.status),
      res.status === 429 ? retryAfter(res.headers) : null,
      false,
      issue,
    );
  return res;
}

export function createXStreamApi(options: XStreamApiOptions): XStreamApi {
  const { client } = options;
  return {
    async listRules() {
      const body = await rulesCall(client, 'GET');
      return (body.data ?? []).map((r) => ({ id: r.id, value: r.value, tag: r.tag }));
    },
    async addRules(rules) {
      if (rules.length === 0) return [];
      const body = await rulesCall(client, 'POST', { add: rules });
      // a duplicate is a rule X already holds (an earlier call that timed out): not a failure
      const real = (body.errors ?? []).filter((e) => e.title !== 'DuplicateRule');
      if (real.length > 0) throw new XHttpError(400, problem(body, 400), null);
      return (body.data ?? []).map((r) => ({ id: r.id, value: r.value, tag: r.tag }));
    },
    async deleteRules(ids) {
      if (ids.length === 0) return;
      await rulesCall(client, 'POST', { delete: { ids } });
    },
    async connect(handlers, signal, backfillMinutes = 0) {
      const res = await openStream(options, client.governor, signal, backfillMinutes);
      // every streamed post is a post read X bills (once a UTC day: a replay re-sends some)
      const onTweet: StreamHandlers['onTweet'] = (tweet, ids) => {
        client.billing.record([
          { resource: 'post_read', id: tweet.id, account: tweet.author.username.toLowerCase() || null },
        ]);
        handlers.onTweet(tweet, ids);
      };
      return { closed: readLines(res.body!.getReader(), { ...handlers, onTweet }) };
    },
  };
}

interface StreamLine {
  data?: Parameters<typeof mapXTweet>[0];
  includes?: { users?: Parameters<typeof mapXTweet>[1] };
  matching_rules?: { id: string; tag?: string }[];
  errors?: { title?: string; detail?: string }[];
}

/** Reads the posts until the stream ends; an `errors` line (a disconnect notice) ends it too. */
function readLines(reader: ReadableStreamDefaultReader<Uint8Array>, handlers: StreamHandlers): Promise<void> {
  return readStreamLines<StreamLine>(reader, {
    onChunk: (partial) => {
      if (!partial) handlers.onActivity();
    },
    onLine: (parsed) => {
      if (parsed.data) {
        handlers.onTweet(
          mapXTweet(parsed.data, parsed.includes?.users ?? []),
          (parsed.matching_rules ?? []).map((r) => r.id),
        );
      } else if (parsed.errors) {
        return new Error(`stream ended by X: ${parsed.errors.map((e) => e.title ?? e.detail).join(', ')}`);
      }
      return undefined;
    },
  });
}
