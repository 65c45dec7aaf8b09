/**
 * The public shapes of @sts/usecases: what the dashboard renders and the CLI prints. Dates are
 * Date objects (the caller formats them); ids are UUID strings.
 */
import type {
  ApiKeyScope,
  MonitorFilters,
  MonitorLimits,
  PlanName,
  Plans,
  ReferenceType,
  Retention,
  SecretBox,
  WebhookKindName,
} from '@sts/core';
import type { Db } from '@sts/db';
import type { HeadersOf, PayloadOf } from '@sts/messaging';
import type { ScryptParams } from './password';
import type { WebhookUrlCheck } from './webhookUrl';

export type PublishedKey = 'monitor.test' | 'webhook.redeliver' | 'apikey.changed';

/** What publishes monitor.test / webhook.redeliver / apikey.changed; an `AmqpClient` from @sts/messaging fits. */
export interface Publisher {
  publish<K extends PublishedKey>(
    routingKey: K,
    payload: PayloadOf<K>,
    opts: { messageId: string; headers: HeadersOf<K> },
  ): Promise<void>;
}

export interface UseCaseOptions {
  db: Db;
  /** plansFromEnv(...) from @sts/core */
  plans: Plans;
  /** monitorLimitsFromEnv(...) from @sts/core */
  monitorLimits: MonitorLimits;
  /** retentionFromEnv(...) from @sts/core: how far back each plan sees its hits and delivery log; default DEFAULT_PLAN_RETENTION */
  retention?: Retention;
  /**
   * The secret box for webhook signing secrets (SECRETS_ENCRYPTION_KEY). A function is called
   * only when a webhook secret is made, so callers without the key can still do everything else;
   * whatever it throws is passed on (a missing key → NotConfiguredError is the caller's choice).
   */
  secretBox?: SecretBox | (() => SecretBox);
  /** publishes test pings and redeliveries; without it those two throw NotConfiguredError */
  publisher?: Publisher;
  /**
   * Bounds Test webhook and Redeliver per account (each makes the service post to a URL the
   * customer chose): resolves null when allowed, or the seconds to wait; over the limit the
   * use-case throws RateLimitedError and publishes nothing. `outboundLimiter` (./limits.ts) is
   * the Redis one. Without it there is no limit (unit tests).
   */
  outboundLimit?: (accountId: string) => Promise<number | null>;
  /**
   * The per-account budget of redeliveries queued by Recover: grants up to `wanted` (0: none,
   * RateLimitedError with `retryAfterSec`). `redeliveryBudget` (./limits.ts) is the Redis one,
   * REDELIVERY_MAX_PER_HOUR. Without it there is no budget (the operator's CLI, unit tests).
   */
  redeliveryBudget?: (accountId: string, wanted: number) => Promise<{ granted: number; retryAfterSec: number }>;
  /**
   * Self-service (the dashboard): API keys, webhook URLs and the trial need a verified email
   * address (UnverifiedError otherwise). Off for the operator's CLI, whose accounts are vouched for.
   */
  requireVerifiedEmail?: boolean;
  /**
   * Drops the API key's cached lookup (`apikey:<sha256>` in Redis) so a revocation is immediate;
   * resolves false when the cache was not reachable (the gateways' 5 s TTL bounds it then).
   */
  evictApiKey?: (keyHash: string) => Promise<boolean>;
  /** default () => new Date() */
  now?: () => Date;
  /** length of the self-service Starter trial; default 30 */
  trialDays?: number;
  /** scrypt cost; default DEFAULT_SCRYPT (tests may lower it) */
  scrypt?: ScryptParams;
  /**
   * The save-time webhook URL rule; default @sts/core classifyWebhookUrl. Give
   * `(raw) => checkWebhookUrlForSave(raw, policy)` to check addresses too. It throws
   * WebhookUrlError for a refused URL (→ ValidationError 'webhookUrl') and may return warnings.
   */
  webhookUrlCheck?: WebhookUrlCheck;
  /** the monitor preview's source and cache; without it preview() throws NotConfiguredError */
  preview?: PreviewOptions;
}

export interface AccountView {
  id: string;
  email: string;
  /** the stored plan */
  plan: PlanName;
  /** the plan in force (Starter while a trial runs) */
  effectivePlan: PlanName;
  /** when the stored plan last changed (the account's creation until then) */
  planSince: Date;
  trialStartedAt: Date | null;
  trialEndsAt: Date | null;
  hasPassword: boolean;
  createdAt: Date;
  emailVerifiedAt: Date | null;
  notifications: NotificationPrefs;
  /** the generation a new dashboard session of the account is made under */
  sessionGeneration: number;
}

/** Email notifications the customer can turn off (account page). */
export interface NotificationPrefs {
  quota: boolean;
  webhook: boolean;
  trial: boolean;
}

export type TrialState = 'available' | 'active' | 'ended';

export interface Overview {
  account: AccountView;
  /** `offered`: starting the trial would change something (available, and the stored plan is Free) */
  trial: { state: TrialState; startedAt: Date | null; endsAt: Date | null; days: number; offered: boolean };
  usage: {
    /** "YYYY-MM" (UTC) */
    period: string;
    used: number;
    quota: number;
    remaining: number;
    perMinute: number;
    /** when the month's quota resets (start of next UTC month) */
    resetsAt: Date;
  };
  /** one entry per UTC day of the month up to today, oldest first, zeros included */
  daily: { day: string; used: number }[];
  monitors: { count: number; limit: number };
  /** the facts of the plan in force (liveWebhooks: whether monitor.hit webhooks go out) */
  plan: PlanFacts;
}

export interface PlanFacts {
  name: PlanName;
  monthlyQuota: number;
  perMinute: number;
  pollIntervalSec: number;
  liveWebhooks: boolean;
  maxMonitors: number;
  /** days of hits (by the post's time) and of the delivery log the plan shows */
  hitsDays: number;
  deliveryLogDays: number;
}

export interface ApiKeyView {
  id: string;
  name: string;
  /** 'read' (the read endpoints) or 'manage' (also monitors, webhooks and redelivery through the API) */
  scope: ApiKeyScope;
  /** the displayable start of the key */
  prefix: string;
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
}

export interface CreatedApiKey extends ApiKeyView {
  /** the plaintext key: shown this once, only its SHA-256 is stored */
  key: string;
}

export interface WebhookView {
  /** as stored; use `shownUrl` for display (Discord/Slack tokens masked) */
  url: string;
  shownUrl: string;
  kind: WebhookKindName;
  /** "Discord", "Slack" or "Webhook" */
  label: string;
  isBroken: boolean;
  brokenReason: string | null;
  secretRotatedAt: Date | null;
  /** an overlapped rotation in progress: X-Service-Signature stays on the old secret until then */
  previousSecretUntil: Date | null;
  /** endpoint health, kept by the dispatcher */
  health: WebhookHealthView;
  /** the delivery rules (docs/webhooks.md, "Delivery rules") */
  retryPolicy: RetryPolicyName;
  ordering: OrderingName;
  createdAt: Date;
}

/** none: one attempt; standard: eight more on the schedule of docs/webhooks.md */
export const RETRY_POLICIES = ['none', 'standard'] as const;
export type RetryPolicyName = (typeof RETRY_POLICIES)[number];
/** fifo: the next event goes only once the previous one succeeded or its schedule ran out */
export const ORDERINGS = ['unordered', 'fifo'] as const;
export type OrderingName = (typeof ORDERINGS)[number];

/** a webhook's delivery rules as given (the CLI's strings included); each left out stays as it is */
export interface WebhookSettingsInput {
  retryPolicy?: string | undefined;
  ordering?: string | undefined;
}

/**
 * 'failing': 5 or more failed deliveries in a row (still sent); 'disabled': only failures for 3 days
 * (live events held, not sent) until a test webhook succeeds or it is enabled; 'ok' otherwise.
 */
export interface WebhookHealthView {
  state: 'ok' | 'failing' | 'disabled';
  consecutiveFailures: number;
  /** when the current run of failures began (null without failures) */
  failingSince: Date | null;
  disabledAt: Date | null;
  /** events held while disabled, sent oldest first once enabled again (bounded; see docs/webhooks.md) */
  held: number;
  /** of this hold, dropped past its bounds and logged as skipped */
  heldDropped: number;
}

export type MonitorStatus = 'active' | 'paused';

/** what a monitor sends: `posts` (monitor.hit), `profile` (monitor.profile_changed), `deletes` (monitor.post_deleted) */
export const MONITOR_EVENT_KINDS = ['posts', 'profile', 'deletes'] as const;
export type MonitorEventKind = (typeof MONITOR_EVENT_KINDS)[number];

/** a watched account's health: ok, or why it cannot be read as watched */
export type TargetStatusName = 'ok' | 'suspended' | 'protected' | 'not_found' | 'renamed';

export interface MonitorView {
  id: string;
  /** the watched username; null for a query monitor */
  targetUsername: string | null;
  /** a query monitor's search query (docs/queries.md); null for a username monitor */
  query: string | null;
  /** [] = every post of the target; exclusions written `-word` / `-"a phrase"` */
  keywords: string[];
  /** post types left out and languages kept (@sts/core rules.ts); empty lists = today's behaviour */
  filters: MonitorFilters;
  status: MonitorStatus;
  /** what the monitor sends: `posts` (monitor.hit) and/or `profile` (monitor.profile_changed) */
  events: MonitorEventKind[];
  /** the watched account's health, as the poller last saw it, and since when */
  targetStatus: TargetStatusName;
  targetStatusAt: Date | null;
  intervalSec: number;
  lastCheckAt: Date | null;
  lastError: string | null;
  hitCount: number;
  webhook: WebhookView | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface MonitorInput {
  /** a username, with or without "@"; exactly one of `target` and `query` */
  target?: string | undefined;
  /** a search query (docs/queries.md, @sts/core parseQuery): a query monitor */
  query?: string | undefined;
  /** comma-separated string or list; see @sts/core parseKeywords */
  keywords?: string | readonly string[] | null;
  /** post types left out: "replies,reposts,quotes" or a list; default none */
  exclude?: string | readonly string[] | null;
  /** languages that fire: "en,de" or a list; default any */
  lang?: string | readonly string[] | null;
  /** what it sends: "posts,profile" or a list; default posts only */
  events?: string | readonly string[] | null;
  /** seconds between checks: from the plan's poll interval to 86400; default the plan's */
  intervalSec?: number;
  /** creates the webhook too; its secret is returned once */
  webhookUrl?: string;
  /** the new webhook's delivery rules (default none, unordered) */
  webhookSettings?: WebhookSettingsInput;
}

export interface MonitorEdit {
  /** a username monitor's username */
  target?: string;
  /** a query monitor's query */
  query?: string;
  keywords?: string | readonly string[] | null;
  exclude?: string | readonly string[] | null;
  lang?: string | readonly string[] | null;
  events?: string | readonly string[] | null;
  intervalSec?: number;
}

export interface WebhookWithSecret {
  webhook: WebhookView;
  /** the signing secret in plaintext: returned this once, stored encrypted */
  secret: string;
  /** the same secret in the form the Standard Webhooks libraries take (`whsec_...`) */
  standardSecret: string;
  /** about the URL: saved, but worth showing (e.g. its name did not resolve); [] mostly */
  warnings: string[];
}

export interface DeliveryView {
  id: string;
  /** "monitor.hit" | "monitor.test" */
  event: string;
  /** X-Service-Delivery */
  deliveryId: string;
  hitId: string | null;
  /** `exhausted`: the last attempt of a retry schedule, failed */
  outcome: 'delivered' | 'failed' | 'skipped' | 'exhausted';
  /** the attempt's number in its delivery's retry schedule (1: the first; null: logged before attempts were numbered) */
  attempt: number | null;
  /** when the next attempt of a retrying delivery is due (null: none follows, or it is held) */
  nextAttemptAt: Date | null;
  /**
   * the delivery's next attempt is held: it fell due while the webhook was disabled and goes out,
   * in order, once the webhook is enabled again (true on the delivery's last logged attempt only)
   */
  held: boolean;
  statusCode: number | null;
  latencyMs: number | null;
  error: string | null;
  /** the URL the attempt went to; Discord/Slack tokens masked */
  url: string;
  responseSnippet: string | null;
  createdAt: Date;
}

/** [name, value] as sent or as received, in order */
export type HeaderPair = [string, string];

/**
 * Attempt detail: the request as sent and the response. `request` is null when
 * nothing was sent (skipped, payload too large) or the attempt was logged before the detail was
 * kept; `response` is null when no answer came (refused, timed out, connection error).
 */
export interface DeliveryDetail extends DeliveryView {
  monitorId: string;
  request: { url: string; headers: HeaderPair[]; body: string } | null;
  /** `body`: the first 4 KiB exactly as received */
  response: { status: number; headers: HeaderPair[]; body: Buffer } | null;
}

export interface HitView {
  id: string;
  tweetId: string;
  text: string;
  authorUsername: string;
  tweetCreatedAt: Date;
  detectedAt: Date;
  /** https://x.com/<author>/status/<id> */
  postUrl: string;
}

export interface PageRequest {
  /** from a previous page's nextCursor */
  cursor?: string;
  /** 1–500, default 25 */
  limit?: number;
}

export interface Page<T> {
  items: T[];
  /** pass back for the next (older) page; null on the last page */
  nextCursor: string | null;
}

export interface Queued {
  /** the AMQP message id */
  messageId: string;
  /** X-Service-Delivery of what will be sent */
  deliveryId: string;
}

/** A post as the preview needs it (the caller maps its social source's tweets). */
export interface PreviewTweet {
  id: string;
  /** the author (a query's candidates come from many authors; `from:` is matched against it) */
  authorUsername?: string;
  text: string;
  createdAt: Date;
  lang: string | null;
  referencedTweets?: { type: ReferenceType; id: string }[];
}

export interface PreviewOptions {
  /**
   * newest first, at most `limit`; null when the user does not exist. `priority` is the X
   * rate-limit priority of the read: the preview always asks 'low', so it only spends what the
   * fleet's polls and API reads leave (X_LOW_PRIORITY_RESERVE_PERCENT).
   */
  timeline(username: string, limit: number, priority: 'low'): Promise<PreviewTweet[] | null>;
  /** a query monitor's candidates: the source's search, newest first, at most `limit` */
  search?(query: string, limit: number, priority: 'low'): Promise<PreviewTweet[]>;
  /** a short-lived cache (Redis); without it every preview reads upstream */
  cache?: { get(key: string): Promise<string | null>; set(key: string, value: string, ttlSec: number): Promise<void> };
  /** default PREVIEW_CACHE_SECONDS_DEFAULT; unknown targets are remembered as long */
  cacheSeconds?: number;
  /**
   * Bounds the upstream reads (cache misses) of one account: resolves null when allowed, or the
   * seconds to wait (RateLimitedError, nothing read). `previewLimiter` (./limits.ts) is the Redis
   * one, per minute and per day. Without it there is no bound (the operator's CLI, unit tests).
   */
  limit?: (accountId: string) => Promise<number | null>;
  /** the upstream failure behind a generic "could not read" answer, for the log */
  onUpstreamError?: (err: unknown, target: string) => void;
}
