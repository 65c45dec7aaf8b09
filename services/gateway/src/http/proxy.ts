/**
 * The hot path of one API call: key → admission (one Redis round trip) → forward to read-api →
 * settle the reserved unit → answer in one write with the limit headers.
 *
 * Steady state does no database query and one Redis round trip per call: the key's identity comes
 * from the in-process cache (refreshed from Redis / PostgreSQL every KEY_CACHE_TTL_MS), usage and
 * last-used times are written to PostgreSQL in batches by the gateway's flush timer.
 */
import type http from 'node:http';
import {
  ServiceUnavailableError,
  toErrorResponse,
  UnauthorizedError,
  UpstreamError,
  type ApiError,
  type Logger,
} from '@sts/common';
import { hashApiKey, isWellFormedApiKey, type Plans } from '@sts/core';
import type { KeyStore } from '../adapters/keys';
import type { QuotaStore } from '../adapters/quota';
import { UpstreamFailure, type UpstreamClient } from '../adapters/upstream';
import { createWindowClock, extractApiKey, limitHeaders, refusal } from '../domain/limits';

export const JSON_TYPE = 'application/json; charset=utf-8';

/** client headers read-api may use; everything else (x-internal-*, x-account-*, cookies…) stays here */
const FORWARD_REQUEST = ['accept', 'user-agent'] as const;
/** and, for a call with a body, the headers that describe it */
const FORWARD_BODY = ['content-type', 'content-length', 'transfer-encoding'] as const;
const FORWARD_RESPONSE = ['content-type', 'allow', 'retry-after', 'cache-control', 'etag', 'last-modified'] as const;
const WITH_BODY = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

export interface ApiHandlerDeps {
  keys: KeyStore;
  quota: QuotaStore;
  plans: Plans;
  upstream: UpstreamClient;
  internalToken: string;
  logger: Logger;
  now: () => Date;
  /** counts an answer by status class */
  count: (status: number) => void;
}

export type ApiHandler = (req: http.IncomingMessage, res: http.ServerResponse, requestId: string) => Promise<void>;

/** Writes an error body `{error, code, request_id, ...}` with the given extra headers. */
export function sendError(
  res: http.ServerResponse,
  err: unknown,
  requestId: string,
  extraHeaders: Record<string, string> = {},
): number {
  const { status, body, headers } = toErrorResponse(err, requestId);
  const text = JSON.stringify(body);
  res.writeHead(status, {
    ...extraHeaders,
    ...headers,
    'content-type': JSON_TYPE,
    'content-length': Buffer.byteLength(text),
    'x-request-id': requestId,
  });
  res.end(text);
  return status;
}

function upstreamError(err: unknown): ApiError {
  if (err instanceof UpstreamFailure) {
    if (err.kind === 'unavailable') return new ServiceUnavailableError('the read API is unavailable', 1);
    if (err.kind === 'timeout') return new UpstreamError('the read API did not answer in time', 504);
  }
  return new UpstreamError('the read API failed', 502);
}

export function createApiHandler(deps: ApiHandlerDeps): ApiHandler {
  const { keys, quota, plans, upstream, logger, count } = deps;
  const windowAt = createWindowClock();
  const debug = logger.isLevelEnabled('debug');

  const refuse = (res: http.ServerResponse, req: http.IncomingMessage, err: unknown, requestId: string) => {
    req.resume();
    count(sendError(res, err, requestId));
  };

  return async function handleApi(req, res, requestId) {
    // 1. the key: shape and checksum first, so malformed keys never reach a cache or the database
    const key = extractApiKey(req.headers.authorization, req.headers['x-api-key']);
    if (key === '')
      return refuse(
        res,
        req,
        new UnauthorizedError('missing API key: send Authorization: Bearer <key> or X-API-Key: <key>'),
        requestId,
      );
    if (!isWellFormedApiKey(key)) return refuse(res, req, new UnauthorizedError('malformed API key'), requestId);
    const hash = hashApiKey(key);
    let identity = keys.peek(hash);
    if (identity === undefined) identity = await keys.lookup(hash);
    if (identity === null) return refuse(res, req, new UnauthorizedError('unknown or revoked API key'), requestId);

    // 2. admission: per-minute limit and monthly quota in one Redis round trip
    const at = deps.now().getTime();
    const nowEpoch = Math.floor(at / 1000);
    const win = windowAt(at);
    const limits = plans[identity.plan];
    const { accountId } = identity;
    const admitted = await quota.admit(accountId, win.period, win.minute, limits.monthlyQuota, limits.perMinute);
    keys.touch(identity.keyId);
    if (admitted.outcome !== 'ok') {
      req.resume();
      const { error, headers } = refusal(admitted.outcome, limits, admitted, win, nowEpoch);
      count(sendError(res, error, requestId, headers));
      return;
    }

    // 3. forward with the internal headers (client-sent x-internal-*/x-account-* never pass)
    const method = req.method ?? 'GET';
    const headers: http.OutgoingHttpHeaders = {
      'x-internal-token': deps.internalToken,
      'x-account-id': accountId,
      'x-account-plan': identity.plan,
      'x-request-id': requestId,
    };
    for (const name of FORWARD_REQUEST) {
      const v = req.headers[name];
      if (v !== undefined) headers[name] = v;
    }
    const withBody = WITH_BODY.has(method);
    if (withBody)
      for (const name of FORWARD_BODY) {
        const v = req.headers[name];
        if (v !== undefined) headers[name] = v;
      }
    const started = debug ? performance.now() : 0;
    let answer;
    try {
      answer = await upstream.forward(method, req.url ?? '/', headers, withBody ? req : null);
    } catch (err) {
      // 4a. no answer: give the unit back
      req.resume();
      quota
        .release(accountId, win.period)
        .catch((e: unknown) => logger.warn('quota release failed', { requestId, error: String(e) }));
      const apiErr = upstreamError(err);
      logger.warn('read-api call failed', {
        requestId,
        status: apiErr.status,
        error: err instanceof Error ? err.message : String(err),
      });
      if (res.headersSent) res.destroy();
      else
        count(
          sendError(
            res,
            apiErr,
            requestId,
            limitHeaders(limits, { monthUsed: admitted.monthUsed - 1, minuteUsed: admitted.minuteUsed }, win, nowEpoch),
          ),
        );
      return;
    }

    // 4b. an answer: keep the unit only for a 2xx
    const status = answer.status;
    const success = status >= 200 && status < 300;
    if (success) quota.succeeded(accountId, win.period);
    else
      quota
        .release(accountId, win.period)
        .catch((e: unknown) => logger.warn('quota release failed', { requestId, error: String(e) }));
    const out: http.OutgoingHttpHeaders = limitHeaders(
      limits,
      { monthUsed: admitted.monthUsed - (success ? 0 : 1), minuteUsed: admitted.minuteUsed },
      win,
      nowEpoch,
    );
    for (const name of FORWARD_RESPONSE) {
      const v = answer.headers[name];
      if (v !== undefined) out[name] = v;
    }
    out['content-length'] = method === 'HEAD' ? (answer.headers['content-length'] ?? 0) : answer.body.length;
    out['x-request-id'] = requestId;
    res.writeHead(status, out);
    res.end(method === 'HEAD' ? undefined : answer.body);
    count(status);
    if (debug)
      logger.debug('api call', {
        requestId,
        method,
        path: req.url,
        status,
        accountId,
        ms: Math.round((performance.now() - started) * 10) / 10,
      });
  };
}
