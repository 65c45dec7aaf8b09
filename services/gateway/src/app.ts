/**
 * The gateway: the only public entry of the API. A bare node:http server (no framework on the hot
 * path): request id → API key (prefix + checksum checked before any lookup) → one Redis round
 * trip that admits the call against the per-minute limit and reserves a unit of the monthly quota
 * → forward to read-api over keep-alive HTTP with the internal headers → give the unit back when
 * the answer is not 2xx. Every answer carries the quota and rate-limit headers once the account
 * is known.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import client from 'prom-client';
import { Pool } from 'undici';
import {
  ApiError,
  NotFoundError,
  opsHandler,
  ServiceUnavailableError,
  toErrorResponse,
  UnauthorizedError,
  UpstreamError,
  type Logger,
  type ReadinessCheck,
} from '@sts/common';
import { hashApiKey, isWellFormedApiKey, type Plans } from '@sts/core';
import type { KeyStore } from './adapters/keys';
import type { QuotaStore } from './adapters/quota';
import { acceptRequestId, admissionRetryAfter, currentWindow, extractApiKey, limitHeaders } from './domain/limits';
import { openApiDocument } from './http/openapi';

export interface GatewayOptions {
  keys: KeyStore;
  quota: QuotaStore;
  plans: Plans;
  readApiUrl: string;
  internalToken: string;
  logger: Logger;
  upstreamTimeoutMs?: number;
  registry?: client.Registry;
  checks?: Record<string, ReadinessCheck>;
  /** how often usage and last-used times are written to PostgreSQL; default 500 ms */
  flushIntervalMs?: number;
  now?: () => Date;
}

export interface Gateway {
  server: http.Server;
  listen(port: number, host?: string): Promise<number>;
  close(): Promise<void>;
  /** writes pending usage and last-used times now */
  flush(): Promise<void>;
}

const JSON_TYPE = 'application/json; charset=utf-8';
const API_PREFIX = '/api/v1/';
const OPENAPI_PATH = '/api/v1/openapi.json';
// hop-by-hop and internal headers that never pass through
const DROP_REQUEST = new Set([
  'host',
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
  'te',
  'trailer',
  'authorization',
  'x-api-key',
  'x-request-id',
]);
const PASS_RESPONSE = [
  'content-type',
  'content-length',
  'allow',
  'retry-after',
  'cache-control',
  'etag',
  'last-modified',
];

export function createGateway(options: GatewayOptions): Gateway {
  const { keys, quota, plans, logger } = options;
  const upstream = new URL(options.readApiUrl);
  const timeoutMs = options.upstreamTimeoutMs ?? 10_000;
  const now = options.now ?? (() => new Date());
  const registry = options.registry ?? new client.Registry();
  // keep-alive connections to read-api; idle ones are dropped before read-api's 65 s keep-alive
  const pool = new Pool(upstream.origin, {
    connections: 256,
    keepAliveTimeout: 30_000,
    connectTimeout: Math.min(timeoutMs, 3000),
  });
  const openapi = Buffer.from(JSON.stringify(openApiDocument));
  const requests = new client.Counter({
    name: 'gateway_requests_total',
    help: 'API requests by status class',
    labelNames: ['status'],
    registers: [registry],
  });
  const ops = opsHandler({ checks: options.checks ?? {}, registry });

  function sendError(
    res: http.ServerResponse,
    err: unknown,
    requestId: string,
    extraHeaders: Record<string, string> = {},
  ): void {
    const { status, body, headers } = toErrorResponse(err, requestId);
    if (status >= 500 && !(err instanceof ApiError))
      logger.error('gateway error', { requestId, error: err instanceof Error ? err.message : String(err) });
    const text = JSON.stringify(body);
    res.writeHead(status, {
      ...extraHeaders,
      ...headers,
      'content-type': JSON_TYPE,
      'content-length': Buffer.byteLength(text),
      'x-request-id': requestId,
    });
    res.end(text);
    requests.inc({ status: `${Math.floor(status / 100)}xx` });
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const requestId = acceptRequestId(req.headers['x-request-id']) ?? randomUUID();
    const url = req.url ?? '/';
    const path = url.split('?', 1)[0]!;
    if (path === OPENAPI_PATH && (req.method === 'GET' || req.method === 'HEAD')) {
      res.writeHead(200, {
        'content-type': JSON_TYPE,
        'content-length': openapi.length,
        'x-request-id': requestId,
        'cache-control': 'public, max-age=300',
      });
      res.end(req.method === 'HEAD' ? undefined : openapi);
      return;
    }
    if (!path.startsWith(API_PREFIX)) {
      if (await ops(req, res)) return;
      req.resume();
      return sendError(
        res,
        new NotFoundError('NOT_FOUND', `no route for ${req.method ?? 'GET'} ${path.slice(0, 200)}`),
        requestId,
      );
    }

    // 1. the key: shape and checksum first, so malformed keys never reach a cache or the database
    const key = extractApiKey(req.headers.authorization, req.headers['x-api-key']);
    if (key === '') {
      req.resume();
      return sendError(
        res,
        new UnauthorizedError('missing API key: send Authorization: Bearer <key> or X-API-Key: <key>'),
        requestId,
      );
    }
    if (!isWellFormedApiKey(key)) {
      req.resume();
      return sendError(res, new UnauthorizedError('malformed API key'), requestId);
    }
    const identity = await keys.lookup(hashApiKey(key));
    if (!identity) {
      req.resume();
      return sendError(res, new UnauthorizedError('unknown or revoked API key'), requestId);
    }

    // 2. admission: per-minute limit and monthly quota, one Redis round trip
    const at = now();
    const nowEpoch = Math.floor(at.getTime() / 1000);
    const win = currentWindow(at);
    const limits = plans[identity.plan];
    const admitted = await quota.admit(
      identity.accountId,
      win.period,
      win.minute,
      limits.monthlyQuota,
      limits.perMinute,
    );
    keys.touch(identity.keyId);
    if (admitted.outcome !== 'ok') {
      req.resume();
      const headers = limitHeaders(limits, admitted, win, nowEpoch);
      const retryAfter = admissionRetryAfter(admitted.outcome, win, nowEpoch);
      const err =
        admitted.outcome === 'rate_limited'
          ? new ApiError(429, 'RATE_LIMIT_EXCEEDED', `rate limit of ${limits.perMinute} requests a minute exceeded`, {
              limit: limits.perMinute,
              remaining: 0,
              retry_after: retryAfter,
            })
          : new ApiError(429, 'QUOTA_EXCEEDED', `monthly quota of ${limits.monthlyQuota} calls used up`, {
              limit: limits.monthlyQuota,
              remaining: 0,
              retry_after: retryAfter,
            });
      return sendError(res, err, requestId, { ...headers, 'Retry-After': String(retryAfter) });
    }

    // 3. forward
    let settled = false;
    const settle = (success: boolean): Record<string, string> => {
      if (settled) return {};
      settled = true;
      if (success) quota.succeeded(identity.accountId, win.period);
      else
        quota
          .release(identity.accountId, win.period)
          .catch((err: unknown) => logger.warn('quota release failed', { requestId, error: String(err) }));
      return limitHeaders(
        limits,
        { monthUsed: admitted.monthUsed - (success ? 0 : 1), minuteUsed: admitted.minuteUsed },
        win,
        nowEpoch,
      );
    };
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (
        value === undefined ||
        DROP_REQUEST.has(name) ||
        name.startsWith('x-internal-') ||
        name.startsWith('x-account-')
      )
        continue;
      headers[name] = value;
    }
    headers['x-internal-token'] = options.internalToken;
    headers['x-account-id'] = identity.accountId;
    headers['x-account-plan'] = identity.plan;
    headers['x-request-id'] = requestId;

    try {
      const up = await pool.request({
        method: req.method === 'HEAD' ? 'HEAD' : req.method === 'POST' ? 'POST' : 'GET',
        path: url,
        headers,
        body: req.method === 'POST' ? req : null,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
      // API answers are small: collect them and answer with one write
      const body = Buffer.from(await up.body.arrayBuffer());
      const status = up.statusCode;
      const out: http.OutgoingHttpHeaders = settle(status >= 200 && status < 300);
      for (const name of PASS_RESPONSE)
        if (up.headers[name] !== undefined && name !== 'content-length') out[name] = up.headers[name];
      out['content-length'] = body.length;
      out['x-request-id'] = requestId;
      res.writeHead(status, out);
      res.end(body);
      requests.inc({ status: `${Math.floor(status / 100)}xx` });
    } catch (err) {
      req.resume();
      const code = (err as { code?: string }).code ?? '';
      const timedOut =
        code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT';
      const refused = [
        'ECONNREFUSED',
        'ECONNRESET',
        'EHOSTUNREACH',
        'ENOTFOUND',
        'UND_ERR_SOCKET',
        'UND_ERR_CLOSED',
      ].includes(code);
      const apiErr = timedOut
        ? new UpstreamError('the read API did not answer in time', 504)
        : refused
          ? new ServiceUnavailableError('the read API is unavailable', 1)
          : new UpstreamError('the read API failed');
      if (res.headersSent) res.destroy();
      else sendError(res, apiErr, requestId, settle(false));
    }
  }

  const server = http.createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent)
        sendError(
          res,
          err instanceof ApiError ? err : new ServiceUnavailableError(),
          acceptRequestId(req.headers['x-request-id']) ?? randomUUID(),
        );
      else res.destroy();
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
        server.listen(port, host, () => resolve());
      });
      flusher = setInterval(() => void flushAll(), options.flushIntervalMs ?? 500);
      flusher.unref();
      return (server.address() as AddressInfo).port;
    },
    async close() {
      clearInterval(flusher);
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      });
      await pool.close();
      await flushAll();
    },
  };
}
