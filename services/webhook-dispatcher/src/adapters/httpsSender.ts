/**
 * Sends one webhook POST over HTTPS, with the address policy enforced on the address actually
 * dialled: a custom `lookup` checks every address DNS returns before the socket connects (so a
 * name that re-resolves to an internal address, DNS rebinding, is refused too), and literal IP
 * hosts are checked before the request starts. Hosts in the allow list skip the check.
 *
 * Connections are undici clients (connections.ts): keep-alive, pooled per origin, newest first,
 * idle ones closed after 4 s and at most WEBHOOK_MAX_CONCURRENCY_PER_ENDPOINT of them kept idle per
 * origin. A per-endpoint semaphore keeps at most that many deliveries to one endpoint in flight. A
 * whole-request deadline, no redirects followed, response bodies read up to 64 KiB (the first 512
 * bytes kept as the snippet, the first 4 KiB and the headers as the attempt detail; exchange.ts).
 * One transparent reconnect happens only when a reused keep-alive socket turns out closed before
 * any response (the request never reached the receiver); there are no other retries.
 */
import dns from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { performance } from 'node:perf_hooks';
import { blockedReason, createHostAllowList, normalizeHostname } from '../domain/addressPolicy';
import {
  boundedHeaderPairs,
  DETAIL_MAX_HEADERS,
  DETAIL_RESPONSE_BODY_BYTES,
  requestHeaderPairs,
  type HeaderPairs,
} from '../domain/attemptDetail';
import { ConnectionPool } from './connections';
import { Exchange } from './exchange';

interface SendRequest {
  url: string;
  body: string | Buffer;
  headers: Record<string, string>;
  /** the key of the per-endpoint concurrency limit (default: host:port of the URL) */
  endpointKey?: string;
  /** aborting destroys the request (the dispatcher's shutdown grace period ran out) */
  signal?: AbortSignal;
}

export interface SendResult {
  outcome: 'delivered' | 'failed';
  statusCode: number | null;
  latencyMs: number;
  error: string | null;
  responseSnippet: string | null;
  /** the address policy refused the target; no connection was made */
  refused: boolean;
  /** response headers (empty when there was no response) */
  headers: Record<string, string | string[] | undefined>;
  /** the answer was longer than the read limit; only its start was read */
  truncated: boolean;
  /** attempt detail: the request's headers as sent, with the Content-Length this sender adds */
  requestHeaders: HeaderPairs;
  /** attempt detail: response headers as received ([name, value], bounded); empty without a response */
  responseHeaders: HeaderPairs;
  /** attempt detail: the first DETAIL_RESPONSE_BODY_BYTES bytes of the response body; null without a response */
  responseBody: Buffer | null;
}

export interface HttpsSenderOptions {
  timeoutMs: number;
  maxConcurrencyPerEndpoint: number;
  /** WEBHOOK_ALLOW_PRIVATE_HOSTS */
  allowPrivateHosts?: readonly string[];
  /** DNS resolution (default dns.lookup); tests inject one to simulate names that resolve to internal addresses */
  lookup?: LookupFunction;
  /**
   * Test hook: where a URL is really sent (e.g. a discord.com URL to a local receiver). The body
   * and the address policy use the rewritten URL's host; never set in production.
   */
  urlOverride?: (url: URL) => URL;
  /** bytes of the response kept in the attempt log */
  snippetBytes?: number;
  /** bytes of the response read at most (the rest is dropped with the connection) */
  maxResponseBytes?: number;
  /**
   * Told the detail of a refused resolved address (which address, which range). The delivery log
   * and the customer see only a generic reason: the resolved addresses would map the internal network.
   */
  onRefused?: (host: string, detail: string) => void;
}

export interface HttpsSender {
  send(request: SendRequest): Promise<SendResult>;
  /** deliveries in flight (including those waiting for their endpoint's semaphore) */
  inFlight(): number;
  close(): void;
}

class RefusedAddressError extends Error {
  override name = 'RefusedAddressError';
  readonly code = 'EREFUSEDADDRESS';
}

class DeadlineError extends Error {
  override name = 'DeadlineError';
}

class Semaphore {
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  constructor(private readonly max: number) {}
  async acquire(): Promise<void> {
    if (this.active < this.max) {
      this.active++;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }
  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.active--;
  }
  get idle(): boolean {
    return this.active === 0 && this.waiting.length === 0;
  }
}

function describeError(err: unknown, timeoutMs: number): string {
  if (err instanceof DeadlineError) return `timed out after ${timeoutMs} ms`;
  if (err instanceof RefusedAddressError) return err.message;
  const e = err as NodeJS.ErrnoException;
  const code = e.code ?? '';
  switch (code) {
    case 'ECONNREFUSED':
      return `connection refused (${e.message.replace(/^connect /, '')})`;
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `host not found (${e.code})`;
    case 'ECONNRESET':
      return 'connection reset by the receiver';
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return `host unreachable (${e.code})`;
    default:
      if (/CERT|SSL|TLS|SELF_SIGNED|HOSTNAME/.test(code)) return `TLS error: ${e.message}`;
      return e.message || String(err);
  }
}

/** Text of the first bytes of a response: no NUL (PostgreSQL text refuses it), no broken trailing character. */
function snippetText(buf: Buffer): string {
  return buf
    .toString('utf8')
    .replace(/\uFFFD+$/, '')
    .replaceAll(String.fromCharCode(0), '');
}

/**
 * The only path from a host name to an address the sender connects to: every address DNS returns
 * is checked against the address policy (hosts in the allow list skip it).
 */
function createGuardedLookup(
  baseLookup: LookupFunction,
  isAllowed: (host: string) => boolean,
  onRefused?: (host: string, detail: string) => void,
): LookupFunction {
  return (hostname, lookupOptions, callback) => {
    const allowed = isAllowed(hostname);
    baseLookup(hostname, { ...lookupOptions, all: true }, (err, addresses, family) => {
      if (err) return callback(err, '', 0);
      const list = Array.isArray(addresses)
        ? addresses
        : addresses
          ? [{ address: addresses, family: family ?? isIP(addresses) }]
          : [];
      if (list.length === 0) {
        const notFound = Object.assign(new Error(`host not found: ${hostname}`), { code: 'ENOTFOUND' });
        return callback(notFound, '', 0);
      }
      if (!allowed) {
        for (const a of list) {
          const reason = blockedReason(a.address);
          if (reason) {
            onRefused?.(hostname, reason);
            const generic = `refused to connect to ${hostname}: not a public address (it resolves to a non-public one)`;
            return callback(new RefusedAddressError(generic), '', 0);
          }
        }
      }
      if (lookupOptions.all) return (callback as (e: null, a: dns.LookupAddress[]) => void)(null, list);
      const first = list[0]!;
      return callback(null, first.address, first.family);
    });
  };
}

/**
 * Cancels exchanges when their signal aborts. One listener per signal (the dispatcher passes the
 * same one to every delivery), not one per request: EventTarget listeners are added and removed in
 * a list, hundreds of them at a time.
 */
class Aborter {
  private readonly bySignal = new WeakMap<AbortSignal, Set<Exchange>>();

  /** false when the signal has aborted already (the exchange is cancelled, nothing is sent) */
  add(signal: AbortSignal, exchange: Exchange): boolean {
    if (signal.aborted) {
      exchange.cancel(stoppingError());
      return false;
    }
    let open = this.bySignal.get(signal);
    if (!open) {
      const exchanges = new Set<Exchange>();
      signal.addEventListener('abort', () => exchanges.forEach((e) => e.cancel(stoppingError())), { once: true });
      this.bySignal.set(signal, (open = exchanges));
    }
    open.add(exchange);
    return true;
  }

  remove(signal: AbortSignal, exchange: Exchange): void {
    this.bySignal.get(signal)?.delete(exchange);
  }
}

function stoppingError(): Error {
  return new Error('aborted: the dispatcher is stopping');
}

/** Where a URL is sent: its origin and path, its default concurrency key. */
interface Target {
  kind: 'target';
  /** https://host:port, the connection pool's key */
  origin: string;
  /** path and query */
  path: string;
  /** host:port */
  key: string;
  /** Basic credentials from the URL's user info, sent as Authorization (as node's https.request did) */
  authorization: string | null;
}

/** a URL that is not sent: not a URL, not https, or an address the policy refuses */
interface Unsendable {
  kind: 'unsendable';
  error: string;
  refused: boolean;
}

type TargetOrRefusal = Target | Unsendable;

const unsendable = (error: string, refused: boolean): Unsendable => ({ kind: 'unsendable', error, refused });

/** Most URLs whose Target is kept (cleared whole when full: the working set is the endpoints in use). */
const TARGET_CACHE_SIZE = 10_000;

/** how long an idle keep-alive connection is kept */
const KEEP_ALIVE_MS = 4000;

/** One attempt's end: the exchange that got an answer, or the error and whether it may go again. */
type AttemptResult = { ok: true; exchange: Exchange } | { ok: false; err: unknown; reconnect: boolean };

/** the socket was gone before the request got there: reset, broken pipe, or closed by the receiver */
function connectionLost(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  return code === 'ECONNRESET' || code === 'EPIPE' || code === 'UND_ERR_SOCKET';
}

/** `rawHeaders` as text: latin1, as node's http parser gives them, at most the pairs the detail keeps */
function rawHeaderText(raw: readonly Buffer[]): string[] {
  const n = Math.min(raw.length, DETAIL_MAX_HEADERS * 2);
  const text: string[] = new Array<string>(n);
  for (let i = 0; i < n; i++) text[i] = raw[i]!.toString('latin1');
  return text;
}

/** a failure before or without any answer */
function failure(requestHeaders: HeaderPairs, error: string, latencyMs: number, refused = false): SendResult {
  return {
    outcome: 'failed',
    statusCode: null,
    latencyMs,
    error,
    responseSnippet: null,
    refused,
    headers: {},
    truncated: false,
    requestHeaders,
    responseHeaders: [],
    responseBody: null,
  };
}

/** what a receiver's answer means: delivered for a 2xx, else failed naming why */
function answerResult(
  requestHeaders: HeaderPairs,
  answer: Exchange,
  latencyMs: number,
  snippetBytes: number,
): SendResult {
  const status = answer.statusCode;
  const data = answer.body();
  const snippet = data.length ? snippetText(data.subarray(0, snippetBytes)) : null;
  let error: string | null = null;
  if (status >= 300 && status < 400) {
    error = `redirects are not followed (HTTP ${status})`;
  } else if (status < 200 || status >= 300) {
    error = `receiver answered HTTP ${status}`;
  }
  return {
    outcome: error ? 'failed' : 'delivered',
    statusCode: status,
    latencyMs,
    error,
    responseSnippet: snippet,
    refused: false,
    headers: answer.headers,
    truncated: answer.truncated,
    requestHeaders,
    responseHeaders: boundedHeaderPairs(rawHeaderText(answer.rawHeaders)),
    responseBody: Buffer.from(data.subarray(0, DETAIL_RESPONSE_BODY_BYTES)),
  };
}

/** The sender: the connections, the per-endpoint semaphores and the limits, with one method per step of a send. */
class Sender implements HttpsSender {
  private readonly isAllowed: (host: string) => boolean;
  private readonly pool: ConnectionPool;
  private readonly aborter = new Aborter();
  private readonly semaphores = new Map<string, Semaphore>();
  /** URL → Target: parsing and checking a URL cost more than the rest of building a request */
  private readonly targets = new Map<string, TargetOrRefusal>();
  private readonly snippetBytes: number;
  private readonly maxResponseBytes: number;
  private active = 0;

  constructor(private readonly options: HttpsSenderOptions) {
    this.isAllowed = createHostAllowList(options.allowPrivateHosts ?? []);
    this.snippetBytes = options.snippetBytes ?? 512;
    this.maxResponseBytes = Math.max(options.maxResponseBytes ?? 64 * 1024, DETAIL_RESPONSE_BODY_BYTES);
    this.pool = new ConnectionPool({
      lookup: createGuardedLookup(options.lookup ?? dns.lookup, this.isAllowed, options.onRefused),
      timeoutMs: options.timeoutMs,
      keepAliveMs: KEEP_ALIVE_MS,
      // The per-endpoint limit is the semaphore below, keyed by endpoint; Discord and Slack webhooks
      // of many customers share one host and must not queue behind each other in the pool.
      maxIdlePerOrigin: options.maxConcurrencyPerEndpoint,
    });
  }

  inFlight(): number {
    return this.active;
  }

  close(): void {
    this.pool.close();
  }

  async send(request: SendRequest): Promise<SendResult> {
    const started = performance.now();
    const target = this.targetOf(request.url);
    const body = typeof request.body === 'string' ? Buffer.from(request.body, 'utf8') : request.body;
    const sentHeaders = requestHeaderPairs(request.headers, body);
    if (target.kind === 'unsendable')
      return failure(sentHeaders, target.error, Math.round(performance.now() - started), target.refused);
    const key = request.endpointKey ?? target.key;
    let sem = this.semaphores.get(key);
    if (!sem) this.semaphores.set(key, (sem = new Semaphore(this.options.maxConcurrencyPerEndpoint)));
    this.active++;
    await sem.acquire();
    const sendStarted = performance.now();
    const endsAt = sendStarted + this.options.timeoutMs;
    try {
      const result = await this.deliver(target, request, body, endsAt);
      const latencyMs = Math.round(performance.now() - sendStarted);
      if (result.ok) return answerResult(sentHeaders, result.exchange, latencyMs, this.snippetBytes);
      const { timeoutMs } = this.options;
      const error =
        performance.now() >= endsAt ? `timed out after ${timeoutMs} ms` : describeError(result.err, timeoutMs);
      return failure(sentHeaders, error, latencyMs, result.err instanceof RefusedAddressError);
    } finally {
      sem.release();
      if (sem.idle) this.semaphores.delete(key);
      this.active--;
    }
  }

  /** the Target of a URL (cached; the answer depends on the URL and the fixed options only) */
  private targetOf(url: string): TargetOrRefusal {
    let t = this.targets.get(url);
    if (t === undefined) {
      t = this.parseTarget(url);
      if (this.targets.size >= TARGET_CACHE_SIZE) this.targets.clear();
      this.targets.set(url, t);
    }
    return t;
  }

  /** where a URL is really sent, or why it is not: not a URL, not https, a literal address the policy refuses */
  private parseTarget(url: string): TargetOrRefusal {
    let target: URL;
    try {
      target = new URL(url);
      if (this.options.urlOverride) target = this.options.urlOverride(target);
    } catch {
      return unsendable('webhook URL is not a valid URL', false);
    }
    if (target.protocol !== 'https:') return unsendable(`webhook URL must use https (got ${target.protocol})`, true);
    const host = normalizeHostname(target.hostname);
    if (isIP(host) && !this.isAllowed(host)) {
      const reason = blockedReason(host);
      if (reason) return unsendable(`refused to connect to ${host}: ${reason}`, true);
    }
    const auth = target.username || target.password;
    const credentials = `${decodeURIComponent(target.username)}:${decodeURIComponent(target.password)}`;
    return {
      kind: 'target',
      origin: target.origin,
      path: `${target.pathname}${target.search}`,
      key: `${host}:${target.port || '443'}`,
      authorization: auth ? `Basic ${Buffer.from(credentials).toString('base64')}` : null,
    };
  }

  /** one attempt, and one more only on a keep-alive socket the receiver had already closed */
  private async deliver(target: Target, request: SendRequest, body: Buffer, endsAt: number): Promise<AttemptResult> {
    const first = await this.attempt(target, request, body, endsAt);
    // a reused socket that was gone before any answer: the request never reached the receiver
    if (!first.ok && first.reconnect && performance.now() < endsAt) return this.attempt(target, request, body, endsAt);
    return first;
  }

  /** one request on a pooled connection, ended by its answer, an error, the deadline or the signal */
  private attempt(target: Target, request: SendRequest, body: Buffer, endsAt: number): Promise<AttemptResult> {
    return new Promise((resolve) => {
      const conn = this.pool.acquire(target.origin);
      const reused = conn.open;
      const { signal } = request;
      const exchange: Exchange = new Exchange(this.maxResponseBytes, (result) => {
        clearTimeout(timer);
        if (signal) this.aborter.remove(signal, exchange);
        if (result.ok) {
          // a body cut at the read limit leaves the rest unread on the socket: not reusable
          this.pool.release(conn, !exchange.truncated);
          return resolve({ ok: true, exchange });
        }
        this.pool.drop(conn);
        const reconnect = reused && !exchange.responded && connectionLost(result.err);
        resolve({ ok: false, err: result.err, reconnect });
      });
      // one deadline for the whole delivery, also across the reconnect
      const timer = setTimeout(() => exchange.cancel(new DeadlineError()), Math.max(0, endsAt - performance.now()));
      if (signal && !this.aborter.add(signal, exchange)) return;
      const headers = target.authorization
        ? { ...request.headers, Authorization: target.authorization }
        : request.headers;
      conn.client.dispatch({ path: target.path, method: 'POST', headers, body }, exchange);
    });
  }
}

export function createHttpsSender(options: HttpsSenderOptions): HttpsSender {
  return new Sender(options);
}
