/**
 * The OpenAPI 3.1 document of the public API, served at GET /api/v1/openapi.json (no key needed,
 * no quota used). Tests validate real responses against these schemas.
 *
 * The record schemas and the envelopes come from @sts/api-contract (zod, converted by
 * z.toJSONSchema), the same schemas that type read-api's serialisers; the parameter bounds come
 * from there too. Paths, parameters and headers are plain data here.
 */
import {
  COMPONENTS,
  CURSOR_PATTERN,
  DeletedRecord,
  DeliveryRecord,
  IDEMPOTENCY_KEY_MAX_LENGTH,
  COVERAGE_COMPONENTS,
  CoverageRecord,
  MANAGE_COMPONENTS,
  MonitorWithSecret,
  PreviewRecord,
  QueuedRecord,
  RecoverRecord,
  WebhookRecord,
  WebhookWithSecret,
  HIT_LIMIT,
  HitRecord,
  LIMIT,
  MonitorRecord,
  NewTweet,
  Q_MAX_LENGTH,
  SEQUENCE_MAX,
  TweetRecord,
  UserRecord,
  dataOf,
  listOf,
  toJsonSchemas,
} from '@sts/api-contract';
import { TWEET_ID_RE, USERNAME_RE } from '@sts/core';
import { contracts } from '@sts/messaging';
import { z } from 'zod';
/**
 * An item of GET …/events: one of the three monitor event payloads of @sts/messaging (the webhook
 * contracts, docs/webhooks.md), with `sequence` always present.
 */
function monitorEventRecord() {
  const sequence = z.int().min(1).max(SEQUENCE_MAX).meta({
    description: "the event's number among the monitor's events: 1, 2, 3 … without gaps (X-Service-Sequence)",
  });
  const kinds = ['monitor.hit', 'monitor.profile_changed', 'monitor.target_unavailable'] as const;
  const [hit, profile, unavailable] = kinds.map((k) => contracts[k].payload.extend({ sequence }));
  return z
    .union([hit!, profile!, unavailable!])
    .meta({ description: 'the payload exactly as the native webhook delivers it (docs/webhooks.md)' });
}

const envelopes = {
  UserOne: dataOf(UserRecord),
  TweetOne: dataOf(TweetRecord),
  TweetList: listOf(TweetRecord),
  MonitorList: listOf(MonitorRecord),
  HitList: listOf(HitRecord),
  NewTweet,
  MonitorOne: dataOf(MonitorRecord),
  MonitorCreated: dataOf(MonitorWithSecret),
  WebhookSecretOne: dataOf(WebhookWithSecret),
  WebhookOne: dataOf(WebhookRecord),
  DeletedOne: dataOf(DeletedRecord),
  QueuedOne: dataOf(QueuedRecord),
  RecoverOne: dataOf(RecoverRecord),
  PreviewOne: dataOf(PreviewRecord),
  DeliveryList: listOf(DeliveryRecord),
  CoverageOne: dataOf(CoverageRecord),
  MonitorEventList: listOf(monitorEventRecord()),
};
const NAMED = { ...COMPONENTS, ...MANAGE_COMPONENTS, ...COVERAGE_COMPONENTS };
const generated = toJsonSchemas({ ...NAMED, ...envelopes });
const schemas = Object.fromEntries(Object.keys(NAMED).map((name) => [name, generated[name as keyof typeof NAMED]]));

const header = (description: string, type: 'integer' | 'string') => ({ description, schema: { type } });
const requestIdHeader = {
  'X-Request-Id': header("the request id: the client's own (1–128 of [A-Za-z0-9._:-]) or a new UUID", 'string'),
};
const limitHeaders = {
  'X-Quota-Limit': header('monthly quota of the plan (calls)', 'integer'),
  'X-Quota-Remaining': header('calls left this month', 'integer'),
  'X-Quota-Reset': header('epoch seconds when the monthly quota resets (start of the next UTC month)', 'integer'),
  'X-RateLimit-Limit': header('requests allowed per minute', 'integer'),
  'X-RateLimit-Remaining': header('requests left in the current minute', 'integer'),
  'X-RateLimit-Reset': header('epoch seconds when the current minute ends', 'integer'),
  'RateLimit-Policy': header(
    'IETF draft-ietf-httpapi-ratelimit-headers: the policies with quota q and window w in seconds, e.g. `"minute";q=30;w=60, "month";q=150000;w=2592000`',
    'string',
  ),
  RateLimit: header(
    'IETF draft-ietf-httpapi-ratelimit-headers: remaining units r and seconds t until reset per policy, e.g. `"minute";r=29;t=42, "month";r=149990;t=1234567`',
    'string',
  ),
};
const withLimits = { ...requestIdHeader, ...limitHeaders };

const errorResponse = (description: string, headers: Record<string, unknown> = withLimits) => ({
  description,
  headers,
  content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
});
const errors = {
  '400': errorResponse('INVALID_REQUEST: a parameter or the body is invalid (`param` names it)'),
  '401': errorResponse(
    'UNAUTHORIZED: missing, malformed, unknown or revoked API key (no quota headers: the account is not known)',
    requestIdHeader,
  ),
  '405': errorResponse('METHOD_NOT_ALLOWED: see the Allow header'),
  '429': errorResponse(
    'QUOTA_EXCEEDED (monthly quota used up; Retry-After runs to the next UTC month) or RATE_LIMIT_EXCEEDED (per-minute limit; Retry-After runs to the next minute). Refused calls use no quota.',
    { ...withLimits, 'Retry-After': header('seconds to wait', 'integer') },
  ),
  '500': errorResponse('INTERNAL'),
  '502': errorResponse('UPSTREAM_ERROR: the data source failed'),
  '503': errorResponse(
    'SERVICE_UNAVAILABLE (the service is temporarily unavailable) or UPSTREAM_BUSY (the upstream X budget cannot afford the read now; nothing was sent); see Retry-After',
  ),
  '504': errorResponse('UPSTREAM_ERROR: the data source did not answer in time'),
};
const ok = (schema: object, description: string) => ({
  description,
  headers: withLimits,
  content: { 'application/json': { schema } },
});
const param = (
  name: string,
  where: 'path' | 'query' | 'header',
  schema: object,
  description: string,
  required = where === 'path',
) => ({ name, in: where, required, description, schema });
const limit = param(
  'limit',
  'query',
  { type: 'integer', minimum: LIMIT.min, maximum: LIMIT.max, default: LIMIT.default },
  'page size',
);
const cursor = param(
  'cursor',
  'query',
  { type: 'string', pattern: CURSOR_PATTERN },
  'the `meta.next_cursor` of the previous page',
);
const username = param('username', 'path', { type: 'string', pattern: USERNAME_RE.source }, 'handle');
const monitorId = param('id', 'path', { type: 'string' }, 'monitor id');

// the management endpoints (manage keys only)
const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const idempotencyKey = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description: 'a new UUID per intended action: a retry with the same key and request answers the first answer (24 h)',
  schema: { type: 'string', minLength: 1, maxLength: IDEMPOTENCY_KEY_MAX_LENGTH },
};
const withReplay = {
  ...withLimits,
  'Idempotent-Replayed': header(
    'true when this is the kept answer of an earlier call with the same Idempotency-Key',
    'string',
  ),
};
const okWrite = (status: string, schema: object, description: string) => ({
  [status]: { description, headers: withReplay, content: { 'application/json': { schema } } },
});
const jsonBody = (name: string, required = true) => ({
  required,
  content: { 'application/json': { schema: ref(name) } },
});
const manageErrors = {
  ...errors,
  '403': errorResponse(
    'INSUFFICIENT_SCOPE (a read key; no quota headers, nothing counted), PLAN_LIMIT (`limit`, `plan`: the plan allows no more) or EMAIL_UNVERIFIED',
  ),
  '404': errorResponse("NOT_FOUND (also another account's monitor or attempt)"),
  '413': errorResponse('PAYLOAD_TOO_LARGE: the body is larger than 16 KiB'),
  '415': errorResponse('UNSUPPORTED_MEDIA_TYPE: the body is not application/json'),
};
const postErrors = {
  ...manageErrors,
  '409': errorResponse(
    'IDEMPOTENCY_KEY_IN_USE (the first call with this key is still running; Retry-After), NO_WEBHOOK or HIT_GONE',
  ),
  '422': errorResponse('IDEMPOTENCY_KEY_REUSED: this Idempotency-Key was used for another request'),
};
const managePost = (
  operationId: string,
  summary: string,
  responses: object,
  extra: { requestBody?: object; parameters?: object[] } = {},
) => ({
  operationId,
  summary,
  ...(extra.requestBody ? { requestBody: extra.requestBody } : {}),
  parameters: [...(extra.parameters ?? []), idempotencyKey],
  responses: { ...responses, ...postErrors },
});

export const openApiDocument = {
  openapi: '3.1.0',
  info: {
    title: 'Social timeline data service',
    version: '1.0.0',
    description: [
      "Read API over social data and the account's monitors, and (with a `manage` key) the management of monitors, webhooks and deliveries.",
      'Every endpoint needs an API key, sent as `Authorization: Bearer <key>` or `X-API-Key: <key>`. A `read` key on a management endpoint is a 403 INSUFFICIENT_SCOPE that uses no quota.',
      'Every POST takes an optional Idempotency-Key header (24 h).',
      'Each successful (2xx) call uses one unit of the monthly quota; failed calls use none. Requests are also limited per minute.',
      'Every answer once the key is accepted carries the X-Quota-*, X-RateLimit-* and IETF RateLimit / RateLimit-Policy headers.',
      'Lists answer `{"data": [...], "meta": {"count", "next_cursor"}}`; pass `next_cursor` as `cursor` for the next page.',
      'Errors answer `{"error", "code", "request_id", ...}`. This document itself is public: no key, no quota.',
    ].join(' '),
  },
  servers: [{ url: '/' }],
  security: [{ bearerAuth: [] }, { apiKeyHeader: [] }],
  components: {
    securitySchemes: {
      bearerAuth: { type: 'http', scheme: 'bearer', description: 'Authorization: Bearer <API_KEY>' },
      apiKeyHeader: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
    },
    schemas,
  },
  paths: {
    '/api/v1/openapi.json': {
      get: {
        operationId: 'getOpenApi',
        summary: 'This document (public: no key, no quota)',
        security: [],
        responses: {
          '200': {
            description: 'the OpenAPI 3.1 document',
            headers: requestIdHeader,
            content: { 'application/json': {} },
          },
        },
      },
    },
    '/api/v1/users/{username}': {
      get: {
        operationId: 'getUser',
        summary: 'A user profile',
        parameters: [username],
        responses: { '200': ok(generated.UserOne, 'the user'), '404': errorResponse('USER_NOT_FOUND'), ...errors },
      },
    },
    '/api/v1/users/{username}/tweets': {
      get: {
        operationId: 'getUserTweets',
        summary: "A user's timeline, newest first",
        parameters: [username, limit, cursor],
        responses: {
          '200': ok(generated.TweetList, 'one page of tweets'),
          '404': errorResponse('USER_NOT_FOUND'),
          ...errors,
        },
      },
    },
    '/api/v1/tweets/{id}': {
      get: {
        operationId: 'getTweet',
        summary: 'One tweet',
        parameters: [param('id', 'path', { type: 'string', pattern: TWEET_ID_RE.source }, 'tweet id')],
        responses: { '200': ok(generated.TweetOne, 'the tweet'), '404': errorResponse('TWEET_NOT_FOUND'), ...errors },
      },
    },
    '/api/v1/tweets': {
      post: {
        operationId: 'postTweet',
        summary: 'Post a tweet (coming soon)',
        requestBody: {
          required: true,
          content: { 'application/json': { schema: generated.NewTweet } },
        },
        responses: {
          '501': errorResponse('NOT_IMPLEMENTED: coming soon'),
          '413': errorResponse('PAYLOAD_TOO_LARGE: the body is larger than 16 KiB'),
          '415': errorResponse('UNSUPPORTED_MEDIA_TYPE: the body is not application/json'),
          ...errors,
        },
      },
    },
    '/api/v1/search': {
      get: {
        operationId: 'search',
        summary: 'Full-text search over tweets, newest first',
        parameters: [
          param('q', 'query', { type: 'string', minLength: 1, maxLength: Q_MAX_LENGTH }, 'search query', true),
          limit,
          cursor,
        ],
        responses: { '200': ok(generated.TweetList, 'one page of matching tweets'), ...errors },
      },
    },
    '/api/v1/monitors': {
      post: managePost(
        'createMonitor',
        'Create a monitor (of an account or a query), optionally with its webhook; `webhook_secret` carries the signing secret once (manage key)',
        okWrite('201', generated.MonitorCreated, 'the monitor'),
        { requestBody: jsonBody('NewMonitor') },
      ),
      get: {
        operationId: 'listMonitors',
        summary: "The account's monitors (read-only)",
        parameters: [
          param('include_hits', 'query', { type: 'string', enum: ['0', '1'] }, '1 adds recent_hits to each monitor'),
          param(
            'hit_limit',
            'query',
            { type: 'integer', minimum: HIT_LIMIT.min, maximum: HIT_LIMIT.max, default: HIT_LIMIT.default },
            'hits per monitor',
          ),
        ],
        responses: { '200': ok(generated.MonitorList, "the account's monitors"), ...errors },
      },
    },
    '/api/v1/monitors/{id}': {
      get: {
        operationId: 'getMonitor',
        summary: 'One monitor',
        parameters: [monitorId],
        responses: {
          '200': ok(generated.MonitorOne, 'the monitor'),
          '404': errorResponse("NOT_FOUND (also for another account's monitor)"),
          ...errors,
        },
      },
      patch: {
        operationId: 'updateMonitor',
        summary: 'Change a monitor: only the fields given change (manage key)',
        parameters: [monitorId],
        requestBody: jsonBody('MonitorEdit'),
        responses: { '200': ok(generated.MonitorOne, 'the monitor as it is now'), ...manageErrors },
      },
      delete: {
        operationId: 'deleteMonitor',
        summary: 'Delete a monitor with its webhook, hits and delivery log (manage key)',
        parameters: [monitorId],
        responses: { '200': ok(generated.DeletedOne, 'deleted'), ...manageErrors },
      },
    },
    '/api/v1/monitors/preview': {
      post: managePost(
        'previewMonitor',
        "Which of the target's last 50 posts a rule would fire on, before saving (manage key)",
        okWrite('200', generated.PreviewOne, 'each post with matched and the reason'),
        { requestBody: jsonBody('MonitorPreviewInput') },
      ),
    },
    '/api/v1/monitors/{id}/pause': {
      post: managePost(
        'pauseMonitor',
        'Pause a monitor (manage key)',
        okWrite('200', generated.MonitorOne, 'the monitor'),
        {
          parameters: [monitorId],
        },
      ),
    },
    '/api/v1/monitors/{id}/resume': {
      post: managePost(
        'resumeMonitor',
        'Resume a monitor (manage key)',
        okWrite('200', generated.MonitorOne, 'the monitor'),
        {
          parameters: [monitorId],
        },
      ),
    },
    '/api/v1/monitors/{id}/webhook': {
      get: {
        operationId: 'getWebhook',
        summary: "The monitor's webhook: URL as shown, health and delivery rules (manage key)",
        parameters: [monitorId],
        responses: {
          '200': ok(generated.WebhookOne, 'the webhook'),
          '409': errorResponse('NO_WEBHOOK: the monitor has no webhook'),
          ...manageErrors,
        },
      },
      patch: {
        operationId: 'updateWebhook',
        summary: "Change the webhook's delivery rules (retry_policy, ordering); URL and secret stay (manage key)",
        parameters: [monitorId],
        requestBody: jsonBody('WebhookSettingsInput'),
        responses: {
          '200': ok(generated.WebhookOne, 'the webhook as it is now'),
          '409': errorResponse('NO_WEBHOOK: the monitor has no webhook'),
          ...manageErrors,
        },
      },
      put: {
        operationId: 'setWebhook',
        summary: "Set or replace the monitor's webhook URL; a new signing secret is returned once (manage key)",
        parameters: [monitorId],
        requestBody: jsonBody('WebhookInput'),
        responses: { '200': ok(generated.WebhookSecretOne, 'the webhook with its new secret'), ...manageErrors },
      },
      delete: {
        operationId: 'deleteWebhook',
        summary: "Remove the monitor's webhook (manage key)",
        parameters: [monitorId],
        responses: { '200': ok(generated.DeletedOne, 'removed (also when there was none)'), ...manageErrors },
      },
    },
    '/api/v1/monitors/{id}/webhook/test': {
      post: managePost(
        'testWebhook',
        'Send a signed monitor.test to the webhook (every plan; bounded per minute) (manage key)',
        okWrite('202', generated.QueuedOne, 'queued'),
        { parameters: [monitorId] },
      ),
    },
    '/api/v1/monitors/{id}/webhook/enable': {
      post: managePost(
        'enableWebhook',
        'Enable a webhook that endpoint health disabled; the events held meanwhile go out oldest first, before new ones (manage key)',
        okWrite('200', generated.WebhookOne, 'the webhook, enabled'),
        { parameters: [monitorId] },
      ),
    },
    '/api/v1/monitors/{id}/webhook/rotate': {
      post: managePost(
        'rotateWebhookSecret',
        'A new signing secret, returned once; the old one keeps signing for 24 h (webhook-signature carries both) unless now=1 (a leaked secret) (manage key)',
        okWrite('200', generated.WebhookSecretOne, 'the webhook with its new secret'),
        {
          parameters: [
            monitorId,
            param('now', 'query', { type: 'string', enum: ['0', '1'] }, '1 drops the old secret at once'),
          ],
        },
      ),
    },
    '/api/v1/monitors/{id}/deliveries': {
      get: {
        operationId: 'listDeliveries',
        summary:
          "The monitor's delivery attempts, newest first, with the request as sent and the response (manage key)",
        parameters: [monitorId, limit, cursor],
        responses: { '200': ok(generated.DeliveryList, 'one page of attempts'), ...manageErrors },
      },
    },
    '/api/v1/monitors/{id}/events': {
      get: {
        operationId: 'listMonitorEvents',
        summary: "The monitor's events after a sequence, oldest first, as its webhook delivers them (manage key)",
        description: [
          'Every event of a monitor (monitor.hit, monitor.profile_changed, monitor.target_unavailable) carries',
          '`sequence`: 1, 2, 3 … per monitor, without gaps (the X-Service-Sequence header). A receiver that sees 41',
          'after 39 asks for `after=39`. Events are kept as long as the plan keeps hits (docs/api.md "Events by',
          'sequence"); an `after` that is not a sequence number answers 400 INVALID_REQUEST naming it.',
        ].join(' '),
        parameters: [
          monitorId,
          param(
            'after',
            'query',
            { type: 'integer', minimum: 0, maximum: SEQUENCE_MAX, default: 0 },
            'the last sequence the receiver has: the page starts after it (not with `cursor`)',
          ),
          limit,
          cursor,
        ],
        responses: { '200': ok(generated.MonitorEventList, 'one page of events'), ...manageErrors },
      },
    },
    '/api/v1/monitors/{id}/recover': {
      post: managePost(
        'recoverDeliveries',
        'Redeliver what failed, was skipped or exhausted its retries in a time window (at most 1,000 a call, within the redelivery budget) (manage key)',
        {
          '202': {
            ...okWrite('202', generated.RecoverOne, 'queued')['202'],
            headers: {
              ...withReplay,
              'Retry-After': header(
                "seconds until the account's redelivery budget grants more: present when it left some out",
                'integer',
              ),
            },
          },
        },
        { parameters: [monitorId], requestBody: jsonBody('RecoverInput') },
      ),
    },
    '/api/v1/deliveries/{id}/redeliver': {
      post: managePost(
        'redeliver',
        'Send one logged delivery again (same X-Service-Delivery, fresh signature) (manage key)',
        okWrite('202', generated.QueuedOne, 'queued'),
        { parameters: [param('id', 'path', { type: 'string' }, 'attempt id (the `id` of a delivery)')] },
      ),
    },
    '/api/v1/monitors/{id}/hits': {
      get: {
        operationId: 'listMonitorHits',
        summary: 'Recent hits of one monitor, newest first (read-only)',
        parameters: [param('id', 'path', { type: 'string' }, 'monitor id'), limit, cursor],
        responses: {
          '200': ok(generated.HitList, 'one page of hits'),
          '404': errorResponse("NOT_FOUND (also for another account's monitor)"),
          ...errors,
        },
      },
    },
    '/api/v1/monitors/{id}/coverage': {
      get: {
        operationId: 'getMonitorCoverage',
        summary: "A monitor's proof of coverage and speed (read-only)",
        description: [
          '`covered_until`: the time up to which the monitor has seen everything its source has; `gaps`: the',
          'windows of the last 30 days its source was not read in (stream down, budget refused, source error)',
          'and when a later read filled each; `latency`: p50 and p95 of post → detected and detected →',
          'delivered over the last 24 h and 7 days; `intake`: whether the watched account is pushed by the X',
          'Activity API (which event types) or polled. docs/api.md "Coverage" says what each source covers.',
        ].join(' '),
        parameters: [param('id', 'path', { type: 'string' }, 'monitor id')],
        responses: {
          '200': ok(generated.CoverageOne, "the monitor's coverage"),
          '404': errorResponse("NOT_FOUND (also for another account's monitor)"),
          ...errors,
        },
      },
    },
    '/api/v1/stream': {
      get: {
        operationId: 'streamHits',
        summary: 'Live hits as server-sent events (Starter plan and above)',
        description: [
          "A `text/event-stream` that stays open: one `monitor.hit` event per hit of the account's monitors",
          '(`data:` the webhook payload JSON of docs/webhooks.md, `id:` an opaque cursor), a `: keep-alive`',
          'comment every 15 s, and a final `stream.closed` event (`data: {"reason","message"}`, reason',
          '`quota_exceeded`, `shutdown`, `slow_reader`, `key_revoked`, `plan_changed` or `max_lifetime`: a stream',
          'lives at most STREAM_MAX_LIFETIME_S, default 86,400 s) when the service ends it. Send the last `id:` seen',
          'as `Last-Event-ID` to resume: hits stored while away come first, then live ones, none twice.',
          'Metered: 1 unit when the stream opens and 1 per event. A client that stops reading is',
          'disconnected once 256 KiB are unread; it resumes with Last-Event-ID without losing a hit.',
        ].join(' '),
        parameters: [
          {
            ...param(
              'monitor',
              'query',
              { type: 'array', items: { type: 'string', format: 'uuid' }, maxItems: 50 },
              'only hits of these monitors (repeatable)',
            ),
            style: 'form',
            explode: true,
          },
          param('Last-Event-ID', 'header', { type: 'string', maxLength: 200 }, 'the `id:` of the last event received'),
        ],
        responses: {
          ...errors,
          '200': {
            description: 'the event stream (chunked, ends with the connection)',
            headers: withLimits,
            content: { 'text/event-stream': { schema: { type: 'string' } } },
          },
          '400': errorResponse(
            "INVALID_REQUEST (bad query parameter) or INVALID_LAST_EVENT_ID (not an id of this account's stream)",
          ),
          '403': errorResponse('PLAN_REQUIRED: the Free plan has no live stream'),
          '404': errorResponse("NOT_FOUND: a monitor id that is not one of the account's monitors"),
          '429': errorResponse(
            "TOO_MANY_STREAMS (the plan's open streams per account, STREAM_MAX_PER_ACCOUNT), QUOTA_EXCEEDED or RATE_LIMIT_EXCEEDED",
            { ...withLimits, 'Retry-After': header('seconds to wait', 'integer') },
          ),
          '503': errorResponse('SERVICE_UNAVAILABLE: this server holds as many streams as it can (Retry-After)'),
        },
      },
    },
  },
} as const;
