/**
 * The management API's shapes: request bodies (strict: an unknown field is a 400 naming
 * it) and the records the management endpoints answer with. Like ./records.ts, declared once:
 * read-api parses bodies with these schemas and the OpenAPI document is generated from them.
 */
import { z } from 'zod';
import { MONITOR_EVENTS, MonitorRecord } from './records';

const count = z.int().min(0);
const timestamp = z.iso.datetime({ precision: 3 });

/** the longest webhook URL accepted in a body */
export const WEBHOOK_URL_MAX_LENGTH = 2048;
const KEYWORDS_MAX = 100;
const KEYWORD_MAX_LENGTH = 200;

const keywordsInput = z.array(z.string().max(KEYWORD_MAX_LENGTH)).max(KEYWORDS_MAX).nullable().meta({
  description: 'whole words or phrases, any of which fires; `-word` or `-"a phrase"` excludes; null or [] = every post',
});

export const MonitorFiltersInput = z
  .strictObject({
    exclude: z
      .array(z.enum(['replies', 'reposts', 'quotes']))
      .max(3)
      .optional()
      .meta({ description: 'post types that never fire; default none' }),
    lang: z
      .array(z.string().max(35))
      .max(50)
      .optional()
      .meta({ description: 'languages that fire (BCP 47); default any' }),
  })
  .meta({ description: 'the rule besides the keywords (excluded keywords are written in `keywords` as -word)' });

const queryInput = z
  .string()
  .max(4096)
  .meta({ description: 'a search query to watch (docs/queries.md); at most 512 characters' });

const retryPolicy = z.enum(['none', 'standard']).meta({
  description:
    'none: one attempt (default); standard: a failed delivery is tried again after 5 s, 30 s, 2 min, 10 min, 30 min, 2 h, 6 h and 12 h (±10 %)',
});
const ordering = z.enum(['unordered', 'fifo']).meta({
  description:
    'unordered (default); fifo: the next event goes only after the previous one succeeded or its retry schedule ran out',
});

export const NewMonitor = z.strictObject({
  target_username: z
    .string()
    .max(64)
    .optional()
    .meta({ description: 'the account to watch, with or without @ (or give query)' }),
  query: queryInput.optional(),
  keywords: keywordsInput.optional(),
  filters: MonitorFiltersInput.optional(),
  events: z.array(z.enum(MONITOR_EVENTS)).min(1).max(3).optional().meta({
    description:
      'what the monitor sends: posts, profile and/or deletes (the last two username monitors only); default ["posts"]',
  }),
  check_interval_sec: count
    .optional()
    .meta({ description: "seconds between checks: the plan's poll interval (default) up to 86400" }),
  webhook_url: z
    .string()
    .max(WEBHOOK_URL_MAX_LENGTH)
    .optional()
    .meta({ description: 'HTTPS URL of a public host (Discord and Slack URLs get their own format)' }),
  retry_policy: retryPolicy.optional(),
  ordering: ordering.optional(),
});

export const MonitorEdit = z.strictObject({
  target_username: NewMonitor.shape.target_username,
  query: queryInput.optional().meta({ description: "a query monitor's new query" }),
  keywords: keywordsInput.optional(),
  filters: MonitorFiltersInput.optional(),
  events: NewMonitor.shape.events,
  check_interval_sec: NewMonitor.shape.check_interval_sec,
});

export const MonitorPreviewInput = z.strictObject({
  target_username: NewMonitor.shape.target_username,
  query: queryInput.optional(),
  keywords: keywordsInput.optional(),
  filters: MonitorFiltersInput.optional(),
});

export const WebhookInput = z.strictObject({
  url: z.string().max(WEBHOOK_URL_MAX_LENGTH).meta({ description: 'HTTPS URL of a public host' }),
  retry_policy: retryPolicy.optional().meta({ description: 'left out: unchanged (a new webhook: none)' }),
  ordering: ordering.optional().meta({ description: 'left out: unchanged (a new webhook: unordered)' }),
});

export const WebhookSettingsInput = z.strictObject({
  retry_policy: retryPolicy.optional().meta({ description: 'left out: unchanged' }),
  ordering: ordering.optional().meta({ description: 'left out: unchanged' }),
});

/** the outcomes Recover takes (`exhausted`: a retry schedule that ran out) */
const RECOVER_OUTCOMES = ['failed', 'skipped', 'exhausted'] as const;

/** the calendar day an ISO 8601 time names exists (JavaScript would take 2026-02-30 as 2026-03-02) */
function realDay(s: string): boolean {
  const m = /^(\d{4})-(\d{2})-(\d{2})T/.exec(s);
  if (!m) return false;
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const day = new Date(Date.UTC(2000, mo - 1, d));
  day.setUTCFullYear(y);
  return day.getUTCMonth() === mo - 1 && day.getUTCDate() === d;
}

/** an ISO 8601 time with an offset, of a day that exists */
const recoverTime = z.iso.datetime({ offset: true }).refine(realDay, { message: 'is not a date that exists' });

export const RecoverInput = z.strictObject({
  since: recoverTime.meta({
    description:
      "redeliver deliveries with an attempt of `outcomes` at or after this time; not before the delivery log's retention (a day's slack)",
  }),
  until: recoverTime.optional().meta({ description: 'and at or before this time (default now); not before `since`' }),
  outcomes: z
    .array(z.enum(RECOVER_OUTCOMES))
    .min(1)
    .max(RECOVER_OUTCOMES.length)
    .refine((o) => new Set(o).size === o.length, { message: 'must not name an outcome twice' })
    .optional()
    .meta({
      description:
        'which outcomes to redeliver (default all three, each at most once); a delivery qualifies while its latest attempt has one of them',
    }),
});

export const MonitorWithSecret = MonitorRecord.extend({
  webhook_secret: z.string().nullable().meta({
    description: 'the webhook signing secret, shown this once (null without a webhook); only its ciphertext is kept',
  }),
});

export const WebhookRecord = z.object({
  monitor_id: z.string(),
  url: z.string().meta({ description: 'as shown: Discord and Slack tokens masked' }),
  kind: z.enum(['native', 'discord', 'slack']),
  is_broken: z.boolean(),
  broken_reason: z.string().nullable(),
  health: z.enum(['ok', 'failing', 'disabled']),
  consecutive_failures: count,
  held_events: count.meta({
    description: 'events held while the webhook was disabled, sent oldest first once it is enabled again',
  }),
  held_dropped: count.meta({ description: 'of this hold, the oldest dropped past its bounds (logged as skipped)' }),
  secret_rotated_at: timestamp.nullable(),
  previous_secret_until: timestamp.nullable().meta({
    description: 'during an overlapped rotation: until then the old secret still signs too',
  }),
  retry_policy: retryPolicy,
  ordering,
  created_at: timestamp,
});

export const WebhookWithSecret = WebhookRecord.extend({
  webhook_secret: z.string().meta({ description: 'the new signing secret, shown this once' }),
  standard_webhook_secret: z
    .string()
    .meta({ description: 'the same secret as Standard Webhooks libraries take it (whsec_…)' }),
  warnings: z.array(z.string()).meta({ description: 'about the URL: saved anyway' }),
});

const HeaderPairs = z.array(z.tuple([z.string(), z.string()])).meta({ description: '[name, value] pairs in order' });

export const DeliveryRecord = z.object({
  id: z.string().meta({ description: 'the attempt id (POST /api/v1/deliveries/{id}/redeliver)' }),
  monitor_id: z.string(),
  event: z.string().meta({ description: 'monitor.hit or monitor.test' }),
  delivery_id: z.string().meta({ description: 'X-Service-Delivery: the same on a redelivery' }),
  hit_id: z.string().nullable(),
  outcome: z.enum(['delivered', 'failed', 'skipped', 'exhausted']).meta({
    description: 'exhausted: the last attempt of a retry schedule, failed',
  }),
  attempt: z
    .int()
    .min(1)
    .nullable()
    .meta({ description: "the attempt's number in its delivery's retry schedule (1: the first)" }),
  next_attempt_at: timestamp
    .nullable()
    .meta({ description: 'when the next attempt is due (null: none follows, or it is held)' }),
  held: z.boolean().meta({
    description:
      "the delivery's next attempt is held: it fell due while the webhook was disabled and goes out, in order, once the webhook is enabled again (true on the delivery's last attempt only)",
  }),
  status_code: z.int().nullable(),
  latency_ms: count.nullable(),
  error: z.string().nullable(),
  url: z.string().meta({ description: 'Discord and Slack tokens masked' }),
  request: z
    .object({ url: z.string(), headers: HeaderPairs, body: z.string() })
    .nullable()
    .meta({ description: 'as sent; null when nothing was sent' }),
  response: z
    .object({
      status: z.int(),
      headers: HeaderPairs,
      body: z.string().meta({ description: 'the first 4 KiB as received, decoded as UTF-8' }),
    })
    .nullable()
    .meta({ description: 'null when no answer came (refused, timed out, connection error)' }),
  created_at: timestamp,
});

export const PreviewRecord = z.object({
  target_username: z.string().nullable(),
  query: z.string().nullable(),
  keywords: z.array(z.string()),
  filters: z.object({ exclude: z.array(z.string()), lang: z.array(z.string()) }),
  cached: z.boolean(),
  posts: z.array(
    z.object({
      id: z.string(),
      text: z.string(),
      created_at: timestamp,
      lang: z.string().nullable(),
      matched: z.boolean(),
      code: z.string().meta({ description: 'why it fires or not (keyword, type, language, exclusion)' }),
      reason: z.string(),
    }),
  ),
});

export const QueuedRecord = z.object({
  delivery_id: z.string().meta({ description: 'the X-Service-Delivery of what will be sent' }),
  monitor_id: z.string(),
  attempt_id: z.string().optional().meta({ description: 'the attempt redelivered (redeliver)' }),
});

export const RecoverRecord = z.object({
  queued: count,
  remaining: count.meta({ description: 'matching deliveries not queued by this call: call again' }),
  delivery_ids: z.array(z.string()),
  retry_after: count.nullable().meta({
    description:
      "the account's redelivery budget left some out: seconds until it grants more (also the Retry-After header); null when it did not",
  }),
});

export const DeletedRecord = z.object({ id: z.string(), deleted: z.literal(true) });

export type NewMonitor = z.output<typeof NewMonitor>;
export type MonitorEdit = z.output<typeof MonitorEdit>;
export type MonitorPreviewInput = z.output<typeof MonitorPreviewInput>;
export type MonitorWithSecret = z.output<typeof MonitorWithSecret>;
export type WebhookRecord = z.output<typeof WebhookRecord>;
export type WebhookWithSecret = z.output<typeof WebhookWithSecret>;
export type DeliveryRecord = z.output<typeof DeliveryRecord>;
export type PreviewRecord = z.output<typeof PreviewRecord>;
export type QueuedRecord = z.output<typeof QueuedRecord>;
export type RecoverRecord = z.output<typeof RecoverRecord>;

/** the management schemas named in the document (`#/components/schemas/<name>`) */
export const MANAGE_COMPONENTS = {
  NewMonitor,
  MonitorEdit,
  MonitorPreviewInput,
  WebhookInput,
  WebhookSettingsInput,
  RecoverInput,
  MonitorWithSecret,
  Webhook: WebhookRecord,
  WebhookWithSecret,
  Delivery: DeliveryRecord,
  Preview: PreviewRecord,
  Queued: QueuedRecord,
  Recover: RecoverRecord,
  Deleted: DeletedRecord,
} as const;
