/**
 * The HTTP client to read-api: one keep-alive `http.Agent` (bounded sockets, LIFO reuse, idle
 * sockets closed before read-api's own keep-alive timeout), a connect timeout and an overall
 * deadline per call. Answers are small JSON documents, so the body is collected and handed back
 * whole (the gateway answers in one write).
 *
 * Failures are classified for the caller: `unavailable` (nothing listening: refused, reset, no
 * route) → 503, `timeout` (no connection or no complete answer in time) → 504, `failed` → 502.
 * A GET/HEAD that meets a keep-alive socket the server has just closed is retried once on a new
 * socket (the usual race of keep-alive clients); nothing else is retried.
 */
import http from 'node:http';
import https from 'node:https';

export type UpstreamFailureKind = 'unavailable' | 'timeout' | 'failed';

export class UpstreamFailure extends Error {
  override name = 'UpstreamFailure';
  constructor(
    readonly kind: UpstreamFailureKind,
    message: string,
    readonly causeCode?: string,
  ) {
    super(message);
  }
  /** set when the call may be sent again (an idempotent call on a stale keep-alive socket) */
  retryable = false;
}

export interface UpstreamAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

export interface UpstreamClient {
  /** forwards one call; `body` is piped for POST-like methods, null otherwise */
  forward(
    method: string,
    path: string,
    headers: http.OutgoingHttpHeaders,
    body: http.IncomingMessage | null,
  ): Promise<UpstreamAnswer>;
  /** closes the sockets; call once in-flight calls are done */
  close(): void;
}

export interface UpstreamOptions {
  /** base URL of read-api, e.g. http://127.0.0.1:3002 */
  url: string;
  /** overall deadline of one call, connect to last byte */
  timeoutMs: number;
  /** deadline for opening a new connection; default min(timeoutMs, 2000) */
  connectTimeoutMs?: number;
  /** most sockets open to read-api at once; default 128 */
  maxSockets?: number;
  /** idle keep-alive sockets are closed after this; default 30 s (read-api keeps them 65 s) */
  idleSocketMs?: number;
}

const UNAVAILABLE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
]);

function classify(err: NodeJS.ErrnoException): UpstreamFailure {
  if (err instanceof UpstreamFailure) return err;
  const code = err.code ?? '';
  if (UNAVAILABLE.has(code)) return new UpstreamFailure('unavailable', `read-api unreachable (${code})`, code);
  return new UpstreamFailure('failed', `read-api call failed (${code || err.message})`, code);
}

export function createUpstreamClient(opts: UpstreamOptions): UpstreamClient {
  const base = new URL(opts.url);
  const secure = base.protocol === 'https:';
  const transport = secure ? https : http;
  const maxSockets = opts.maxSockets ?? 128;
  const agent = new transport.Agent({
    keepAlive: true,
    maxSockets,
    maxFreeSockets: maxSockets,
    scheduling: 'lifo',
    timeout: opts.idleSocketMs ?? 30_000,
  });
  const hostname = base.hostname;
  const port = base.port === '' ? (secure ? 443 : 80) : Number(base.port);
  const connectTimeoutMs = opts.connectTimeoutMs ?? Math.min(opts.timeoutMs, 2000);

  function once(
    method: string,
    path: string,
    headers: http.OutgoingHttpHeaders,
    body: http.IncomingMessage | null,
    deadline: number,
  ): Promise<UpstreamAnswer> {
    return new Promise((resolve, reject) => {
      let settled = false;
      let connectTimer: NodeJS.Timeout | undefined;
      const req = transport.request({ agent, hostname, port, method, path, headers });
      const finish = (err: UpstreamFailure | null, answer?: UpstreamAnswer) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        clearTimeout(connectTimer);
        if (err) {
          req.destroy();
          reject(err);
        } else resolve(answer!);
      };
      const timer = setTimeout(
        () => finish(new UpstreamFailure('timeout', 'read-api did not answer in time')),
        Math.max(1, deadline - Date.now()),
      );
      req.on('socket', (socket) => {
        if (!socket.connecting) return;
        connectTimer = setTimeout(
          () => finish(new UpstreamFailure('timeout', 'read-api did not accept a connection in time')),
          connectTimeoutMs,
        );
        socket.once('connect', () => clearTimeout(connectTimer));
      });
      req.on('error', (err: NodeJS.ErrnoException) => {
        const failure = classify(err);
        // a kept-alive socket the server closed under us: safe to retry an idempotent call once
        if (req.reusedSocket && failure.causeCode === 'ECONNRESET' && body === null) failure.retryable = true;
        finish(failure);
      });
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          finish(null, {
            status: res.statusCode ?? 502,
            headers: res.headers,
            body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks),
          }),
        );
        res.on('error', (err: NodeJS.ErrnoException) => finish(classify(err)));
      });
      if (body) body.pipe(req);
      else req.end();
    });
  }

  return {
    async forward(method, path, headers, body) {
      const deadline = Date.now() + opts.timeoutMs;
      try {
        return await once(method, path, headers, body, deadline);
      } catch (err) {
        if (err instanceof UpstreamFailure && err.retryable && Date.now() < deadline)
          return once(method, path, headers, body, deadline);
        throw err;
      }
    },
    close() {
      agent.destroy();
    },
  };
}
