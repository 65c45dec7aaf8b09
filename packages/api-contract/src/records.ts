/**
 * The public API's record shapes, declared once (DESIGN.md "API decisions"): snake_case,
 * timestamps as ISO 8601 UTC with milliseconds. read-api's serialisers are typed by these schemas
 * (z.output) and the gateway's OpenAPI document is generated from them (./jsonSchema.ts), so the
 * answers and their description cannot drift apart.
 *
 * The schemas describe; they are not run on the hot path (the serialisers build plain objects).
 * Where the document promises less than the serialiser always sends (User: only five required
 * fields), the schema keeps the published promise, so the served document stays what clients know.
 */
import { z } from 'zod';
import { TWEET_TEXT_MAX_LENGTH } from './params';

const count = z.int().min(0);
/** ISO 8601 UTC with exactly three fraction digits, as Date.prototype.toISOString() writes it. */
const timestamp = z.iso.datetime({ precision: 3 });

export const UserRecord = z.object({
  id: z
    .string()
    .regex(/^[0-9]+$/)
    .meta({ description: 'numeric identifier carried as a string' }),
  username: z.string(),
  name: z.string(),
  followers_count: count,
  verified: z.boolean(),
  description: z.string().nullable().optional(),
  following_count: count.optional(),
  tweet_count: count.optional(),
  profile_image_url: z.string().nullable().optional(),
  created_at: timestamp.nullable().optional(),
});

export const TweetRecord = z.object({
  id: z.string().regex(/^[0-9]+$/),
  text: z.string(),
  author_id: z.string(),
  created_at: timestamp,
  lang: z.string().nullable(),
  public_metrics: z.object({ like_count: count, retweet_count: count, reply_count: count, quote_count: count }),
  referenced_tweets: z
    .array(z.object({ type: z.enum(['replied_to', 'quoted', 'retweeted']), id: z.string().regex(/^[0-9]+$/) }))
    .meta({
      description: "what the post replies to, quotes or reposts (X's referenced_tweets); [] for an original post",
    }),
  author: UserRecord,
});

export const HitRecord = z.object({
  id: z.string(),
  tweet_id: z.string(),
  text: z.string(),
  author_username: z.string(),
  tweet_created_at: timestamp,
  detected_at: timestamp,
  url: z.url(),
});

export const MonitorStatus = z.enum(['active', 'paused', 'error']);

export const MonitorFilters = z
  .object({
    exclude: z
      .array(z.enum(['replies', 'reposts', 'quotes']))
      .meta({ description: 'post types that never fire; [] = replies, reposts and quotes all fire' }),
    lang: z.array(z.string()).meta({
      description: 'languages that fire (BCP 47, lower case); [] = any; a post without a language never matches a list',
    }),
    excluded_keywords: z
      .array(z.string())
      .meta({ description: 'the keywords written -word or -"a phrase": a post containing one never fires' }),
  })
  .meta({ description: "the monitor's rule besides its keywords" });

/** what a monitor sends: posts (monitor.hit) and/or profile (monitor.profile_changed) */
export const MONITOR_EVENTS = ['posts', 'profile'] as const;
export const MonitorEvents = z
  .array(z.enum(MONITOR_EVENTS))
  .meta({ description: 'what the monitor sends: posts (monitor.hit) and/or profile (monitor.profile_changed)' });

export const MonitorTargetStatus = z.enum(['ok', 'suspended', 'protected', 'not_found', 'renamed']).meta({
  description:
    "the watched account's health: ok; suspended, protected or not_found (polled less often until it is back); renamed (the monitor follows the account to its new username)",
});

export const MonitorRecord = z.object({
  id: z.string(),
  target_username: z.string().nullable().meta({ description: 'the watched account; null for a query monitor' }),
  query: z
    .string()
    .nullable()
    .meta({ description: "a query monitor's search query (docs/queries.md); null for a username monitor" }),
  keywords: z
    .array(z.string())
    .nullable()
    .meta({ description: 'null when no keyword filter is set; exclusions appear as written (-word, -"a phrase")' }),
  filters: MonitorFilters,
  is_active: z.boolean(),
  status: MonitorStatus,
  events: MonitorEvents,
  target_status: MonitorTargetStatus,
  target_status_at: timestamp.nullable().meta({ description: 'when target_status last changed' }),
  check_interval_sec: count,
  last_check_at: timestamp.nullable(),
  last_error: z.string().nullable(),
  has_webhook: z.boolean(),
  held_events: count.meta({
    description:
      'events held while its webhook was disabled, sent oldest first once it is enabled again (0 without a webhook)',
  }),
  created_at: timestamp,
  updated_at: timestamp,
  recent_hits: z.array(HitRecord).optional().meta({ description: 'present with include_hits=1' }),
});

export const ListMeta = z.object({
  count,
  next_cursor: z.string().nullable().meta({ description: 'pass as `cursor` for the next page; null at the end' }),
});

/** Every `code` an error body can carry (read-api's and the gateway's own answers). */
export const ERROR_CODES = [
  'INVALID_REQUEST',
  'UNAUTHORIZED',
  'INSUFFICIENT_SCOPE',
  'PLAN_LIMIT',
  'EMAIL_UNVERIFIED',
  'NOT_FOUND',
  'USER_NOT_FOUND',
  'TWEET_NOT_FOUND',
  'METHOD_NOT_ALLOWED',
  'NO_WEBHOOK',
  'HIT_GONE',
  'IDEMPOTENCY_KEY_IN_USE',
  'IDEMPOTENCY_KEY_REUSED',
  'PAYLOAD_TOO_LARGE',
  'UNSUPPORTED_MEDIA_TYPE',
  'URI_TOO_LONG',
  'HEADERS_TOO_LARGE',
  'REQUEST_TIMEOUT',
  'EXPECTATION_FAILED',
  'HTTP_VERSION_NOT_SUPPORTED',
  'QUOTA_EXCEEDED',
  'RATE_LIMIT_EXCEEDED',
  'NOT_IMPLEMENTED',
  'UPSTREAM_ERROR',
  'UPSTREAM_BUSY',
  'SERVICE_UNAVAILABLE',
  'INTERNAL',
  'PLAN_REQUIRED',
  'INVALID_LAST_EVENT_ID',
  'TOO_MANY_STREAMS',
] as const;

export const ErrorRecord = z.object({
  error: z.string().meta({ description: 'human-readable message naming the problem' }),
  code: z.enum(ERROR_CODES),
  request_id: z.string(),
  param: z
    .string()
    .optional()
    .meta({ description: 'the offending parameter or body field (INVALID_REQUEST), e.g. `filters.lang`' }),
  plan: z.enum(['free', 'starter']).optional().meta({ description: 'the plan in force (PLAN_LIMIT)' }),
  limit: count.optional(),
  remaining: count.optional(),
  retry_after: z.int().optional().meta({ description: 'seconds (429)' }),
});

/** The list envelope: `{"data": [...], "meta": {"count", "next_cursor"}}`. */
export function listOf<T extends z.ZodType>(item: T) {
  return z.object({ data: z.array(item), meta: ListMeta });
}

/** The single-record envelope: `{"data": {...}}`. */
export function dataOf<T extends z.ZodType>(item: T) {
  return z.object({ data: item });
}

/** The body of POST /api/v1/tweets. */
export const NewTweet = z.object({ text: z.string().min(1).max(TWEET_TEXT_MAX_LENGTH) });

export type UserRecord = z.output<typeof UserRecord>;
export type TweetRecord = z.output<typeof TweetRecord>;
export type HitRecord = z.output<typeof HitRecord>;
export type MonitorStatus = z.output<typeof MonitorStatus>;
export type MonitorRecord = z.output<typeof MonitorRecord>;
export type MonitorFiltersRecord = z.output<typeof MonitorFilters>;
export type ListMeta = z.output<typeof ListMeta>;
export type ErrorCode = (typeof ERROR_CODES)[number];
export type ErrorRecord = z.output<typeof ErrorRecord>;
export interface ListBody<T> {
  data: T[];
  meta: ListMeta;
}

/** The named schemas of the document (`#/components/schemas/<name>`). */
export const COMPONENTS = {
  User: UserRecord,
  Tweet: TweetRecord,
  Hit: HitRecord,
  Monitor: MonitorRecord,
  MonitorFilters,
  ListMeta,
  Error: ErrorRecord,
} as const;
