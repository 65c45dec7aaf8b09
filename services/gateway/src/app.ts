/**
 * The gateway: the only public entry of the API, on its own lean HTTP/1.1 server (@sts/http1;
 * no framework and no node:http on the hot path). Routes: GET /api/v1/openapi.json (public, no
 * key, no quota), every other /api/v1/ path through the metered proxy (http/proxy.ts), anything
 * else a JSON 404 (/healthz, /readyz and /metrics live on the internal OPS_PORT: main.ts). Usage
 * and last-used times are flushed to PostgreSQL on a timer and on close; close() finishes
 * in-flight calls first and gives unused leased quota back to Redis.
 */
import type net from 'node:net';
import client from 'prom-client';
import { ApiError, NotFoundError, ServiceUnavailableError, type Logger } from '@sts/common';
import { errorMessage, type Plans } from '@sts/core';
import type { KeyStore } from './adapters/keys';
import type { QuotaStore } from './adapters/leasedQuota';
import { createUpstreamClient } from '@sts/http1';
import { openApiDocument } from './http/openapi';
import { createApiHandler, FORWARD_RESPONSE, JSON_TYPE, READ_REQUEST_HEADERS, sendError } from './http/proxy';
import { createHttpServer, type HttpRequest, type HttpResponder } from './http/http1';
import { createGatewayMetrics } from './metrics';
import { gatewaySettingDefaults } from './env';
import type { StreamHub } from './stream/hub';

export interface GatewayOptions {
  keys: KeyStore;
  /** GATEWAY_TRUSTED_PROXY_HOPS (client address for the unknown-key limit) */
  trustedProxyHops?: number;
  /** run after each usage write-through: records the quota thresholds crossed (adapters/quotaNotices.ts) */
  quotaNotices?: () => Promise<number>;
  quota: QuotaStore;
  plans: Plans;
  /** read-api's base URL */
  readApiUrl: string;
  internalToken: string;
  logger: Logger;
  /** overall deadline of a forwarded call; default 10 s */
  upstreamTimeoutMs?: number;
  /** deadline to open a connection to read-api; default min(upstreamTimeoutMs, 2 s) */
  upstreamConnectTimeoutMs?: number;
  /** most sockets open to read-api; default 128 */
  upstreamMaxSockets?: number;
  /** most GET/HEAD/OPTIONS calls of one event-loop turn pipelined on one socket to read-api; default 8, 1 turns it off */
  upstreamPipelineDepth?: number;
  /** only routes read-api answers within this many ms on average are pipelined; default 2 */
  upstreamPipelineMaxMs?: number;
  registry?: client.Registry;
  /** how often usage and last-used times are written to PostgreSQL; default 1 s */
  flushIntervalMs?: number;
  /** how long close() waits for in-flight calls before cutting connections; default 10 s */
  shutdownGraceMs?: number;
  now?: () => Date;
  /** serves GET /api/v1/stream (stream/hub.ts); without it the path goes to read-api like any other */
  streams?: StreamHub;
}

export interface Gateway {
  server: net.Server;
  /** starts listening; resolves with the port (useful with port 0) */
  listen(port: number, host?: string): Promise<number>;
  /** stops accepting, finishes in-flight calls, writes pending usage */
  close(): Promise<void>;
  /** writes pending usage and last-used times now */
  flush(): Promise<void>;
}

const API_PREFIX = '/api/v1/';

/**
 * gateway_requests_total (answers by status class). Counted in a plain array on the hot path (a
 * prom-client inc() costs a label lookup and a hash per call); the series catch up at each scrape.
 */
function createAnswerCounter(registry: client.Registry): (status: number) => void {
  const answered = [0, 0, 0, 0, 0];
  const scraped = [0, 0, 0, 0, 0];
  const requests: client.Counter<'status'> = new client.Counter({
    name: 'gateway_requests_total',
    help: 'API answers by status class',
    labelNames: ['status'],
    registers: [registry],
    collect() {
      for (let i = 0; i < 5; i++) {
        const n = answered[i]! - scraped[i]!;
        if (n > 0) byClass[i]!.inc(n);
        scraped[i] = answered[i]!;
      }
    },
  });
  const byClass = ['1xx', '2xx', '3xx', '4xx', '5xx'].map((c) => requests.labels(c));
  return (status) => {
    answered[Math.min(4, Math.max(0, Math.floor(status / 100) - 1))]!++;
  };
}
const OPENAPI_PATH = '/api/v1/openapi.json';

export function createGateway(options: GatewayOptions): Gateway {
  const { keys, quota, logger } = options;
  const registry = options.registry ?? new client.Registry();
  const upstream = createUpstreamClient({
    url: options.readApiUrl,
    timeoutMs: options.upstreamTimeoutMs ?? gatewaySettingDefaults.UPSTREAM_TIMEOUT_MS,
    connectTimeoutMs: options.upstreamConnectTimeoutMs,
    maxSockets: options.upstreamMaxSockets,
    pipelineDepth: options.upstreamPipelineDepth,
    pipelineMaxMs: options.upstreamPipelineMaxMs,
    keepHeaders: FORWARD_RESPONSE,
  });
  const openapi = Buffer.from(JSON.stringify(openApiDocument));
  const countAnswer = createAnswerCounter(registry);
  const metrics = createGatewayMetrics(registry);
  const answered = (req: HttpRequest, status: number, started: number) => {
    countAnswer(status);
    metrics.answered(req.path, status, started);
  };
  const handleApi = createApiHandler({
    keys,
    quota,
    plans: options.plans,
    upstream,
    internalToken: options.internalToken,
    logger,
    now: options.now ? () => options.now!().getTime() : Date.now,
    answered,
    rejected: metrics.rejected,
    trustedProxyHops: options.trustedProxyHops,
    stream: options.streams ? (call) => options.streams!.handle(call) : undefined,
  });

  function fail(err: unknown, req: HttpRequest, res: HttpResponder, started: number): void {
    // Redis or PostgreSQL unreachable while authenticating or admitting the call
    logger.error('gateway request failed', {
      requestId: req.requestId,
      err: errorMessage(err),
    });
    answered(
      req,
      sendError(
        res,
        err instanceof ApiError ? err : new ServiceUnavailableError('the service is unavailable, try again shortly', 1),
        req.requestId,
      ),
      started,
    );
  }

  function handle(req: HttpRequest, res: HttpResponder): void {
    const { path, method, requestId } = req;
    const started = performance.now();
    if (path.startsWith(API_PREFIX)) {
      if (path !== OPENAPI_PATH) {
        handleApi(req, res, (err) => fail(err, req, res, started), started);
        return;
      }
      if (method === 'GET' || method === 'HEAD') {
        res.send(
          200,
          `content-type: ${JSON_TYPE}\r\ncache-control: public, max-age=300\r\nx-request-id: ${requestId}\r\n`,
          openapi,
        );
        answered(req, 200, started);
        return;
      }
    }
    answered(
      req,
      sendError(res, new NotFoundError('NOT_FOUND', `no such endpoint: ${method} ${path.slice(0, 100)}`), requestId),
      started,
    );
  }

  const httpServer = createHttpServer({
    handler: handle,
    keepHeaders: READ_REQUEST_HEADERS,
    onHandlerError: (err, req) =>
      logger.error('gateway handler threw', {
        requestId: req.requestId,
        err: errorMessage(err),
      }),
  });

  const flushAll = async () => {
    await Promise.all([
      quota
        .flush()
        .then(() => options.quotaNotices?.())
        .catch((err: unknown) => logger.warn('usage write-through failed; will retry', { err: errorMessage(err) })),
      keys.flush().catch((err: unknown) => logger.warn('last-used update failed', { err: errorMessage(err) })),
    ]);
  };
  let flusher: NodeJS.Timeout | undefined;

  return {
    server: httpServer.server,
    flush: flushAll,
    async listen(port, host = '0.0.0.0') {
      const bound = await httpServer.listen(port, host);
      flusher = setInterval(() => void flushAll(), options.flushIntervalMs ?? gatewaySettingDefaults.USAGE_FLUSH_MS);
      flusher.unref();
      return bound;
    },
    async close() {
      clearInterval(flusher);
      options.streams?.close();
      await httpServer.close(options.shutdownGraceMs ?? gatewaySettingDefaults.SHUTDOWN_GRACE_MS);
      upstream.close();
      await Promise.all([
        quota.close().catch((err: unknown) => logger.warn('returning leased quota failed', { err: errorMessage(err) })),
        keys.flush().catch((err: unknown) => logger.warn('last-used update failed', { err: errorMessage(err) })),
      ]);
    },
  };
}
