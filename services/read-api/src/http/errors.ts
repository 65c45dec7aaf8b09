/**
 * Turns whatever a handler threw into the API's error: ApiErrors as they are, the source's cursor
 * and upstream errors, and an unreachable database as 503. Anything else is a bug: 500 INTERNAL
 * without details (the caller logs it).
 */
import { ApiError, InvalidRequestError, ServiceUnavailableError, UpstreamBusyError, UpstreamError } from '@sts/common';
import { InvalidCursorError, SocialSourceError, SourceBusyError } from '@sts/social';
import { isDatabaseUnavailable } from '@sts/db';

export class UnsupportedMediaTypeError extends ApiError {
  constructor(message = 'Content-Type must be application/json') {
    super(415, 'UNSUPPORTED_MEDIA_TYPE', message);
  }
}

export class PayloadTooLargeError extends ApiError {
  constructor(limitBytes: number) {
    super(413, 'PAYLOAD_TOO_LARGE', `request body is larger than ${limitBytes} bytes`, {}, { Connection: 'close' });
  }
}

/** The ApiError for a thrown value, or null when it is an unexpected (internal) error. */
export function toApiError(err: unknown): ApiError | null {
  if (err instanceof ApiError) return err;
  if (err instanceof InvalidCursorError) {
    return new InvalidRequestError('cursor is not valid (pass the next_cursor of a previous page)', 'cursor');
  }
  if (err instanceof SourceBusyError) {
    return new UpstreamBusyError(
      `the upstream X API budget (${err.family}) cannot afford this read now; retry later`,
      err.retryAfterMs / 1000,
    );
  }
  if (err instanceof SocialSourceError) {
    return err.timeout
      ? new UpstreamError('the social data source did not answer in time', 504)
      : new UpstreamError(`the social data source failed: ${err.message}`, 502);
  }
  if (isDatabaseUnavailable(err))
    return new ServiceUnavailableError('the database is unavailable, try again shortly', 1);
  return null;
}
