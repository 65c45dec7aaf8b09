/**
 * The gateway: the only public entry of the API, on a bare node:http server (no framework on the
 * hot path). Routes: GET /api/v1/openapi.json (public, no key, no quota), /healthz, /readyz,
 * /metrics (not logged), every other /api/v1/ path through the metered proxy (src/http/proxy.ts),
 * anything else a JSON 404. Usage and last-used times are flushed to PostgreSQL on a timer and on
 * close; close() finishes in-flight calls first.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import client from 'prom-client';
import {
  ApiError,
  NotFoundError,
  opsHandler,
  ServiceUnavailableError,
  type Logger,
  type ReadinessCheck,
} from '@sts/common';
import type { Plans } from '@sts/core';
import type { KeyStore } from './adapters/keys';
import type { QuotaStore } from './adapters/quota';
import { createUpstreamClient } from './adapters/upstream';
import { acceptRequestId } from './domain/limits';
import { openApiDocument } from './http/openapi';
import { createApiHandler, JSON_TYPE, sendError } from './http/proxy';

export interface GatewayOptions {
  keys: KeyStore;
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
  registry?: client.Registry;
  checks?: Record<string, ReadinessCheck>;
  /** how often usage and last-used times are written to PostgreSQL; default 1 s */
  flushIntervalMs?: number;
  /** how long close() waits for in-flight calls before cutting connections; default 10 s */
  shutdownGraceMs?: number;
  now?: () => Date;
}

export interface Gateway {
  server: http.Server;
  /** starts listening; resolves with the port (useful with port 0) */
  listen(port: number, host?: string): Promise<number>;
  /** stops accepting, finishes in-flight calls, writes pending usage */
  close(): Promise<void>;
  /** writes pending usage and last-used times now */
  flush(): Promise<void>;
}

const API_PREFIX = '/api/v1/';
const OPENAPI_PATH = '/api/v1/openapi.json';

export function createGateway(options: GatewayOptions): Gateway {
  const { keys, quota, logger } = options;
  const registry = options.registry ?? new client.Registry();
  const upstream = createUpstreamClient({
    url: options.readApiUrl,
    timeoutMs: options.upstreamTimeoutMs ?? 10_000,
    connectTimeoutMs: options.upstreamConnectTimeoutMs,
    maxSockets: options.upstreamMaxSockets,
  });
  const openapi = Buffer.from(JSON.stringify(openApiDocument));
  const requests = new client.Counter({
    name: 'gateway_requests_total',
    help: 'API answers by status class',
    labelNames: ['status'],
    registers: [registry],
  });
  const byClass = ['1xx', '2xx', '3xx', '4xx', '5xx'].map((c) => requests.labels(c));
  const count = (status: number) => byClass[Math.min(4, Math.max(0, Math.floor(status / 100) - 1))]!.inc();
  const ops = opsHandler({ checks: options.checks ?? {}, registry });
  const handleApi = createApiHandler({
    keys,
    quota,
    plans: options.plans,
    upstream,
    internalToken: options.internalToken,
    logger,
    now: options.now ?? (() => new Date()),
    count,
  });

  async function handle(req: http.IncomingMessage, res: http.ServerResponse, requestId: string): Promise<void> {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    if (path.startsWith(API_PREFIX)) {
      if (path !== OPENAPI_PATH) return handleApi(req, res, requestId);
      if (req.method === 'GET' || req.method === 'HEAD') {
        res.writeHead(200, {
          'content-type': JSON_TYPE,
          'content-length': openapi.length,
          'cache-control': 'public, max-age=300',
          'x-request-id': requestId,
        });
        res.end(req.method === 'HEAD' ? undefined : openapi);
        return;
      }
    } else if (await ops(req, res)) return;
    req.resume();
    count(
      sendError(
        res,
        new NotFoundError('NOT_FOUND', `no such endpoint: ${req.method ?? 'GET'} ${path.slice(0, 100)}`),
        requestId,
      ),
    );
  }

  const server = http.createServer((req, res) => {
    const requestId = acceptRequestId(req.headers['x-request-id']) ?? randomUUID();
    handle(req, res, requestId).catch((err: unknown) => {
      // Redis or PostgreSQL unreachable while authenticating or admitting the call
      logger.error('gateway request failed', {
        requestId,
        error: err instanceof Error ? err.message : String(err),
      });
      req.resume();
      if (res.headersSent) res.destroy();
      else
        count(
          sendError(
            res,
            err instanceof ApiError
              ? err
              : new ServiceUnavailableError('the service is unavailable, try again shortly', 1),
            requestId,
          ),
        );
    });
  });
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;

  const flushAll = async () => {
    await Promise.all([
      quota
        .flush()
        .catch((err: unknown) => logger.warn('usage write-through failed; will retry', { error: String(err) })),
      keys.flush().catch((err: unknown) => logger.warn('last-used update failed', { error: String(err) })),
    ]);
  };
  let flusher: NodeJS.Timeout | undefined;

  return {
    server,
    flush: flushAll,
    async listen(port, host = '0.0.0.0') {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => {
          server.off('error', reject);
          resolve();
        });
      });
      flusher = setInterval(() => void flushAll(), options.flushIntervalMs ?? 1000);
      flusher.unref();
      return (server.address() as AddressInfo).port;
    },
    async close() {
      clearInterval(flusher);
      if (server.listening) {
        const grace = setTimeout(() => server.closeAllConnections(), options.shutdownGraceMs ?? 10_000);
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeIdleConnections();
        });
        clearTimeout(grace);
      }
      upstream.close();
      await flushAll();
    },
  };
}
