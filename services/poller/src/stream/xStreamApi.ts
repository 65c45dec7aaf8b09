/**
 * The X filtered-stream endpoints the `stream` mode calls (X API v2, app-only bearer token):
 *
 *   GET  /2/tweets/search/stream/rules    the rule set
 *   POST /2/tweets/search/stream/rules    add ({add}) or delete ({delete: {ids}}); `meta.summary`
 *   GET  /2/tweets/search/stream          the stream: one JSON object per line (\r\n), bare \r\n
 *                                          keep-alives; `matching_rules` on every tweet
 *
 * Every call first asks the rate-limit gate (families `rules`, `stream_connect`) and reports X's
 * answer to it (status and x-rate-limit-* headers), so the whole fleet stays inside one budget.
 * Errors: XHttpError (status, X's problem title and Retry-After / reset) or a network error.
 */
import { mapXTweet, X_TWEET_FIELDS, X_USER_FIELDS, type SocialTweet } from '@sts/social';
import type { NewRule, StreamRule } from '../domain/streamRules';

export type StreamFamily = 'rules' | 'stream_connect' | 'search';

/** the part of the shared X governor (packages/social) the stream needs */
export interface XGate {
  tryAcquire(
    family: StreamFamily,
    priority?: 'high' | 'low',
  ): Promise<{ ok: true } | { ok: false; retryAfterMs: number }>;
  observe(family: StreamFamily, answer: { status: number; headers: Headers }): Promise<void> | void;
}

/** A gate that lets every call through (tests of this file alone). */
export const openGate: XGate = { tryAcquire: () => Promise.resolve({ ok: true }), observe: () => undefined };

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

export interface StreamHandlers {
  onTweet(tweet: SocialTweet, matchingRuleIds: string[]): void;
  /** any byte, keep-alives included (stall detection) */
  onActivity(): void;
}

export interface XStreamApi {
  listRules(): Promise<StreamRule[]>;
  /** the rules X created (a duplicate X already held is not among them) */
  addRules(rules: NewRule[]): Promise<StreamRule[]>;
  deleteRules(ids: string[]): Promise<void>;
  /** Resolves when the connection is established (200); the returned promise ends with it. */
  connect(handlers: StreamHandlers, signal: AbortSignal): Promise<{ closed: Promise<void> }>;
}

export interface XStreamApiOptions {
  baseUrl: string;
  bearerToken: string;
  /** rules calls and the stream's connect; default 10 s */
  timeoutMs?: number;
  gate?: XGate;
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

export function createXStreamApi(options: XStreamApiOptions): XStreamApi {
  const gate = options.gate ?? openGate;
  const timeoutMs = options.timeoutMs ?? 10_000;
  const auth = { authorization: `Bearer ${options.bearerToken}` };
  const url = (path: string) => new URL(path, options.baseUrl).toString();

  async function gated(family: StreamFamily): Promise<void> {
    const permit = await gate.tryAcquire(family, 'high');
    if (!permit.ok) throw new XHttpError(429, `X ${family} budget spent`, permit.retryAfterMs, true);
  }

  async function rulesCall(method: 'GET' | 'POST', body?: unknown): Promise<XProblemBody> {
    await gated('rules');
    const res = await fetch(url('/2/tweets/search/stream/rules'), {
      method,
      headers: { ...auth, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
      signal: AbortSignal.timeout(timeoutMs),
    });
    await gate.observe('rules', { status: res.status, headers: res.headers });
    const parsed = (await res.json().catch(() => null)) as XProblemBody | null;
    if (res.status !== 200 && res.status !== 201)
      throw new XHttpError(res.status, problem(parsed, res.status), retryAfter(res.headers));
    return parsed ?? {};
  }

  return {
    async listRules() {
      const body = await rulesCall('GET');
      return (body.data ?? []).map((r) => ({ id: r.id, value: r.value, tag: r.tag }));
    },
    async addRules(rules) {
      if (rules.length === 0) return [];
      const body = await rulesCall('POST', { add: rules });
      // a duplicate is a rule X already holds (an earlier call that timed out): not a failure
      const real = (body.errors ?? []).filter((e) => e.title !== 'DuplicateRule');
      if (real.length > 0 || (body.meta?.summary?.not_created ?? 0) > (body.errors?.length ?? 0) - real.length)
        throw new XHttpError(400, problem(body, 400), null);
      return (body.data ?? []).map((r) => ({ id: r.id, value: r.value, tag: r.tag }));
    },
    async deleteRules(ids) {
      if (ids.length === 0) return;
      await rulesCall('POST', { delete: { ids } });
    },
    async connect(handlers, signal) {
      await gated('stream_connect');
      // the time limit covers the connect (until X's headers), not the stream that follows
      const connecting = new AbortController();
      const timer = setTimeout(() => connecting.abort(), timeoutMs);
      const res = await fetch(`${url('/2/tweets/search/stream')}?${STREAM_QUERY}`, {
        headers: auth,
        signal: AbortSignal.any([signal, connecting.signal]),
      })
        .catch((err: unknown) => {
          throw connecting.signal.aborted ? new Error(`stream connect timed out after ${timeoutMs} ms`) : err;
        })
        .finally(() => clearTimeout(timer));
      await gate.observe('stream_connect', { status: res.status, headers: res.headers });
      if (res.status !== 200 || !res.body) {
        const parsed = (await res.json().catch(() => null)) as XProblemBody | null;
        const issue = parsed?.connection_issue ?? null;
        throw new XHttpError(res.status, problem(parsed, res.status), retryAfter(res.headers), false, issue);
      }
      const reader = res.body.getReader();
      const closed = readLines(reader, handlers);
      return { closed };
    },
  };
}

interface StreamLine {
  data?: Parameters<typeof mapXTweet>[0];
  includes?: { users?: Parameters<typeof mapXTweet>[1] };
  matching_rules?: { id: string; tag?: string }[];
  errors?: { title?: string; detail?: string }[];
}

/** Reads \r\n-delimited lines until the stream ends; an `errors` line (a disconnect notice) ends it too. */
async function readLines(reader: ReadableStreamDefaultReader<Uint8Array>, handlers: StreamHandlers): Promise<void> {
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    handlers.onActivity();
    buffer += decoder.decode(value, { stream: true });
    let at: number;
    while ((at = buffer.indexOf('\r\n')) >= 0) {
      const line = buffer.slice(0, at).trim();
      buffer = buffer.slice(at + 2);
      if (line === '') continue; // keep-alive
      const parsed = JSON.parse(line) as StreamLine;
      if (parsed.data) {
        handlers.onTweet(
          mapXTweet(parsed.data, parsed.includes?.users ?? []),
          (parsed.matching_rules ?? []).map((r) => r.id),
        );
      } else if (parsed.errors) {
        await reader.cancel().catch(() => undefined);
        throw new Error(`stream ended by X: ${parsed.errors.map((e) => e.title ?? e.detail).join(', ')}`);
      }
    }
  }
}
