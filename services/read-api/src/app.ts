/**
 * The read-api HTTP server: a bare node:http server with a small router (no framework on the hot
 * path). It sits behind the gateway and answers only requests that carry the shared internal
 * token; the caller's account comes from the gateway's x-account-id / x-account-plan headers.
 * /healthz, /readyz and /metrics are not served here: they live on the internal OPS_PORT (main.ts).
 */
import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import { traceIncoming } from '@sts/telemetry';
import type { Socket } from 'node:net';
import client from 'prom-client';
import { listenOn, toErrorResponse, UnauthorizedError, type Logger } from '@sts/common';
import type { Db } from '@sts/db';
import type { SocialSource } from '@sts/social';
import { DEFAULT_PLAN_RETENTION, type Retention } from '@sts/core';
import { createMonitorRepository, type MonitorRepository } from './adapters/monitors';
import { createCoverageReader } from './adapters/coverage';
import { createEventLog } from './adapters/events';
import { coverageRoutes } from './http/coverage';
import { isUuid, parseQuery } from './domain/params';
import { toApiError } from './http/errors';
import { apiRoutes } from './http/handlers';
import { createRouter, type HandlerResult, type RequestContext } from './http/router';
import { manageRoutes, type ManageDeps } from './manage/routes';
import { createUserCache } from './http/userCache';
import { readApiSettingDefaults } from './env';

export interface ReadApiOptions {
  db: Db;
  source: SocialSource;
  /** the shared secret the gateway sends in x-internal-token */
  internalToken: string;
  logger: Logger;
  /** Prometheus registry for the request metrics; a private one when absent */
  registry?: client.Registry;
  /** how long user lookups are cached; default 5000 ms, 0 turns the cache off */
  userCacheTtlMs?: number;
  /** how long close() waits for in-flight requests before cutting connections; default 10 000 ms */
  shutdownGraceMs?: number;
  /** the monitor/hit store; defaults to PostgreSQL through `db` */
  monitors?: MonitorRepository;
  /** the management endpoints' use-cases and Idempotency-Key store; without them those paths are 404 */
  manage?: Omit<ManageDeps, 'monitors' | 'events' | 'retention'>;
  /** how far back each plan sees its hits (retentionFromEnv); default DEFAULT_PLAN_RETENTION */
  retention?: Retention;
}

export interface ReadApi {
  server: http.Server;
  /** starts listening; resolves with the bound port (pass 0 for any free port) */
  listen(port: number, host?: string): Promise<number>;
  /** stops accepting, finishes in-flight requests, closes idle keep-alive connections */
  close(): Promise<void>;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const JSON_TYPE = 'application/json; charset=utf-8';

function sha256(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/** the JSON error for a request node:http could not read (written raw: there is no ServerResponse) */
function clientErrorAnswer(err: NodeJS.ErrnoException): string {
  const status = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
  const body = JSON.stringify({
    error:
      status === 431
        ? 'request headers are too large'
        : status === 408
          ? 'request timed out'
          : 'malformed HTTP request',
    code: status === 408 ? 'REQUEST_TIMEOUT' : 'INVALID_REQUEST',
    request_id: randomUUID(),
  });
  return `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\ncontent-type: ${JSON_TYPE}\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`;
}

/**
 * The answers of one server, in order per connection. The gateway pipelines GETs, so a
 * connection may have several requests taken up at once; node:http writes their answers in
 * request order. While closing, a connection's last pending answer carries `connection: close`;
 * a request node:http could not read is answered (then the connection ends) only after the
 * answers still owed before it.
 */
interface Answers {
  /** a request was taken up on `socket` */
  taken(socket: Socket): void;
  /** `started`: performance.now() when the request was taken up; its handling time goes out as Server-Timing */
  send(
    res: http.ServerResponse,
    status: number,
    json: string,
    requestId: string,
    started: number,
    headers?: Record<string, string>,
  ): void;
  /** node:http could not read a request on `socket` (the server's 'clientError') */
  clientError(err: NodeJS.ErrnoException, socket: Socket): void;
  /** from now on, each connection's last pending answer closes it */
  closing(): void;
}

function createAnswers(): Answers {
  let closing = false;
  /** API requests received and not yet answered, per connection */
  const pendingOn = new WeakMap<Socket, number>();
  /** the error answer a connection gets (then it closes) once its pending answers are out */
  const owedError = new WeakMap<Socket, string>();
  return {
    taken: (socket) => pendingOn.set(socket, (pendingOn.get(socket) ?? 0) + 1),
    closing: () => {
      closing = true;
    },
    send(res, status, json, requestId, started, headers = {}) {
      const out: http.OutgoingHttpHeaders = {
        'content-type': JSON_TYPE,
        'content-length': Buffer.byteLength(json),
        'cache-control': 'no-store',
        'x-content-type-options': 'nosniff',
        'x-request-id': requestId,
        // read by the gateway to decide which calls it may pipeline (it does not pass it on)
        'server-timing': `app;dur=${(performance.now() - started).toFixed(2)}`,
        ...headers,
      };
      // while closing, the connection's last pending answer says so; answers to requests pipelined
      // behind it must still go out first (node:http drops them once a close-marked answer is sent)
      // the request's socket: res.socket is null while an answer waits behind earlier ones
      const socket: Socket | null = res.req.socket;
      const left = socket ? (pendingOn.get(socket) ?? 1) - 1 : 0;
      if (socket) pendingOn.set(socket, left);
      if (closing && left <= 0) out.connection = 'close';
      res.writeHead(status, out).end(json);
      if (left <= 0 && socket) {
        const owed = owedError.get(socket);
        // node:http writes answers in request order: when the last one owed is finished, those
        // before it have been written (and any still buffered behind it are flushed by node:http
        // on this same 'finish', before this listener runs)
        if (owed !== undefined) res.once('finish', () => socket.end(owed));
      }
    },
    clientError(err, socket) {
      if (owedError.has(socket)) return; // already answering this connection's error
      if (err.code === 'ECONNRESET' || !socket.writable) {
        socket.destroy();
        return;
      }
      const answer = clientErrorAnswer(err);
      // requests read before the bad one still get their answers first, in order (the gateway
      // pipelines calls of several clients on one connection): the error goes out after the last
      if ((pendingOn.get(socket) ?? 0) > 0) owedError.set(socket, answer);
      else socket.end(answer);
    },
  };
}

interface ApiHandlerDeps {
  match: ReturnType<typeof createRouter>;
  /** sha256 of the internal token */
  tokenDigest: Buffer;
  answers: Answers;
  duration: client.Histogram<'method' | 'route' | 'status'>;
  logger: Logger;
}

/** One API request: token, route, handler, answer (or the mapped error), metrics and the access log. */
function createApiHandler(
  deps: ApiHandlerDeps,
): (req: http.IncomingMessage, res: http.ServerResponse, url: string) => Promise<void> {
  const { match, tokenDigest, answers, duration, logger } = deps;
  const tokenOk = (value: string | string[] | undefined) =>
    typeof value === 'string' && timingSafeEqual(sha256(value), tokenDigest);

  return async function handleApi(req, res, url) {
    const started = performance.now();
    answers.taken(req.socket);
    const given = req.headers['x-request-id'];
    const requestId = typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    const method = req.method ?? 'GET';
    let route = 'unmatched';
    let status = 500;
    try {
      if (!tokenOk(req.headers['x-internal-token'])) throw new UnauthorizedError('missing or invalid internal token');
      const q = url.indexOf('?');
      const path = q === -1 ? url : url.slice(0, q);
      const m = match(method, path);
      route = m.pattern;
      const account = req.headers['x-account-id'];
      const plan = req.headers['x-account-plan'];
      const ctx: RequestContext = {
        req,
        requestId,
        accountId: typeof account === 'string' && isUuid(account) ? account.toLowerCase() : null,
        plan: typeof plan === 'string' ? plan : null,
        scope: req.headers['x-key-scope'] === 'manage' ? 'manage' : 'read',
        params: m.params,
        query: parseQuery(q === -1 ? '' : url.slice(q + 1)),
      };
      const result: HandlerResult = await m.handler(ctx);
      status = result.status;
      answers.send(res, status, result.json ?? JSON.stringify(result.body), requestId, started, result.headers);
    } catch (err) {
      const apiError = toApiError(err);
      const mapped = toErrorResponse(apiError ?? err, requestId);
      status = mapped.status;
      if (!apiError) logger.error('request failed', { requestId, method, route, err });
      else if (status >= 500) logger.warn('request failed', { requestId, method, route, code: mapped.body.code, err });
      if (res.headersSent) res.destroy();
      else answers.send(res, status, JSON.stringify(mapped.body), requestId, started, mapped.headers);
    }
    const ms = performance.now() - started;
    duration.observe({ method, route, status }, ms / 1000);
    // winston runs its formats (timestamp, trace ids, redaction, JSON) before it drops a line
    // below the level, so the level is checked first: no access line is built when info is off (README
    // "Performance")
    if (!logger.isLevelEnabled('info')) return;
    logger.info('request', {
      requestId,
      method,
      path: url.length > 200 ? `${url.slice(0, 200)}…` : url,
      route,
      status,
      durationMs: Math.round(ms * 100) / 100,
    });
  };
}

/** The node:http server: request targets normalised to origin-form, timeouts, malformed requests answered in JSON. */
function createNodeServer(
  handleApi: (req: http.IncomingMessage, res: http.ServerResponse, url: string) => Promise<void>,
  answers: Answers,
): http.Server {
  // OpenTelemetry: continues the gateway's trace (traceparent) in a SERVER span when tracing is on
  const handle = traceIncoming(
    'read-api',
    (req: http.IncomingMessage, res: http.ServerResponse) => {
      let url = req.url ?? '/';
      if (!url.startsWith('/')) {
        // absolute-form request targets (proxies): keep only the path and query
        const m = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i.exec(url);
        url = m ? url.slice(m[0].length) || '/' : `/${url}`;
      }
      void handleApi(req, res, url);
    },
    (res, done) => res.once('finish', () => done(res.statusCode)),
  );
  const server = http.createServer({ keepAlive: true }, handle);
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  server.requestTimeout = 120_000;
  // malformed HTTP (bad request line, oversized headers): a JSON 4xx, never Node's bare answer
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => answers.clientError(err, socket));
  return server;
}

export function createReadApi(options: ReadApiOptions): ReadApi {
  const { db, source, logger } = options;
  if (!options.internalToken || options.internalToken.length < 16) {
    throw new Error('internalToken must be at least 16 characters');
  }
  const registry = options.registry ?? new client.Registry();
  const duration = new client.Histogram({
    name: 'read_api_http_request_duration_seconds',
    help: 'read-api request duration by route, method and status',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });
  const monitors = options.monitors ?? createMonitorRepository(db);
  const users = createUserCache(source, { ttlMs: options.userCacheTtlMs ?? readApiSettingDefaults.USER_CACHE_TTL_MS });
  const retention = options.retention ?? DEFAULT_PLAN_RETENTION;
  const routes = [...apiRoutes({ source, monitors, users, retention }), ...coverageRoutes(createCoverageReader(db))];
  if (options.manage)
    routes.push(...manageRoutes({ ...options.manage, monitors, events: createEventLog(db), retention }));
  const match = createRouter(routes);
  const answers = createAnswers();
  const handleApi = createApiHandler({ match, tokenDigest: sha256(options.internalToken), answers, duration, logger });
  const server = createNodeServer(handleApi, answers);

  return {
    server,
    listen: (port, host) => listenOn(server, port, host),
    close() {
      answers.closing();
      if (!server.listening) return Promise.resolve();
      return new Promise<void>((resolve) => {
        const force = setTimeout(
          () => server.closeAllConnections(),
          options.shutdownGraceMs ?? readApiSettingDefaults.SHUTDOWN_GRACE_MS,
        );
        force.unref();
        server.close(() => {
          clearTimeout(force);
          resolve();
        });
        server.closeIdleConnections();
      });
    },
  };
}
