/**
 * Sends one webhook POST over HTTPS, with the address policy enforced on the address actually
 * dialled: a custom `lookup` checks every address DNS returns before the socket connects (so a
 * name that re-resolves to an internal address, DNS rebinding, is refused too), and literal IP
 * hosts are checked before the request starts. Hosts in the allow list skip the check.
 *
 * Keep-alive agent (one pool per endpoint, at most WEBHOOK_MAX_CONCURRENCY_PER_ENDPOINT sockets,
 * idle sockets closed after 4 s), a per-endpoint semaphore so at most that many deliveries to one
 * endpoint are in flight, a whole-request deadline, no redirects followed, response bodies read
 * up to 64 KiB (the first 512 bytes kept as the snippet). One transparent reconnect happens only
 * when a reused keep-alive socket turns out closed before any response (the request never
 * reached the receiver); there are no other retries.
 */
import dns from 'node:dns';
import https from 'node:https';
import type { ClientRequest, IncomingMessage } from 'node:http';
import { isIP, type LookupFunction } from 'node:net';
import { performance } from 'node:perf_hooks';
import { blockedReason, createHostAllowList, normalizeHostname } from '../domain/addressPolicy';

export interface SendRequest {
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
   * Told the detail of a refused address (which address, which range). The delivery log and the
   * customer see only a generic reason: the resolved addresses would map the internal network.
   */
  onRefused?: (host: string, detail: string) => void;
}

export interface HttpsSender {
  send(request: SendRequest): Promise<SendResult>;
  /** deliveries in flight (including those waiting for their endpoint's semaphore) */
  inFlight(): number;
  close(): void;
}

export class RefusedAddressError extends Error {
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
export function snippetText(buf: Buffer): string {
  return buf
    .toString('utf8')
    .replace(/\uFFFD+$/, '')
    .replaceAll(String.fromCharCode(0), '');
}

// eslint-disable-next-line max-lines-per-function -- a factory of closures (guarded lookup, one attempt, send) sharing the agent and the limits
export function createHttpsSender(options: HttpsSenderOptions): HttpsSender {
  const isAllowed = createHostAllowList(options.allowPrivateHosts ?? []);
  const baseLookup: LookupFunction = options.lookup ?? dns.lookup;
  const snippetBytes = options.snippetBytes ?? 512;
  const maxResponseBytes = options.maxResponseBytes ?? 64 * 1024;
  const perEndpoint = options.maxConcurrencyPerEndpoint;

  /** the only path from a host name to an address this sender connects to */
  const guardedLookup: LookupFunction = (hostname, lookupOptions, callback) => {
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
            options.onRefused?.(hostname, reason);
            return callback(
              new RefusedAddressError(
                `refused to connect to ${hostname}: not a public address (it resolves to a non-public one)`,
              ),
              '',
              0,
            );
          }
        }
      }
      if (lookupOptions.all) return (callback as (e: null, a: dns.LookupAddress[]) => void)(null, list);
      const first = list[0]!;
      return callback(null, first.address, first.family);
    });
  };

  const agent = new https.Agent({
    keepAlive: true,
    keepAliveMsecs: 1000,
    // The per-endpoint limit is the semaphore below, keyed by endpoint; Discord and Slack webhooks
    // of many customers share one host, and must not queue behind each other inside the agent.
    maxSockets: Infinity,
    maxFreeSockets: perEndpoint,
    scheduling: 'lifo',
    timeout: 4000,
    lookup: guardedLookup,
  });
  const semaphores = new Map<string, Semaphore>();
  // One listener per signal (the dispatcher passes the same one to every delivery), not one per
  // request: EventTarget listeners are added and removed in a list, hundreds of them at a time.
  const requestsBySignal = new WeakMap<AbortSignal, Set<ClientRequest>>();
  function abortWith(signal: AbortSignal, req: ClientRequest): void {
    const destroy = (r: ClientRequest) => void r.destroy(new Error('aborted: the dispatcher is stopping'));
    if (signal.aborted) return destroy(req);
    let open = requestsBySignal.get(signal);
    if (!open) {
      const requests = new Set<ClientRequest>();
      signal.addEventListener('abort', () => requests.forEach(destroy), { once: true });
      requestsBySignal.set(signal, (open = requests));
    }
    const set = open;
    set.add(req);
    req.once('close', () => set.delete(req));
  }
  let inFlight = 0;

  function attempt(
    target: URL,
    request: SendRequest,
    body: Buffer,
    deadline: { timer?: NodeJS.Timeout; endsAt: number },
  ): Promise<{ res: IncomingMessage; data: Buffer; truncated: boolean }> {
    return new Promise((resolve, reject) => {
      const req = https.request(
        target,
        {
          method: 'POST',
          agent,
          lookup: guardedLookup,
          headers: { ...request.headers, 'Content-Length': String(body.length) },
        },
        (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          let truncated = false;
          res.on('data', (chunk: Buffer) => {
            if (truncated) return;
            size += chunk.length;
            chunks.push(chunk);
            if (size > maxResponseBytes) {
              // Settle first: destroying the response emits 'aborted' at once, and that must not
              // turn a read-limit cut into a failure (the status and headers are already here).
              truncated = true;
              resolve({ res, data: Buffer.concat(chunks), truncated });
              res.destroy();
            }
          });
          res.on('end', () => resolve({ res, data: Buffer.concat(chunks), truncated }));
          res.on('error', (err) => (truncated ? undefined : reject(err)));
          res.on('aborted', () => (truncated ? undefined : reject(new Error('response aborted'))));
        },
      );
      req.on('error', (err) => {
        (err as { reusedSocket?: boolean }).reusedSocket = req.reusedSocket;
        reject(err);
      });
      if (request.signal) abortWith(request.signal, req);
      // one deadline for the whole delivery, also across the reconnect below
      clearTimeout(deadline.timer);
      deadline.timer = setTimeout(
        () => req.destroy(new DeadlineError()),
        Math.max(0, deadline.endsAt - performance.now()),
      );
      req.end(body);
    });
  }

  async function send(request: SendRequest): Promise<SendResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const fail = (error: string, refused = false): SendResult => ({
      outcome: 'failed',
      statusCode: null,
      latencyMs: elapsed(),
      error,
      responseSnippet: null,
      refused,
      headers: {},
      truncated: false,
    });
    let target: URL;
    try {
      target = new URL(request.url);
      if (options.urlOverride) target = options.urlOverride(target);
    } catch {
      return fail('webhook URL is not a valid URL');
    }
    if (target.protocol !== 'https:') return fail(`webhook URL must use https (got ${target.protocol})`, true);
    const host = normalizeHostname(target.hostname);
    if (isIP(host) && !isAllowed(host)) {
      const reason = blockedReason(host);
      // an address the customer wrote: naming its range tells them nothing they did not know
      if (reason) return fail(`refused to connect to ${host}: ${reason}`, true);
    }
    const body = typeof request.body === 'string' ? Buffer.from(request.body, 'utf8') : request.body;
    const key = request.endpointKey ?? `${host}:${target.port || '443'}`;
    let sem = semaphores.get(key);
    if (!sem) semaphores.set(key, (sem = new Semaphore(perEndpoint)));
    inFlight++;
    await sem.acquire();
    const sendStarted = performance.now();
    const deadline: { timer?: NodeJS.Timeout; endsAt: number } = { endsAt: sendStarted + options.timeoutMs };
    try {
      let result: { res: IncomingMessage; data: Buffer; truncated: boolean };
      try {
        result = await attempt(target, request, body, deadline);
      } catch (err) {
        const e = err as NodeJS.ErrnoException & { reusedSocket?: boolean };
        // a keep-alive socket the receiver had already closed: the request never got there
        if (e.reusedSocket && (e.code === 'ECONNRESET' || e.code === 'EPIPE') && performance.now() < deadline.endsAt) {
          result = await attempt(target, request, body, deadline);
        } else throw err;
      }
      const latencyMs = Math.round(performance.now() - sendStarted);
      const status = result.res.statusCode ?? 0;
      const snippet = result.data.length ? snippetText(result.data.subarray(0, snippetBytes)) : null;
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
        headers: result.res.headers,
        truncated: result.truncated,
      };
    } catch (err) {
      return {
        outcome: 'failed',
        statusCode: null,
        latencyMs: Math.round(performance.now() - sendStarted),
        error:
          performance.now() >= deadline.endsAt
            ? `timed out after ${options.timeoutMs} ms`
            : describeError(err, options.timeoutMs),
        responseSnippet: null,
        refused: err instanceof RefusedAddressError,
        headers: {},
        truncated: false,
      };
    } finally {
      clearTimeout(deadline.timer);
      sem.release();
      if (sem.idle) semaphores.delete(key);
      inFlight--;
    }
  }

  return {
    send,
    inFlight: () => inFlight,
    close: () => agent.destroy(),
  };
}
