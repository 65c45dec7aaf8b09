/**
 * The API's error classes. Each carries its HTTP status and UPPER_SNAKE code; one function turns
 * any thrown value into the public error body `{ error, code, request_id, ...extra }`.
 * The codes and the body's shape are declared once in @sts/api-contract (the OpenAPI document's
 * `Error` schema comes from there), so a code the document does not list does not compile.
 */
import type { ErrorCode, ErrorRecord } from '@sts/api-contract';

export type ErrorExtra = Record<string, string | number | boolean | null>;

export class ApiError extends Error {
  override name = 'ApiError';
  constructor(
    readonly status: number,
    readonly code: ErrorCode,
    message: string,
    readonly extra: ErrorExtra = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

export class InvalidRequestError extends ApiError {
  constructor(message: string, param?: string) {
    super(400, 'INVALID_REQUEST', message, param ? { param } : {});
  }
}

export class UnauthorizedError extends ApiError {
  constructor(message = 'missing or invalid API key') {
    super(401, 'UNAUTHORIZED', message, {}, { 'WWW-Authenticate': 'Bearer' });
  }
}

export class NotFoundError extends ApiError {
  constructor(code: 'NOT_FOUND' | 'USER_NOT_FOUND' | 'TWEET_NOT_FOUND' = 'NOT_FOUND', message = 'not found') {
    super(404, code, message);
  }
}

export class MethodNotAllowedError extends ApiError {
  constructor(method: string, path: string, allowed: string[]) {
    super(405, 'METHOD_NOT_ALLOWED', `${method} is not allowed on ${path}`, {}, { Allow: allowed.join(', ') });
  }
}

export class UpstreamError extends ApiError {
  constructor(message = 'the upstream data source failed', status: 502 | 504 = 502) {
    super(status, 'UPSTREAM_ERROR', message);
  }
}

export class ServiceUnavailableError extends ApiError {
  constructor(message = 'service temporarily unavailable', retryAfterSec?: number) {
    super(503, 'SERVICE_UNAVAILABLE', message, {}, retryAfterSec ? { 'Retry-After': String(retryAfterSec) } : {});
  }
}

/**
 * The upstream (X) budget cannot afford the call now: nothing was sent. Retry-After (seconds,
 * at least 1) says when it can.
 */
export class UpstreamBusyError extends ApiError {
  constructor(message: string, retryAfterSec: number) {
    const after = Math.max(1, Math.ceil(retryAfterSec));
    super(503, 'UPSTREAM_BUSY', message, { retry_after: after }, { 'Retry-After': String(after) });
  }
}

export class NotImplementedError extends ApiError {
  constructor(message: string) {
    super(501, 'NOT_IMPLEMENTED', message);
  }
}

/** The public error body: `ErrorRecord` of @sts/api-contract, plus the error's extra fields. */
export type ErrorBody = Pick<ErrorRecord, 'error' | 'code' | 'request_id'> & ErrorExtra;

/** Maps anything thrown to status + body; unknown errors become a 500 INTERNAL without details. */
export function toErrorResponse(
  err: unknown,
  requestId: string,
): { status: number; body: ErrorBody; headers: Record<string, string> } {
  if (err instanceof ApiError) {
    return {
      status: err.status,
      body: { error: err.message, code: err.code, request_id: requestId, ...err.extra },
      headers: err.headers,
    };
  }
  return {
    status: 500,
    body: { error: 'internal error', code: 'INTERNAL', request_id: requestId },
    headers: {},
  };
}
