/**
 * The live hit stream (`GET /api/v1/stream`, server-sent events) as an async iterator that resumes
 * by itself: after a dropped connection (or a `stream.closed` the client may resume from, such as
 * `shutdown` or `slow_reader`) it reconnects with `Last-Event-ID` after a bounded, doubling delay,
 * so the server sends what was recorded meanwhile first, none twice; after `max_lifetime` (the
 * stream lived STREAM_MAX_LIFETIME_S) at once. A `stream.closed` with an `id:` moves the position
 * too (the stream's position, even when no hit came on that connection). It ends when the signal is
 * aborted (or the loop is left), and throws an ApiError typed by the API's code when going on
 * cannot help: PLAN_REQUIRED, TOO_MANY_STREAMS, INVALID_LAST_EVENT_ID, UNAUTHORIZED (also for the
 * final `stream.closed` of a revoked key), and QUOTA_EXCEEDED (also for the final `stream.closed`
 * of a spent quota).
 *
 * Parsing: eventsource-parser (the SSE parser of the WHATWG rules that the Vercel AI SDK and the MCP
 * SDK use; dependency-free, about 2 KiB) over `fetch`'s body. The browser's EventSource is not used:
 * it cannot send an Authorization header and is not in Node 20, and it hides the status and body
 * of a refusal, which the typed errors need.
 */
import { EventSourceParserStream } from 'eventsource-parser/stream';
import { ApiError, type ErrorBody } from './errors';

/** the `monitor.hit` webhook payload (docs/webhooks.md): an event's `data` */
export interface MonitorHitEvent {
  event: 'monitor.hit';
  monitor: { id: string; targetUsername: string; keywords: string[] | null };
  tweet: { id: string; text: string; authorUsername: string; createdAt: string };
  detectedAt: string;
}

/** one event of the stream; `id` is the cursor to resume after it (`lastEventId`) */
export interface HitStreamEvent {
  type: 'monitor.hit';
  id: string;
  data: MonitorHitEvent;
}

export interface StreamOptions {
  /** only these monitors' hits (at most 50); default every monitor of the account */
  monitors?: readonly string[];
  /** resume after this event (the `id` of the last event handled in an earlier run) */
  lastEventId?: string;
  /** aborting ends the iteration (no error) and closes the connection */
  signal?: AbortSignal;
  /** delay before the first reconnect, doubled after each failed one; default 500 ms */
  minDelayMs?: number;
  /** the longest delay between reconnects; default 30 s */
  maxDelayMs?: number;
  /** told of each reconnect before its delay (for logs) */
  onReconnect?: (info: { attempt: number; delayMs: number; reason: unknown }) => void;
}

export interface StreamConnection {
  baseUrl: string;
  headers: Record<string, string>;
  fetch: typeof globalThis.fetch;
}

/** refusals that a later attempt may not get: a busy server, the per-minute limit */
function retryable(err: ApiError, reconnecting: boolean): boolean {
  if (err.status >= 500 || err.code === 'RATE_LIMIT_EXCEEDED') return true;
  // the dropped connection's slot can still be held until the server notices it is gone
  return reconnecting && err.code === 'TOO_MANY_STREAMS';
}

async function refusal(res: Response): Promise<ApiError> {
  const text = await res.text().catch(() => '');
  try {
    const body = JSON.parse(text) as Partial<ErrorBody>;
    if (typeof body.code === 'string' && typeof body.error === 'string')
      return new ApiError(res.status, body as ErrorBody);
  } catch {
    // not an error body of the API
  }
  return new ApiError(res.status, {
    error: `unexpected answer ${res.status} ${res.statusText}`,
    code: res.status >= 500 ? 'SERVICE_UNAVAILABLE' : 'INTERNAL',
    request_id: res.headers.get('x-request-id') ?? '',
  });
}

/** a pause that the signal cuts short; false when aborted */
function pause(ms: number, signal: AbortSignal | undefined): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve(false);
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve(!signal?.aborted);
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** what ended one connection: a reason to reconnect for (thrown errors are terminal); `now`: without a delay */
type Ended = { reason: unknown; delayMs?: number; now?: boolean };

class HitStream {
  private lastEventId: string | undefined;
  private attempt = 0;
  private connected = false;

  constructor(
    private readonly conn: StreamConnection,
    private readonly opts: StreamOptions,
  ) {
    this.lastEventId = opts.lastEventId;
  }

  async *run(): AsyncGenerator<HitStreamEvent, void, undefined> {
    const { signal } = this.opts;
    for (;;) {
      if (signal?.aborted) return;
      const ended: Ended = yield* this.connection();
      if (signal?.aborted) return;
      if (ended.now === true) {
        this.opts.onReconnect?.({ attempt: 0, delayMs: 0, reason: ended.reason });
        continue;
      }
      const base = Math.min(this.opts.maxDelayMs ?? 30_000, (this.opts.minDelayMs ?? 500) * 2 ** this.attempt);
      const delayMs = Math.max(ended.delayMs ?? 0, Math.round(base * (0.5 + Math.random() / 2)));
      this.attempt++;
      this.opts.onReconnect?.({ attempt: this.attempt, delayMs, reason: ended.reason });
      if (!(await pause(delayMs, signal))) return;
    }
  }

  private url(): string {
    const q = new URLSearchParams();
    for (const m of this.opts.monitors ?? []) q.append('monitor', m);
    const query = q.toString();
    return `${this.conn.baseUrl}/api/v1/stream${query ? `?${query}` : ''}`;
  }

  /** one connection: its events, then why it ended; a terminal refusal throws */
  private async *connection(): AsyncGenerator<HitStreamEvent, Ended, undefined> {
    const local = new AbortController();
    const signal = this.opts.signal ? AbortSignal.any([this.opts.signal, local.signal]) : local.signal;
    try {
      const headers: Record<string, string> = { ...this.conn.headers, accept: 'text/event-stream' };
      if (this.lastEventId !== undefined) headers['last-event-id'] = this.lastEventId;
      let res: Response;
      try {
        res = await this.conn.fetch(this.url(), { headers, signal });
      } catch (reason) {
        return { reason };
      }
      if (res.status !== 200 || res.body === null) {
        const err = await refusal(res);
        if (!retryable(err, this.connected)) throw err;
        return { reason: err, delayMs: (err.retryAfter ?? 0) * 1000 };
      }
      this.connected = true;
      this.attempt = 0;
      const events = res.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream());
      try {
        for await (const ev of events) {
          if (ev.event === 'monitor.hit') {
            if (ev.id !== undefined) this.lastEventId = ev.id;
            yield { type: 'monitor.hit', id: ev.id ?? '', data: JSON.parse(ev.data) as MonitorHitEvent };
          } else if (ev.event === 'stream.closed') {
            if (ev.id !== undefined) this.lastEventId = ev.id;
            return closedBy(JSON.parse(ev.data) as { reason: string; message: string });
          }
        }
      } catch (reason) {
        if (reason instanceof ApiError) throw reason;
        return { reason };
      }
      return { reason: new Error('the connection ended') };
    } finally {
      local.abort();
    }
  }
}

/** the end of a connection the service closed with `stream.closed`; throws when reconnecting cannot help */
function closedBy(closed: { reason: string; message: string }): Ended {
  if (closed.reason === 'quota_exceeded')
    throw new ApiError(429, { error: closed.message, code: 'QUOTA_EXCEEDED', request_id: '' });
  if (closed.reason === 'key_revoked')
    throw new ApiError(401, { error: closed.message, code: 'UNAUTHORIZED', request_id: '' });
  const reason = new Error(`stream closed by the service: ${closed.reason}`);
  return closed.reason === 'max_lifetime' ? { reason, now: true } : { reason };
}

/** See the file's comment; `client.stream(opts)` is this over the client's base URL and key. */
export function streamHits(
  conn: StreamConnection,
  opts: StreamOptions = {},
): AsyncGenerator<HitStreamEvent, void, undefined> {
  return new HitStream(conn, opts).run();
}
