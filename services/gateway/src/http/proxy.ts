/**
 * The hot path of one API call: key → admission → forward to read-api → settle the unit → answer
 * in one write with the limit headers.
 *
 * Steady state does no database query and no Redis round trip: the key's identity comes from the
 * in-process cache (refreshed ahead of expiry from Redis / PostgreSQL), admission takes a unit
 * from the quota units this process has leased from Redis (adapters/leasedQuota.ts), and usage and
 * last-used times are written to PostgreSQL in batches by the gateway's flush timer.
 */
import {
  ApiError,
  MethodNotAllowedError,
  ServiceUnavailableError,
  toErrorResponse,
  UnauthorizedError,
  UpstreamError,
  type Logger,
} from '@sts/common';
import { managementWrites, needsManageScope } from '@sts/api-contract';
import { errorMessage, hashApiKey, isWellFormedApiKey, type PlanLimits, type PlanName, type Plans } from '@sts/core';
import type { KeyIdentity, KeyStore } from '../adapters/keys';
import type { Admission, QuotaStore } from '../adapters/leasedQuota';
import { UpstreamFailure, type UpstreamAnswer, type UpstreamClient } from '@sts/http1';
import {
  createWindowClock,
  extractApiKey,
  headerLines,
  createLimitHeaderBlock,
  refusal,
  type Window,
} from '../domain/limits';
import type { HttpRequest, HttpResponder } from '@sts/http1';
import type { RejectionReason } from '../metrics';
import { STREAM_PATH, type StreamCall } from '../stream/hub';

export const JSON_TYPE = 'application/json; charset=utf-8';

/** client headers read-api may use; everything else (x-internal-*, x-account-*, cookies…) stays here */
const FORWARD_REQUEST = ['accept', 'user-agent', 'idempotency-key'] as const;
/** and, for a call with a body, the header that describes it (the length is set by the client) */
const FORWARD_BODY = ['content-type'] as const;
/** every request header the API handler reads */
export const READ_REQUEST_HEADERS: readonly string[] = [
  'authorization',
  'x-api-key',
  'last-event-id',
  ...FORWARD_REQUEST,
  ...FORWARD_BODY,
];
export const FORWARD_RESPONSE = [
  'content-type',
  'allow',
  'retry-after',
  'cache-control',
  'etag',
  'last-modified',
  'idempotent-replayed',
] as const;
const WITH_BODY = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
/**
 * Longest value of each client header passed to read-api. With the target's bound (8 KiB, the
 * server's 414) and the gateway's own headers, a forwarded head stays under 13 KiB, below
 * read-api's 16 KiB head limit (node:http's maxHeaderSize): no client can make read-api refuse a
 * head the gateway built (which would also fail the calls pipelined with it).
 */
const FORWARD_MAX_BYTES: Readonly<Record<string, number>> = {
  accept: 1024,
  'user-agent': 1024,
  'content-type': 256,
  // read-api answers a key over IDEMPOTENCY_KEY_MAX_LENGTH with a 400 naming it
  'idempotency-key': 1024,
};
const TWEETS_PATHS = new Set(['/api/v1/tweets', '/api/v1/tweets/']);
const ALLOW_READ = ['GET', 'HEAD', 'OPTIONS'];
const ALLOW_TWEETS = ['GET', 'HEAD', 'OPTIONS', 'POST'];

/**
 * null when the gateway passes `method` on for `path`: GET, HEAD, OPTIONS anywhere, POST to
 * /api/v1/tweets, and the writes of the management endpoints (@sts/api-contract scopes.ts)
 */
function methodRefusal(method: string, path: string): ApiError | null {
  if (method === 'GET' || method === 'HEAD' || method === 'OPTIONS') return null;
  const tweets = TWEETS_PATHS.has(path);
  if (method === 'POST' && tweets) return null;
  const writes = managementWrites(path);
  if (writes.includes(method)) return null;
  return new MethodNotAllowedError(
    method,
    path.length > 100 ? `${path.slice(0, 100)}…` : path,
    tweets ? ALLOW_TWEETS : writes.length ? [...ALLOW_READ, ...new Set(writes)] : ALLOW_READ,
  );
}

function insufficientScope(method: string, path: string): ApiError {
  const shown = path.length > 100 ? `${path.slice(0, 100)}…` : path;
  return new ApiError(
    403,
    'INSUFFICIENT_SCOPE',
    `${method} ${shown} needs an API key with the manage scope; this key is read-only (create a manage key in the dashboard or with key create --scope manage)`,
  );
}

/** null when every forwarded client header is within its bound, else the 431 naming it */
function headerRefusal(headers: Record<string, string>): ApiError | null {
  for (const name in FORWARD_MAX_BYTES) {
    const v = headers[name];
    if (v !== undefined && v.length > FORWARD_MAX_BYTES[name]!)
      return new ApiError(
        431,
        'HEADERS_TOO_LARGE',
        `the ${name} header is longer than ${FORWARD_MAX_BYTES[name]} bytes`,
      );
  }
  return null;
}

/** a call admitted against the quota, on its way to read-api */
interface Admitted {
  req: HttpRequest;
  res: HttpResponder;
  identity: KeyIdentity;
  limits: PlanLimits;
  admitted: Admission;
  win: Window;
  nowEpoch: number;
  /** performance.now() when the call was taken up (latency metric, debug logging) */
  started: number;
}

export interface ApiHandlerDeps {
  keys: KeyStore;
  quota: QuotaStore;
  plans: Plans;
  upstream: UpstreamClient;
  internalToken: string;
  logger: Logger;
  /** the clock, in ms since the epoch */
  now: () => number;
  /** told about every answer: its status and performance.now() when the call was taken up */
  answered: (req: HttpRequest, status: number, started: number) => void;
  /** told about every 429 of the plan's per-minute limit or monthly quota */
  rejected: (plan: PlanName, reason: RejectionReason) => void;
  /** GATEWAY_TRUSTED_PROXY_HOPS: proxies in front whose X-Forwarded-For entries are believed; default 0 */
  trustedProxyHops?: number;
  /** takes admitted calls to /api/v1/stream (stream/hub.ts); without it they go to read-api */
  stream?: (call: StreamCall) => void;
}

/**
 * The client's address for the unknown-key limit: the socket's, or with `hops` trusted proxies in
 * front, the X-Forwarded-For entry that the outermost trusted proxy saw (a client cannot forge it
 * by sending its own header: entries left of that one are ignored).
 */
export function clientAddress(req: HttpRequest, hops: number): string {
  if (hops <= 0) return req.remoteAddress;
  const chain = (req.headers['x-forwarded-for'] ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  return chain[chain.length - hops] ?? chain[0] ?? req.remoteAddress;
}

/**
 * Handles one API call and answers it. `fail` is called instead when the call cannot be handled
 * (Redis or PostgreSQL unreachable while authenticating or admitting it); the caller answers then.
 * `started`: performance.now() when the call was taken up (for the latency metric).
 */
export type ApiHandler = (req: HttpRequest, res: HttpResponder, fail: (err: unknown) => void, started: number) => void;

/** Writes an error body `{error, code, request_id, ...}` with the given extra header lines. */
export function sendError(res: HttpResponder, err: unknown, requestId: string, extraHeaders = ''): number {
  const { status, body, headers } = toErrorResponse(err, requestId);
  res.send(
    status,
    `${extraHeaders}${headerLines(headers)}content-type: ${JSON_TYPE}\r\nx-request-id: ${requestId}\r\n`,
    JSON.stringify(body),
  );
  return status;
}

function upstreamError(err: unknown): ApiError {
  if (err instanceof UpstreamFailure) {
    if (err.kind === 'unavailable') return new ServiceUnavailableError('the read API is unavailable', 1);
    if (err.kind === 'timeout') return new UpstreamError('the read API did not answer in time', 504);
  }
  return new UpstreamError('the read API failed', 502);
}

/**
 * A key's SHA-256, or null when the key is malformed (bad shape or checksum). Well-formed keys
 * already seen are remembered, so the checksum and the hash are computed once per key.
 */
function createKeyHasher(maxEntries = 50_000): (key: string) => string | null {
  const memo = new Map<string, string>();
  return (key) => {
    let hash = memo.get(key);
    if (hash === undefined) {
      if (!isWellFormedApiKey(key)) return null;
      hash = hashApiKey(key);
      if (memo.size >= maxEntries) memo.clear();
      memo.set(key, hash);
    }
    return hash;
  };
}

/** the forwarded head of an admitted call: the internal headers and the client headers read-api may use */
function forwardedHead(internal: string, call: Admitted, withBody: boolean): string {
  const { req, identity } = call;
  const { headers } = req;
  let out = `${internal}x-account-id: ${identity.accountId}\r\nx-account-plan: ${identity.plan}\r\nx-key-scope: ${identity.scope ?? 'read'}\r\nx-request-id: ${req.requestId}\r\n`;
  for (const name of FORWARD_REQUEST) {
    const v = headers[name];
    if (v !== undefined) out += `${name}: ${v}\r\n`;
  }
  if (withBody)
    for (const name of FORWARD_BODY) {
      const v = headers[name];
      if (v !== undefined) out += `${name}: ${v}\r\n`;
    }
  return out;
}

/** the client went away before its call was forwarded: the server drops this answer (and counts it done) */
function gone(res: HttpResponder): void {
  res.send(499, '', null);
}

/**
 * The steps of one call over the same deps: refuse, admit, decide, forward, answered, unanswered
 * (each a method); createApiHandler hands out its `handle`.
 */
class ApiCallHandler {
  private readonly windowAt = createWindowClock();
  private readonly limitHeaderBlock = createLimitHeaderBlock();
  private readonly hashOf = createKeyHasher();
  private readonly debug: boolean;
  private readonly internal: string;

  constructor(private readonly deps: ApiHandlerDeps) {
    this.debug = deps.logger.isLevelEnabled('debug');
    this.internal = `x-internal-token: ${deps.internalToken}\r\n`;
  }

  handle(req: HttpRequest, res: HttpResponder, fail: (err: unknown) => void, started: number): void {
    // refused before the key is even read: these never reach read-api and cost no quota
    const refusal = methodRefusal(req.method, req.path) ?? headerRefusal(req.headers);
    if (refusal !== null) return this.refuse(req, res, refusal, started);
    // the key: shape and checksum first, so malformed keys never reach a cache or the database
    const key = extractApiKey(req.headers.authorization, req.headers['x-api-key']);
    if (key === '')
      return this.refuse(
        req,
        res,
        new UnauthorizedError('missing API key: send Authorization: Bearer <key> or X-API-Key: <key>'),
        started,
      );
    const hash = this.hashOf(key);
    if (hash === null) return this.refuse(req, res, new UnauthorizedError('malformed API key'), started);
    const { keys } = this.deps;
    const identity = keys.peek(hash);
    if (identity !== undefined) return this.admit(req, res, identity, fail, started);
    const from = clientAddress(req, this.deps.trustedProxyHops ?? 0);
    keys.lookup(hash, from).then((found) => this.admit(req, res, found, fail, started), fail);
  }

  private refuse(req: HttpRequest, res: HttpResponder, err: unknown, started: number): void {
    this.deps.answered(req, sendError(res, err, req.requestId), started);
  }

  private admit(
    req: HttpRequest,
    res: HttpResponder,
    identity: KeyIdentity | null,
    fail: (err: unknown) => void,
    started: number,
  ): void {
    if (identity === null) return this.refuse(req, res, new UnauthorizedError('unknown or revoked API key'), started);
    // a read key on a management endpoint: refused before admission, so nothing is counted
    if (identity.scope !== 'manage' && needsManageScope(req.method, req.path))
      return this.refuse(req, res, insufficientScope(req.method, req.path), started);
    if (res.closed) return gone(res); // the client went away while its key was looked up: nothing to admit
    // per-minute limit and monthly quota, from this process's leased units
    const at = this.deps.now();
    const nowEpoch = Math.floor(at / 1000);
    const win = this.windowAt(at);
    const limits = this.deps.plans[identity.plan];
    const { quota } = this.deps;
    const pending = quota.admit(identity.accountId, win.period, win.minute, limits.monthlyQuota, limits.perMinute);
    // (no named closure per call: keepNames would wrap each one in a defineProperty)
    if (pending instanceof Promise)
      pending.then(
        (admitted) => this.decide({ req, res, identity, limits, admitted, win, nowEpoch, started }, fail),
        fail,
      );
    else this.decide({ req, res, identity, limits, admitted: pending, win, nowEpoch, started }, fail);
  }

  /** the admission is known: refuse with 429, drop a call whose client is gone, or forward */
  private decide(call: Admitted, fail: (err: unknown) => void): void {
    const { req, res, identity, limits, admitted, win, nowEpoch } = call;
    this.deps.keys.touch(identity.keyId);
    if (admitted.outcome === 'ok' && res.closed) {
      // the client is gone: not forwarded, not charged
      this.deps.quota.release(identity.accountId, win.period, win.minute);
      return gone(res);
    }
    if (admitted.outcome !== 'ok') {
      const { error, headers } = refusal(admitted.outcome, limits, admitted, win, nowEpoch);
      this.deps.rejected(identity.plan, admitted.outcome === 'rate_limited' ? 'rate_limit' : 'monthly_quota');
      this.deps.answered(req, sendError(res, error, req.requestId, headerLines(headers)), call.started);
      return;
    }
    if (req.path === STREAM_PATH && this.deps.stream !== undefined) return this.deps.stream(this.streamCall(call));
    this.forward(call, fail);
  }

  /** hands an admitted call to the stream hub, which settles its unit */
  private streamCall(call: Admitted): StreamCall {
    const { req, res, identity, limits, admitted, win, nowEpoch } = call;
    const { quota } = this.deps;
    return {
      req,
      res,
      accountId: identity.accountId,
      plan: identity.plan,
      // admitted, so the key is well formed (and its hash memoised by the check before)
      keyHash: this.hashOf(extractApiKey(req.headers.authorization, req.headers['x-api-key']))!,
      refuse: (err) => {
        quota.release(identity.accountId, win.period, win.minute);
        const usage = { monthUsed: admitted.monthUsed - 1, minuteUsed: admitted.minuteUsed };
        const block = this.limitHeaderBlock(limits, usage, win, nowEpoch);
        this.deps.answered(req, sendError(res, err, req.requestId, block), call.started);
      },
      opened: () => {
        quota.succeeded(identity.accountId, win.period);
        this.deps.answered(req, 200, call.started);
        return `${this.limitHeaderBlock(limits, admitted, win, nowEpoch)}x-request-id: ${req.requestId}\r\n`;
      },
    };
  }

  // forwards an admitted call with the internal headers (client-sent x-internal-* / x-account-* never pass)
  private forward(call: Admitted, fail: (err: unknown) => void): void {
    const { req, res } = call;
    const withBody = WITH_BODY.has(req.method);
    const head = forwardedHead(this.internal, call, withBody);
    this.deps.upstream.call(
      req.method,
      req.target,
      head,
      withBody ? req.body : null,
      req.requestId,
      res,
      (err, answer) => {
        try {
          if (err === null) this.answered(call, answer!);
          else this.unanswered(call, err);
        } catch (e) {
          fail(e);
        }
      },
    );
  }

  /** answers a call that read-api answered: the unit is kept only for a 2xx */
  private answered(call: Admitted, answer: UpstreamAnswer): void {
    const { req, res, identity, limits, admitted, win, nowEpoch } = call;
    const { accountId } = identity;
    const status = answer.status;
    const success = status >= 200 && status < 300;
    if (success) this.deps.quota.succeeded(accountId, win.period);
    else this.deps.quota.release(accountId, win.period, win.minute);
    let block = this.limitHeaderBlock(
      limits,
      { monthUsed: admitted.monthUsed - (success ? 0 : 1), minuteUsed: admitted.minuteUsed },
      win,
      nowEpoch,
    );
    for (const name of FORWARD_RESPONSE) {
      const v = answer.headers[name];
      if (v !== undefined) block += `${name}: ${v}\r\n`;
    }
    block += `x-request-id: ${req.requestId}\r\n`;
    if (req.method === 'HEAD') {
      // the GET's length, announced by read-api; the server sends no body for HEAD
      const length = Number(answer.headers['content-length'] ?? 0);
      res.send(status, block, Buffer.alloc(Number.isSafeInteger(length) ? length : 0));
    } else res.send(status, block, answer.body);
    this.deps.answered(req, status, call.started);
    if (this.debug)
      this.deps.logger.debug('api call', {
        requestId: req.requestId,
        method: req.method,
        path: req.path,
        status,
        accountId,
        ms: Math.round((performance.now() - call.started) * 10) / 10,
      });
  }

  /** no answer from read-api: the unit goes back */
  private unanswered(call: Admitted, err: unknown): void {
    const { req, res, identity, limits, admitted, win, nowEpoch } = call;
    this.deps.quota.release(identity.accountId, win.period, win.minute);
    if (err instanceof UpstreamFailure && err.kind === 'cancelled') return gone(res); // not sent, not charged
    const apiErr = upstreamError(err);
    this.deps.logger.warn('read-api call failed', {
      requestId: req.requestId,
      status: apiErr.status,
      err: errorMessage(err),
    });
    const usage = { monthUsed: admitted.monthUsed - 1, minuteUsed: admitted.minuteUsed };
    const limitBlock = this.limitHeaderBlock(limits, usage, win, nowEpoch);
    this.deps.answered(req, sendError(res, apiErr, req.requestId, limitBlock), call.started);
  }
}

export function createApiHandler(deps: ApiHandlerDeps): ApiHandler {
  const handler = new ApiCallHandler(deps);
  return (req, res, fail, started) => handler.handle(req, res, fail, started);
}
