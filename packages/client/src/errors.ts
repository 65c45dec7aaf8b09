/** The API's error answers as typed errors (by the API's `code`). */
import type { components } from './schema.js';

export type ErrorBody = components['schemas']['Error'];
/** every `code` an error answer can carry */
export type ApiErrorCode = ErrorBody['code'];

/** An error answer of the API: its HTTP status and the body's code, message and helpful fields. */
export class ApiError extends Error {
  override name = 'ApiError';
  readonly status: number;
  readonly code: ApiErrorCode;
  readonly requestId: string;
  /** the parameter or body field at fault (INVALID_REQUEST) */
  readonly param: string | undefined;
  /** seconds to wait (429, 503) */
  readonly retryAfter: number | undefined;
  readonly body: ErrorBody;

  constructor(status: number, body: ErrorBody) {
    super(body.error);
    this.status = status;
    this.code = body.code;
    this.requestId = body.request_id;
    this.param = body.param;
    this.retryAfter = body.retry_after;
    this.body = body;
  }
}

/** true when `err` is an ApiError (with that `code`, when one is given) */
export function isApiError<C extends ApiErrorCode>(err: unknown, code?: C): err is ApiError & { code: C } {
  return err instanceof ApiError && (code === undefined || err.code === code);
}
