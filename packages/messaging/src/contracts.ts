/**
 * The message contracts of the `monitor.events` exchange: one zod schema (and its TS type) per
 * routing key, used by the publisher to validate before sending and by the consumer to validate
 * before calling a handler. The wire format is documented in ../asyncapi.yaml.
 *
 * On the wire: the body is the JSON of the payload exactly (for `monitor.*` that is the webhook
 * payload of docs/webhooks.md); AMQP properties carry `messageId`, `type` = routing key,
 * `contentType` 'application/json', `deliveryMode` 2 (persistent) and `timestamp` (seconds); the
 * envelope headers travel as AMQP headers (`accountId` -> `x-account-id`, `hitId` -> `x-hit-id`).
 */
import { z } from 'zod';

/** Topic exchange (durable) that carries every event between services. */
export const EXCHANGE = 'monitor.events';
/** Direct exchange (durable) that receives rejected messages; each queue's DLQ binds to it with the queue's name. */
export const DEAD_LETTER_EXCHANGE = 'monitor.events.dlx';

/** ISO 8601 UTC timestamp with exactly three fraction digits, e.g. 2024-05-01T12:00:00.000Z. */
export const IsoUtcMillis = z.iso.datetime({ precision: 3 });

export const MonitorRef = z
  .object({
    id: z.string().min(1),
    /** null for a query monitor */
    targetUsername: z.string().min(1).nullable(),
    /** a query monitor's search query (docs/queries.md); null for a username monitor */
    query: z.string().min(1).nullable(),
    keywords: z.array(z.string()).nullable(),
  })
  .strict()
  .refine((m) => (m.targetUsername === null) !== (m.query === null), {
    message: 'exactly one of targetUsername and query is set',
  });

/**
 * The monitor reference of a payload, from a monitor row: `keywords` is null when there is no
 * filter, `query` null for a username monitor and `targetUsername` null for a query monitor
 * (docs/webhooks.md).
 */
export function monitorRef(monitor: {
  id: string;
  targetUsername: string | null;
  query?: string | null;
  keywords: readonly string[];
}): z.output<typeof MonitorRef> {
  return {
    id: monitor.id,
    targetUsername: monitor.targetUsername,
    query: monitor.query ?? null,
    keywords: monitor.keywords.length > 0 ? [...monitor.keywords] : null,
  };
}

/**
 * The monitor's event number (docs/webhooks.md "Sequence"): 1, 2, 3 … per monitor over its
 * monitor.hit, monitor.profile_changed and monitor.target_unavailable events, without gaps, fixed
 * when the event is recorded and the same on every retry and redelivery. Absent only on events
 * recorded before events were numbered.
 */
const Sequence = z
  .int()
  .min(1)
  .meta({ description: 'the monitor\'s event number, without gaps (X-Service-Sequence; "Sequence" below)' });

export const MonitorHitPayload = z
  .object({
    event: z.literal('monitor.hit'),
    monitor: MonitorRef,
    tweet: z
      .object({
        id: z.string(),
        text: z.string(),
        authorUsername: z.string(),
        createdAt: IsoUtcMillis,
      })
      .strict(),
    detectedAt: IsoUtcMillis,
    sequence: Sequence.optional(),
  })
  .strict();

export const MonitorTestPayload = z
  .object({
    event: z.literal('monitor.test'),
    monitor: MonitorRef,
    test: z.literal(true),
  })
  .strict();

/** A watched account's public profile, as a monitor.profile_changed payload carries it before and after. */
export const ProfileFields = z
  .object({
    username: z.string().min(1),
    name: z.string(),
    description: z.string().nullable(),
    profileImageUrl: z.string().nullable(),
    verified: z.boolean(),
  })
  .strict();

/** The profile fields a change can name, in the payload's order. */
export const PROFILE_FIELDS = ['username', 'name', 'description', 'profileImageUrl', 'verified'] as const;

/** The watched account's display name, bio, avatar, verified flag or username changed (docs/webhooks.md). */
export const MonitorProfileChangedPayload = z
  .object({
    event: z.literal('monitor.profile_changed'),
    monitor: MonitorRef,
    /** the account's id at the source: a rename keeps it */
    userId: z.string().min(1),
    changed: z.array(z.enum(PROFILE_FIELDS)).min(1),
    before: ProfileFields,
    after: ProfileFields,
    detectedAt: IsoUtcMillis,
    sequence: Sequence.optional(),
  })
  .strict();

/** A target's health: `ok`, or why it cannot be read as watched. */
export const TARGET_STATUSES = ['ok', 'suspended', 'protected', 'not_found', 'renamed'] as const;
export type TargetStatus = (typeof TARGET_STATUSES)[number];

/**
 * The watched account became suspended, protected, not found, or was renamed (the monitor then
 * follows it: `newUsername`), once per change of its status (docs/webhooks.md). Back to `ok` sends
 * nothing; the monitor record's `target_status` shows it.
 */
export const MonitorTargetUnavailablePayload = z
  .object({
    event: z.literal('monitor.target_unavailable'),
    monitor: MonitorRef,
    status: z.enum(['suspended', 'protected', 'not_found', 'renamed']),
    previousStatus: z.enum(TARGET_STATUSES),
    username: z.string().min(1),
    newUsername: z.string().min(1).nullable(),
    detail: z.string(),
    detectedAt: IsoUtcMillis,
    sequence: Sequence.optional(),
  })
  .strict();

/**
 * The watched account deleted a post (docs/webhooks.md), told to the monitors whose `events` name
 * `deletes`: the post's id, the hit the monitor had sent for it (null: none), and when the
 * deletion was seen (X tells no time of its own).
 */
export const MonitorPostDeletedPayload = z
  .object({
    event: z.literal('monitor.post_deleted'),
    monitor: MonitorRef,
    postId: z.string().min(1),
    username: z.string().min(1),
    hit: z.object({ id: z.string().uuid(), text: z.string(), createdAt: IsoUtcMillis }).strict().nullable(),
    deletedAt: IsoUtcMillis,
    sequence: Sequence.optional(),
  })
  .strict();

export const WebhookRedeliverPayload = z.object({ attemptId: z.string().uuid() }).strict();

/**
 * Account events (`account.*`): things a customer should hear about, published by the service
 * that sees them and consumed by the dashboard's mailer (queue `dashboard.account-mail`) and any
 * internal service that binds its own queue. `eventId` is the event's de-duplication key: the
 * same event published twice carries the same id, and the mailer sends at most one mail per id.
 */
const accountEventBase = {
  accountId: z.string().min(1),
  occurredAt: IsoUtcMillis,
};

/** Monthly quota reached 80 % or 100 % (once per account, month and threshold; published by the gateway). */
export const AccountQuotaThresholdPayload = z
  .object({
    ...accountEventBase,
    /** the month, YYYY-MM (UTC) */
    month: z.string().regex(/^\d{4}-(0[1-9]|1[0-2])$/),
    threshold: z.union([z.literal(80), z.literal(100)]),
    used: z.number().int().nonnegative(),
    quota: z.number().int().positive(),
  })
  .strict();

/**
 * A monitor's webhook endpoint is failing (5 failures in a row), broken, or was disabled, or
 * (`held_dropped`) events held while it was disabled were dropped past the hold's bounds, once per
 * hold (published by the dispatcher), or (`due_dropped`) deliveries waiting for a retry or a fifo
 * turn were dropped past the same size bound, once until none waits (the dispatcher), or (`recovered`) a failing, disabled or broken endpoint works
 * again: a delivery or test ping succeeded (the dispatcher), or it was enabled (@sts/usecases
 * `webhooks.enable`: the CLI, the dashboard, the API). The routing key keeps its name.
 */
export const AccountWebhookFailingPayload = z
  .object({
    accountId: z.string().min(1),
    monitorId: z.string().min(1),
    state: z.enum(['failing', 'broken', 'disabled', 'held_dropped', 'due_dropped', 'recovered']),
    consecutiveFailures: z.number().int().nonnegative(),
    occurredAt: IsoUtcMillis,
  })
  .strict();

/**
 * A watched account's status changed (published by the poller through `account_events`, once per
 * account, target and change): one mail naming the account's monitors on that target.
 */
export const AccountTargetStatusPayload = z
  .object({
    ...accountEventBase,
    username: z.string().min(1),
    status: z.enum(TARGET_STATUSES),
    previousStatus: z.enum(TARGET_STATUSES),
    newUsername: z.string().min(1).nullable(),
    monitorIds: z.array(z.string().min(1)).min(1),
  })
  .strict();

/** The Starter trial ends within 3 days (published once per trial by the dashboard's periodic check). */
export const AccountTrialEndingPayload = z.object({ ...accountEventBase, trialEndsAt: IsoUtcMillis }).strict();

/** The Starter trial ended; `pausedMonitorIds` are the monitors paused to fit the Free limit. */
export const AccountTrialEndedPayload = z
  .object({ ...accountEventBase, trialEndedAt: IsoUtcMillis, pausedMonitorIds: z.array(z.string().min(1)) })
  .strict();

/**
 * An API key was created or revoked (published by whoever did it: the dashboard, the admin CLI).
 * The gateways keep an in-process filter of the hashes of all live keys (unknown keys are refused
 * without a database query); a created key is added to it, a revoked one leaves their caches.
 * Best effort: each gateway also rebuilds its filter from PostgreSQL periodically.
 */
export const ApiKeyChangedPayload = z
  .object({
    /** the key's SHA-256, hex (what api_keys.key_hash stores; never the key) */
    keyHash: z.string().regex(/^[0-9a-f]{64}$/),
    change: z.enum(['created', 'revoked']),
    occurredAt: IsoUtcMillis,
  })
  .strict();

/**
 * A post X's filtered stream delivered, handed by the stream holder to the poller replicas that
 * record it (`x.stream.post`, published on one of the poller's partitions: see
 * packages/x-stream/src/handoff.ts). `target` is the matched target's key (the
 * author's lower-cased username); `tweet` is the post as the social source read it.
 */
export const XStreamPostPayload = z
  .object({
    target: z.string().min(1),
    tweet: z
      .object({
        id: z.string().regex(/^\d+$/),
        text: z.string(),
        authorId: z.string(),
        authorUsername: z.string().min(1),
        authorName: z.string(),
        createdAt: IsoUtcMillis,
        lang: z.string().nullable(),
        referencedTweets: z
          .array(z.object({ type: z.enum(['replied_to', 'quoted', 'retweeted']), id: z.string() }).strict())
          .optional(),
      })
      .strict(),
  })
  .strict();

const accountHeaders = z.object({ accountId: z.string() });

export const contracts = {
  'monitor.hit': {
    payload: MonitorHitPayload,
    headers: z.object({ accountId: z.string(), hitId: z.string() }),
  },
  'monitor.test': { payload: MonitorTestPayload, headers: z.object({ accountId: z.string() }) },
  'monitor.profile_changed': {
    payload: MonitorProfileChangedPayload,
    headers: z.object({ accountId: z.string(), eventId: z.string() }),
  },
  'monitor.target_unavailable': {
    payload: MonitorTargetUnavailablePayload,
    headers: z.object({ accountId: z.string(), eventId: z.string() }),
  },
  'monitor.post_deleted': {
    payload: MonitorPostDeletedPayload,
    headers: z.object({ accountId: z.string(), eventId: z.string() }),
  },
  'webhook.redeliver': { payload: WebhookRedeliverPayload, headers: z.object({ accountId: z.string() }) },
  'account.quota.threshold': { payload: AccountQuotaThresholdPayload, headers: accountHeaders },
  'account.webhook.failing': { payload: AccountWebhookFailingPayload, headers: accountHeaders },
  'account.target.status': { payload: AccountTargetStatusPayload, headers: accountHeaders },
  'account.trial.ending': { payload: AccountTrialEndingPayload, headers: accountHeaders },
  'account.trial.ended': { payload: AccountTrialEndedPayload, headers: accountHeaders },
  'apikey.changed': { payload: ApiKeyChangedPayload, headers: accountHeaders },
  'x.stream.post': { payload: XStreamPostPayload, headers: z.object({}) },
} as const;

export type RoutingKey = keyof typeof contracts;
export type PayloadOf<K extends RoutingKey> = z.output<(typeof contracts)[K]['payload']>;
export type HeadersOf<K extends RoutingKey> = z.output<(typeof contracts)[K]['headers']>;
export type MonitorHitEvent = PayloadOf<'monitor.hit'>;
export type MonitorTestEvent = PayloadOf<'monitor.test'>;
export type MonitorProfileChangedEvent = PayloadOf<'monitor.profile_changed'>;
export type MonitorTargetUnavailableEvent = PayloadOf<'monitor.target_unavailable'>;
export type MonitorPostDeletedEvent = PayloadOf<'monitor.post_deleted'>;
export type WebhookRedeliverEvent = PayloadOf<'webhook.redeliver'>;
export type AccountQuotaThresholdEvent = PayloadOf<'account.quota.threshold'>;
export type AccountWebhookFailingEvent = PayloadOf<'account.webhook.failing'>;
export type AccountTargetStatusEvent = PayloadOf<'account.target.status'>;
export type AccountTrialEndingEvent = PayloadOf<'account.trial.ending'>;
export type AccountTrialEndedEvent = PayloadOf<'account.trial.ended'>;
export type ApiKeyChangedEvent = PayloadOf<'apikey.changed'>;
export type XStreamPostEvent = PayloadOf<'x.stream.post'>;

/** The account events, one routing key per kind. */
export const ACCOUNT_ROUTING_KEYS = [
  'account.quota.threshold',
  'account.webhook.failing',
  'account.target.status',
  'account.trial.ending',
  'account.trial.ended',
] as const satisfies readonly RoutingKey[];
export type AccountRoutingKey = (typeof ACCOUNT_ROUTING_KEYS)[number];

/**
 * The de-duplication key of an account event: the notification it stands for. Quota: once per
 * account, month and threshold; webhook: once per monitor, state and UTC day; trial: once per
 * account and trial end. Publishers use it as the AMQP message id; the mailer stores it unique.
 */
export function accountEventKey<K extends AccountRoutingKey>(routingKey: K, payload: PayloadOf<K>): string {
  const p: PayloadOf<AccountRoutingKey> = payload;
  switch (routingKey) {
    case 'account.quota.threshold': {
      const q = p as AccountQuotaThresholdEvent;
      return `quota:${q.accountId}:${q.month}:${q.threshold}`;
    }
    case 'account.webhook.failing': {
      const w = p as AccountWebhookFailingEvent;
      return `webhook:${w.accountId}:${w.monitorId}:${w.state}:${w.occurredAt.slice(0, 10)}`;
    }
    case 'account.target.status': {
      const t = p as AccountTargetStatusEvent;
      return `target:${t.accountId}:${t.username.toLowerCase()}:${t.status}:${t.occurredAt}`;
    }
    case 'account.trial.ending':
      return `trial-ending:${p.accountId}:${(p as AccountTrialEndingEvent).trialEndsAt}`;
    case 'account.trial.ended':
      return `trial-ended:${p.accountId}:${(p as AccountTrialEndedEvent).trialEndedAt}`;
  }
}

/** A received message, validated against its contract. */
export interface Envelope<K extends RoutingKey> {
  routingKey: K;
  messageId: string;
  payload: PayloadOf<K>;
  headers: HeadersOf<K>;
  /** true when the broker delivered this message before (to this or another consumer) */
  redelivered: boolean;
  /** the AMQP `timestamp` property (seconds precision), or null when the publisher set none */
  publishedAt: Date | null;
}

export const ROUTING_KEYS = Object.keys(contracts) as RoutingKey[];

/** The routing key on the wire: `<routingKey>.<partition>` for a partition, else the key itself. */
export function wireRoutingKey(routingKey: string, partition: number | undefined): string {
  if (partition === undefined) return routingKey;
  if (!Number.isInteger(partition) || partition < 0) throw new TypeError('partition must be a non-negative integer');
  return `${routingKey}.${partition}`;
}

export function isRoutingKey(value: unknown): value is RoutingKey {
  return typeof value === 'string' && Object.prototype.hasOwnProperty.call(contracts, value);
}

/** Envelope header field -> AMQP header name. */
export const HEADER_NAMES = { accountId: 'x-account-id', hitId: 'x-hit-id', eventId: 'x-event-id' } as const;
export type EnvelopeHeaderField = keyof typeof HEADER_NAMES;

/** Thrown (or used as the dead-letter reason) when a message does not satisfy its contract. */
export class ContractError extends Error {
  override name = 'ContractError';
  constructor(
    message: string,
    readonly issues: string[] = [],
  ) {
    super(issues.length ? `${message}: ${issues.join('; ')}` : message);
  }
}

function describeIssues(error: z.ZodError): string[] {
  return error.issues.map((i) => `${i.path.length ? i.path.join('.') : '(root)'}: ${i.message}`);
}

/** Validates a payload against the routing key's contract; returns the parsed value or throws ContractError. */
export function parsePayload<K extends RoutingKey>(routingKey: K, payload: unknown): PayloadOf<K> {
  if (!isRoutingKey(routingKey)) throw new ContractError(`unknown routing key ${JSON.stringify(routingKey)}`);
  const result = contracts[routingKey].payload.safeParse(payload);
  if (!result.success) throw new ContractError(`invalid ${routingKey} payload`, describeIssues(result.error));
  return result.data as PayloadOf<K>;
}

/** Validates envelope headers against the routing key's contract; returns the parsed value or throws ContractError. */
export function parseHeaders<K extends RoutingKey>(routingKey: K, headers: unknown): HeadersOf<K> {
  if (!isRoutingKey(routingKey)) throw new ContractError(`unknown routing key ${JSON.stringify(routingKey)}`);
  const result = contracts[routingKey].headers.safeParse(headers);
  if (!result.success) throw new ContractError(`invalid ${routingKey} headers`, describeIssues(result.error));
  return result.data as HeadersOf<K>;
}

/** Envelope headers -> AMQP headers (`accountId` -> `x-account-id`, ...). */
export function toAmqpHeaders(headers: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(headers)) {
    const name = (HEADER_NAMES as Record<string, string>)[field];
    if (name === undefined) throw new ContractError(`no AMQP header is defined for envelope header ${field}`);
    out[name] = value;
  }
  return out;
}

/** AMQP headers -> envelope header fields (only the known `x-*` names; everything else is ignored). */
export function fromAmqpHeaders(amqpHeaders: Record<string, unknown> | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (!amqpHeaders) return out;
  for (const [field, name] of Object.entries(HEADER_NAMES)) {
    let value = amqpHeaders[name];
    if (Buffer.isBuffer(value)) value = value.toString('utf8');
    if (value !== undefined) out[field] = value;
  }
  return out;
}

/**
 * An envelope of any of `K`, as a union discriminated by `routingKey` (so a `switch` on the
 * routing key narrows the payload and headers). `Envelope<'a' | 'b'>` is not such a union.
 */
export type EnvelopeOf<K extends RoutingKey = RoutingKey> = { [P in K]: Envelope<P> }[K];

/** A `monitor.test` payload (docs/webhooks.md) for a monitor. */
export function monitorTestPayload(monitor: PayloadOf<'monitor.test'>['monitor']): MonitorTestEvent {
  return { event: 'monitor.test', monitor: { ...monitor }, test: true };
}

/** A `monitor.hit` payload (docs/webhooks.md), fields in the documented order. */
export function monitorHitPayload(
  monitor: MonitorHitEvent['monitor'],
  tweet: MonitorHitEvent['tweet'],
  detectedAt: string,
  sequence?: number | null,
): MonitorHitEvent {
  const hit: MonitorHitEvent = { event: 'monitor.hit', monitor: { ...monitor }, tweet: { ...tweet }, detectedAt };
  return sequence == null ? hit : { ...hit, sequence };
}
