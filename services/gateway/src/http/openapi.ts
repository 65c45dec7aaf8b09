/**
 * The OpenAPI 3.1 document of the public API, served at GET /api/v1/openapi.json (no key needed,
 * no quota used). Tests validate real responses against these schemas.
 */
const str = { type: 'string' } as const;
const nullableStr = { type: ['string', 'null'] } as const;
const int = { type: 'integer', minimum: 0 } as const;
const dateTime = { type: 'string', format: 'date-time' } as const;
const nullableDateTime = { type: ['string', 'null'], format: 'date-time' } as const;

const schemas = {
  User: {
    type: 'object',
    required: ['id', 'username', 'name', 'followers_count', 'verified'],
    properties: {
      id: { type: 'string', pattern: '^[0-9]+$', description: 'numeric identifier carried as a string' },
      username: str,
      name: str,
      followers_count: int,
      verified: { type: 'boolean' },
      description: nullableStr,
      following_count: int,
      tweet_count: int,
      profile_image_url: nullableStr,
      created_at: nullableDateTime,
    },
  },
  Tweet: {
    type: 'object',
    required: ['id', 'text', 'author_id', 'created_at', 'lang', 'public_metrics', 'author'],
    properties: {
      id: { type: 'string', pattern: '^[0-9]+$' },
      text: str,
      author_id: str,
      created_at: dateTime,
      lang: nullableStr,
      public_metrics: {
        type: 'object',
        required: ['like_count', 'retweet_count', 'reply_count', 'quote_count'],
        properties: { like_count: int, retweet_count: int, reply_count: int, quote_count: int },
      },
      author: { $ref: '#/components/schemas/User' },
    },
  },
  Hit: {
    type: 'object',
    required: ['id', 'tweet_id', 'text', 'author_username', 'tweet_created_at', 'detected_at', 'url'],
    properties: {
      id: str,
      tweet_id: str,
      text: str,
      author_username: str,
      tweet_created_at: dateTime,
      detected_at: dateTime,
      url: { type: 'string', format: 'uri' },
    },
  },
  Monitor: {
    type: 'object',
    required: [
      'id',
      'target_username',
      'keywords',
      'is_active',
      'status',
      'check_interval_sec',
      'last_check_at',
      'last_error',
      'has_webhook',
      'created_at',
      'updated_at',
    ],
    properties: {
      id: str,
      target_username: str,
      keywords: { type: ['array', 'null'], items: str, description: 'null when no keyword filter is set' },
      is_active: { type: 'boolean' },
      status: { type: 'string', enum: ['active', 'paused', 'error'] },
      check_interval_sec: int,
      last_check_at: nullableDateTime,
      last_error: nullableStr,
      has_webhook: { type: 'boolean' },
      created_at: dateTime,
      updated_at: dateTime,
      recent_hits: {
        type: 'array',
        items: { $ref: '#/components/schemas/Hit' },
        description: 'present with include_hits=1',
      },
    },
  },
  ListMeta: {
    type: 'object',
    required: ['count', 'next_cursor'],
    properties: {
      count: int,
      next_cursor: { ...nullableStr, description: 'pass as `cursor` for the next page; null at the end' },
    },
  },
  Error: {
    type: 'object',
    required: ['error', 'code', 'request_id'],
    properties: {
      error: { type: 'string', description: 'human-readable message naming the problem' },
      code: {
        type: 'string',
        enum: [
          'INVALID_REQUEST',
          'UNAUTHORIZED',
          'NOT_FOUND',
          'USER_NOT_FOUND',
          'TWEET_NOT_FOUND',
          'METHOD_NOT_ALLOWED',
          'PAYLOAD_TOO_LARGE',
          'UNSUPPORTED_MEDIA_TYPE',
          'QUOTA_EXCEEDED',
          'RATE_LIMIT_EXCEEDED',
          'NOT_IMPLEMENTED',
          'UPSTREAM_ERROR',
          'SERVICE_UNAVAILABLE',
          'INTERNAL',
        ],
      },
      request_id: str,
      param: { type: 'string', description: 'the offending parameter (INVALID_REQUEST)' },
      limit: int,
      remaining: int,
      retry_after: { type: 'integer', description: 'seconds (429)' },
    },
  },
} as const;

const list = (item: string) => ({
  type: 'object',
  required: ['data', 'meta'],
  properties: {
    data: { type: 'array', items: { $ref: `#/components/schemas/${item}` } },
    meta: { $ref: '#/components/schemas/ListMeta' },
  },
});
const one = (item: string) => ({
  type: 'object',
  required: ['data'],
  properties: { data: { $ref: `#/components/schemas/${item}` } },
});

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
  '503': errorResponse('SERVICE_UNAVAILABLE: the service is temporarily unavailable; see Retry-After'),
  '504': errorResponse('UPSTREAM_ERROR: the data source did not answer in time'),
};
const ok = (schema: object, description: string) => ({
  description,
  headers: withLimits,
  content: { 'application/json': { schema } },
});
const param = (
  name: string,
  where: 'path' | 'query',
  schema: object,
  description: string,
  required = where === 'path',
) => ({ name, in: where, required, description, schema });
const limit = param('limit', 'query', { type: 'integer', minimum: 1, maximum: 100, default: 20 }, 'page size');
const cursor = param(
  'cursor',
  'query',
  { type: 'string', pattern: '^[A-Za-z0-9_-]{1,1024}$' },
  'the `meta.next_cursor` of the previous page',
);

export const openApiDocument = {
  openapi: '3.1.0',
  info: {
    title: 'Social timeline data service',
    version: '1.0.0',
    description: [
      "Read API over social data and the account's monitors (read-only; monitors and webhooks are configured in the dashboard).",
      'Every endpoint needs an API key, sent as `Authorization: Bearer <key>` or `X-API-Key: <key>`.',
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
        parameters: [param('username', 'path', { type: 'string', pattern: '^[A-Za-z0-9_]{1,15}$' }, 'handle')],
        responses: { '200': ok(one('User'), 'the user'), '404': errorResponse('USER_NOT_FOUND'), ...errors },
      },
    },
    '/api/v1/users/{username}/tweets': {
      get: {
        operationId: 'getUserTweets',
        summary: "A user's timeline, newest first",
        parameters: [
          param('username', 'path', { type: 'string', pattern: '^[A-Za-z0-9_]{1,15}$' }, 'handle'),
          limit,
          cursor,
        ],
        responses: {
          '200': ok(list('Tweet'), 'one page of tweets'),
          '404': errorResponse('USER_NOT_FOUND'),
          ...errors,
        },
      },
    },
    '/api/v1/tweets/{id}': {
      get: {
        operationId: 'getTweet',
        summary: 'One tweet',
        parameters: [param('id', 'path', { type: 'string', pattern: '^[1-9][0-9]{0,18}$' }, 'tweet id')],
        responses: { '200': ok(one('Tweet'), 'the tweet'), '404': errorResponse('TWEET_NOT_FOUND'), ...errors },
      },
    },
    '/api/v1/tweets': {
      post: {
        operationId: 'postTweet',
        summary: 'Post a tweet (coming soon)',
        requestBody: {
          required: true,
          content: {
            'application/json': {
              schema: {
                type: 'object',
                required: ['text'],
                properties: { text: { type: 'string', minLength: 1, maxLength: 280 } },
              },
            },
          },
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
          param('q', 'query', { type: 'string', minLength: 1, maxLength: 512 }, 'search query', true),
          limit,
          cursor,
        ],
        responses: { '200': ok(list('Tweet'), 'one page of matching tweets'), ...errors },
      },
    },
    '/api/v1/monitors': {
      get: {
        operationId: 'listMonitors',
        summary: "The account's monitors (read-only)",
        parameters: [
          param('include_hits', 'query', { type: 'string', enum: ['0', '1'] }, '1 adds recent_hits to each monitor'),
          param('hit_limit', 'query', { type: 'integer', minimum: 1, maximum: 10, default: 3 }, 'hits per monitor'),
        ],
        responses: { '200': ok(list('Monitor'), "the account's monitors"), ...errors },
      },
    },
    '/api/v1/monitors/{id}/hits': {
      get: {
        operationId: 'listMonitorHits',
        summary: 'Recent hits of one monitor, newest first (read-only)',
        parameters: [param('id', 'path', { type: 'string' }, 'monitor id'), limit, cursor],
        responses: {
          '200': ok(list('Hit'), 'one page of hits'),
          '404': errorResponse("NOT_FOUND (also for another account's monitor)"),
          ...errors,
        },
      },
    },
  },
} as const;
