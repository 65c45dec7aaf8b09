/**
 * docs/api.md's error table: every code of @sts/api-contract ERROR_CODES with the statuses it is
 * answered with, what it means and whether a client should send the request again. Typed by
 * ErrorCode, so a new code does not compile until it has its row; packages/deploy-check
 * reference.test.ts checks each status against the OpenAPI document's responses.
 */
import type { ErrorCode } from '../packages/api-contract/src';

interface ErrorRow {
  status: number[];
  meaning: string;
  retry: string;
}

export const ERROR_TABLE: Record<ErrorCode, ErrorRow> = {
  INVALID_REQUEST: {
    status: [400],
    meaning:
      'a parameter, the body or the request itself is invalid (`param` names the field); also a malformed request line, header or framing',
    retry: 'no: fix the request',
  },
  INVALID_LAST_EVENT_ID: {
    status: [400],
    meaning: "`Last-Event-ID` is not an id of this account's stream",
    retry: 'no: reconnect without it, or with an id the stream sent',
  },
  UNAUTHORIZED: {
    status: [401],
    meaning: 'missing, malformed, unknown or revoked API key',
    retry: 'no: use a valid key',
  },
  INSUFFICIENT_SCOPE: {
    status: [403],
    meaning: 'the endpoint needs a `manage` key; nothing was counted',
    retry: 'no: use a manage key',
  },
  PLAN_LIMIT: {
    status: [403],
    meaning: 'the plan allows no more monitors (`limit`, `plan`)',
    retry: 'no: delete a monitor or change plan',
  },
  EMAIL_UNVERIFIED: {
    status: [403],
    meaning: "the account's email address is not verified yet, which this action needs",
    retry: 'no: verify the address first',
  },
  PLAN_REQUIRED: {
    status: [403],
    meaning: 'the live stream needs the Starter plan or an active trial',
    retry: 'no',
  },
  NOT_FOUND: {
    status: [404],
    meaning:
      "no such endpoint, or no such monitor or delivery attempt of this account (another account's is not found)",
    retry: 'no',
  },
  USER_NOT_FOUND: { status: [404], meaning: 'no user with this username', retry: 'no' },
  TWEET_NOT_FOUND: { status: [404], meaning: 'no tweet with this id', retry: 'no' },
  METHOD_NOT_ALLOWED: {
    status: [405],
    meaning: 'the path exists but not with this method; `Allow` lists the methods',
    retry: 'no',
  },
  REQUEST_TIMEOUT: {
    status: [408],
    meaning: 'the request did not arrive in time',
    retry: 'yes, on a new connection',
  },
  NO_WEBHOOK: {
    status: [409],
    meaning: 'the monitor has no webhook to test, rotate or remove',
    retry: 'no: set a webhook first',
  },
  HIT_GONE: {
    status: [409],
    meaning: 'the hit of this delivery attempt no longer exists: nothing to redeliver',
    retry: 'no',
  },
  IDEMPOTENCY_KEY_IN_USE: {
    status: [409],
    meaning: 'the first call with this `Idempotency-Key` is still running',
    retry: 'yes, after `Retry-After`, with the same key',
  },
  PAYLOAD_TOO_LARGE: { status: [413], meaning: 'the body is larger than the API accepts (16 KiB)', retry: 'no' },
  URI_TOO_LONG: { status: [414], meaning: 'the request target (path and query) is too long', retry: 'no' },
  UNSUPPORTED_MEDIA_TYPE: { status: [415], meaning: 'the body is not `application/json`', retry: 'no' },
  EXPECTATION_FAILED: {
    status: [417],
    meaning: 'an `Expect` header other than `100-continue`',
    retry: 'yes, without that header',
  },
  IDEMPOTENCY_KEY_REUSED: {
    status: [422],
    meaning: 'this `Idempotency-Key` was used for another request',
    retry: 'no: a new action takes a new key',
  },
  QUOTA_EXCEEDED: {
    status: [429],
    meaning: "the month's quota is used up; refused calls use no quota",
    retry: 'after `Retry-After` (the next UTC month), or on a larger plan',
  },
  RATE_LIMIT_EXCEEDED: {
    status: [429],
    meaning: "the minute's request limit is reached",
    retry: 'yes, after `Retry-After`',
  },
  TOO_MANY_STREAMS: {
    status: [429],
    meaning: 'the account has as many open streams as its plan allows (`STREAM_MAX_PER_ACCOUNT`)',
    retry: 'after closing one of its streams',
  },
  HEADERS_TOO_LARGE: {
    status: [431],
    meaning: 'the request head, or one forwarded header, is too large',
    retry: 'no',
  },
  INTERNAL: {
    status: [500],
    meaning: 'an unexpected error; the answer carries no detail, the server log has it under the request id',
    retry: 'yes, with backoff; a POST with the same `Idempotency-Key`',
  },
  NOT_IMPLEMENTED: {
    status: [501],
    meaning:
      'an endpoint announced but not available yet, a method or a `Transfer-Encoding` the server does not implement',
    retry: 'no',
  },
  UPSTREAM_ERROR: {
    status: [502, 504],
    meaning: 'the data source, or the service behind the gateway, failed (502) or did not answer in time (504)',
    retry: 'yes, with backoff',
  },
  SERVICE_UNAVAILABLE: {
    status: [503],
    meaning: 'a backend is unavailable for a moment, or this server holds as many streams as it can',
    retry: 'yes, after `Retry-After`',
  },
  UPSTREAM_BUSY: {
    status: [503],
    meaning: 'the shared X budget cannot afford the read now; nothing was sent to X',
    retry: 'yes, after `Retry-After`',
  },
  HTTP_VERSION_NOT_SUPPORTED: {
    status: [505],
    meaning: 'a request in an HTTP version other than 1.1 or 1.0',
    retry: 'yes, in HTTP/1.1',
  },
};
