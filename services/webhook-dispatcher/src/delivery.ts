/**
 * One delivery as one flow, read from top to bottom in `deliver` (the shape of Svix's worker:
 * prepare_dispatch, make_http_call, handle_successful_dispatch / handle_failed_dispatch), each
 * step a method whose result is a tagged union the flow branches on:
 *
 *   prepare  the job (messages.ts) of a message or of a due delivery (a retry, a fifo turn),
 *            whether it goes out at all (skip reasons), whether it waits for its turn (fifo), the
 *            body, its size limit and the signing secrets → settled | unsent | queued | ready
 *   acquire  a slot in the endpoint's lane (lanes.ts); a backed-up lane parks the message on the
 *            broker (adapters/parking.ts) → acquired | settled
 *   send     one signed HTTPS attempt (fresh timestamp and signature, a CLIENT span); Discord and
 *            Slack 429 answers are the platform's flow control: the same delivery (same
 *            X-Service-Delivery) goes again after the wait the platform names, at most
 *            RATE_LIMIT_MAX_WAITS times and RATE_LIMIT_MAX_TOTAL_MS in all, each attempt recorded
 *            → answered (the final answer); the lane's slot is released right after it
 *   conclude what the answer makes of the delivery: delivered, failed, retrying (its next attempt
 *            due on the webhook's schedule, domain/retrySchedule.ts) or exhausted
 *   record   the attempt row (batched into one INSERT per tick by the repository; with its due
 *            row in one statement when the delivery has one), its metric and its log line
 *   settle   the final answer counts towards the endpoint's health and broken flag
 *
 * The flow calls the other files and they return to it; none calls back into it. The pure rules
 * are in domain/ (skip reasons, 429 waits, health). app.ts owns the message's life around it
 * (fail closed, drain, what an error becomes).
 */
import { inSpan, SpanKind, tracingEnabled } from '@sts/telemetry';
import { createSecretBox, SecretBoxError, type SecretBox } from '@sts/core';
import type { Logger } from '@sts/common';
import { signedHeaders } from '@sts/signing';
import { buildBody, MAX_BODY_BYTES, sequenceHeader, type WebhookKind, type WebhookPayload } from './domain/payloads';
import { brokenReasonFor, redactWebhookUrl, skipReason } from './domain/policy';
import { requestHeaderPairs } from './domain/attemptDetail';
import { healthNeedsUpdate } from './domain/health';
import { narrowEnvelope, type Envelope } from '@sts/messaging';
import {
  laneKey,
  paceRuleFor,
  rateLimitGiveUpError,
  rateLimitWait,
  rateLimitWaitError,
  type PaceRule,
} from './domain/pacing';
import type { HttpsSender, SendResult } from './adapters/httpsSender';
import type { ConsumeOutcome, DeliveryEvent, DispatcherRoutingKey } from './adapters/consumer';
import type { Parking } from './adapters/parking';
import type {
  ClaimedDue,
  DispatcherRepository,
  DueChange,
  MonitorContext,
  NewAttempt,
  NewDue,
} from './adapters/repository';
import { afterFailure } from './domain/retrySchedule';
import type { LaneScheduler, LaneSlot } from './lanes';
import { SCHEDULED_EVENTS, type createJobSources } from './messages';
import type { DispatcherMetrics } from './metrics';

interface SentRequest {
  headers: Record<string, string>;
  body: string;
  /** the body's UTF-8 bytes: what is signed and sent */
  bytes: Buffer;
}

export interface Job {
  event: DeliveryEvent;
  deliveryId: string;
  hitId: string | null;
  monitor: MonitorContext;
  payload: WebhookPayload;
  detectedAt?: string;
}

/** A job that goes out: its monitor has a webhook and no skip reason. */
type SendableJob = Job & { monitor: MonitorContext & { webhook: NonNullable<MonitorContext['webhook']> } };

/** A stored secret cannot be decrypted: a server-side fault (wrong SECRETS_ENCRYPTION_KEY), not the message's. */
export class SecretsUnavailableError extends Error {
  override name = 'SecretsUnavailableError';
}

/** The dispatcher is stopping and this delivery did not finish within the grace period; nothing was logged. */
export class DrainAbortError extends Error {
  override name = 'DrainAbortError';
}

export interface DeliveryFlowOptions {
  repository: DispatcherRepository;
  sender: HttpsSender;
  logger: Logger;
  metrics: DispatcherMetrics;
  /** message or due delivery → job (messages.ts) */
  jobs: ReturnType<typeof createJobSources>;
  lanes: LaneScheduler;
  secretsKey: string | Buffer;
  secretsOldKeys?: readonly string[];
  now: () => Date;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

/** A stored secret in plain text, decrypted once per rotation. */
class SecretCache {
  private readonly box: SecretBox;
  // Decrypting is cheap but not free at 1000/s; the ciphertext changes on every rotation, so a
  // cache keyed by it can never hand out an old secret.
  private readonly secrets = new Map<string, string>();

  constructor(key: string | Buffer, oldKeys: readonly string[] = []) {
    this.box = createSecretBox(key, oldKeys);
  }

  get(monitorId: string, ciphertext: string): string {
    const key = `${monitorId}|${ciphertext}`;
    let s = this.secrets.get(key);
    if (s === undefined) {
      s = this.decrypt(monitorId, ciphertext);
      if (this.secrets.size >= 10_000) this.secrets.clear();
      this.secrets.set(key, s);
    }
    return s;
  }

  private decrypt(monitorId: string, ciphertext: string): string {
    try {
      return this.box.decrypt(ciphertext, monitorId);
    } catch (err) {
      if (err instanceof SecretBoxError) {
        throw new SecretsUnavailableError(
          'a stored webhook signing secret cannot be decrypted: SECRETS_ENCRYPTION_KEY is not the key the secrets were stored with',
        );
      }
      throw err;
    }
  }
}

interface SigningKeys {
  secret: string;
  standardSecrets: string[];
}

/**
 * What a delivery comes from: a message (its first attempt), a due delivery claimed from the
 * database (a retry, a fifo turn), or an event held while its endpoint was disabled (hold.ts)
 */
export type Source =
  | { kind: 'message'; env: Envelope<DispatcherRoutingKey> }
  | { kind: 'due'; due: ClaimedDue }
  | { kind: 'held'; job: Job; attempt: number };

/** the hold of a disabled endpoint's events (hold.ts): true when it took the job (a due one: its row too) */
interface Hold {
  hold(job: Job, redelivery: boolean, due?: { attempt: number }): Promise<boolean>;
}

/** the message is settled without (another) attempt */
type Settled = { kind: 'settled'; outcome: ConsumeOutcome };

/** prepare: it settles, its job is logged without a request, it waits its turn, or it is ready to go out */
type Prepared = Settled | Unsent | Queued | Ready;

/** a job that goes no further than its row: skipped, or its body too large */
interface Unsent {
  kind: 'unsent';
  row: NewAttempt;
  webhookKind: WebhookKind | 'none';
  /** a due delivery's row goes with it */
  due: DueChange | undefined;
}

/** a fifo webhook's event: it waits in the database for its turn */
interface Queued {
  kind: 'queued';
  due: NewDue;
}

/** A delivery that passed prepare: what each of its attempts sends, and to which lane. */
interface Ready {
  kind: 'ready';
  job: SendableJob;
  body: string;
  /** the body encoded once: signed, sent and measured as these bytes */
  bytes: Buffer;
  keys: SigningKeys;
  endpointKey: string;
  pace: PaceRule | null;
  /** this attempt's number (1: the first) */
  attempt: number;
  /** the webhook's schedule applies (not to a test or a requested redelivery) */
  scheduled: boolean;
  /** it came from a due row, which its last attempt settles */
  fromDue: boolean;
  /** a requested redelivery: when it succeeds, a retry its delivery may still have waiting is moot */
  redelivery: boolean;
}

/** acquire: the lane's slot, or the message settles (parked, or handed back while stopping) */
type Acquired = { kind: 'acquired'; slot: LaneSlot } | Settled;

/** One attempt: the request as sent and what came back. */
interface SentAttempt {
  request: SentRequest;
  result: SendResult;
}

/** send: the endpoint's final answer (after any 429 waits) and the row that records it */
interface Answered {
  kind: 'answered';
  sent: SentAttempt;
  row: NewAttempt;
}

/** conclude: what the final answer makes of the delivery, the row that logs it and the change to its due row */
interface Concluded {
  kind: 'delivered' | 'failed' | 'retrying' | 'exhausted';
  row: NewAttempt;
  due: DueChange | undefined;
}

/** The 429 waits of one delivery so far. */
interface Waits {
  count: number;
  totalMs: number;
}

/** The columns every attempt row of a job shares. */
function attemptBase(job: Job, attempt: number) {
  const webhook = job.monitor.webhook;
  return {
    attempt,
    nextAttemptAt: null,
    monitorId: job.monitor.id,
    hitId: job.hitId,
    event: job.event,
    deliveryId: job.deliveryId,
    url: webhook ? redactWebhookUrl(webhook.url, webhook.kind) : '',
  };
}

/** the row of a job that did not get as far as a request (skipped, or its body too large) */
function unsentAttempt(job: Job, attempt: number, outcome: 'skipped' | 'failed', error: string): NewAttempt {
  return { ...attemptBase(job, attempt), outcome, statusCode: null, latencyMs: null, error, responseSnippet: null };
}

/** the attempt row, with its detail: the request as sent and what came back */
function sentAttempt(job: Job, attempt: number, { request, result }: SentAttempt, error: string | null): NewAttempt {
  return {
    ...attemptBase(job, attempt),
    outcome: result.outcome,
    statusCode: result.statusCode,
    latencyMs: result.latencyMs,
    error,
    responseSnippet: result.responseSnippet,
    requestHeaders: requestHeaderPairs(request.headers, request.bytes),
    requestBody: request.body,
    responseHeaders: result.statusCode === null ? null : result.responseHeaders,
    responseBody: result.responseBody,
  };
}

/** the due row of a job's attempt `attempt`, due at `at` */
function dueOf(job: SendableJob, attempt: number, at: Date): NewDue {
  return {
    deliveryId: job.deliveryId,
    monitorId: job.monitor.id,
    webhookId: job.monitor.webhook.id,
    event: job.event,
    hitId: job.hitId,
    payload: job.payload,
    attempt,
    dueAt: at,
  };
}

/** The flow of one delivery (see the top of the file), sharing the secret cache, repository and metrics. */
class DeliveryFlow {
  private readonly secrets: SecretCache;
  private parking: Parking | null = null;
  private holding: Hold | null = null;

  constructor(private readonly options: DeliveryFlowOptions) {
    this.secrets = new SecretCache(options.secretsKey, options.secretsOldKeys);
  }

  /** from now on a backed-up lane's messages are parked on the broker (without: they wait in memory) */
  useParking(parking: Parking | null): void {
    this.parking = parking;
  }

  /** from now on a disabled endpoint's new events are held (without: logged as skipped) */
  useHolding(holding: Hold | null): void {
    this.holding = holding;
  }

  /**
   * One delivery, prepare → acquire the lane → send → conclude → record → settle. Resolves to
   * what becomes of its message (`requeue` of a due delivery: give its claim back) once its last
   * attempt row is committed. Throws DrainAbortError (nothing logged for the unfinished attempt)
   * when `signal` aborts first, SecretsUnavailableError when the secret cannot be decrypted.
   */
  async deliver(source: Source, signal: AbortSignal): Promise<ConsumeOutcome> {
    const { metrics } = this.options;
    const taken = performance.now();
    const prepared = await this.prepare(source);
    switch (prepared.kind) {
      case 'settled':
        return prepared.outcome;
      case 'unsent':
        await this.record(prepared.row, prepared.webhookKind, prepared.due);
        return 'ack';
      case 'queued':
        await this.options.repository.enqueueDue(prepared.due);
        return 'ack';
      case 'ready':
        break;
    }
    const ready = performance.now();
    metrics.prepare.observe({ source: source.kind }, (ready - taken) / 1000);
    const acquired = await this.acquire(source, prepared);
    metrics.laneWait.observe({ source: source.kind }, (performance.now() - ready) / 1000);
    if (acquired.kind === 'settled') return acquired.outcome;
    let answered: Answered;
    try {
      answered = await this.send(prepared, acquired.slot, signal);
    } finally {
      acquired.slot.release(); // free for the next delivery before the row is written
    }
    const concluded = this.conclude(prepared, answered);
    await this.record(concluded.row, prepared.job.monitor.webhook.kind, concluded.due);
    await this.settle(prepared.job, answered.sent.result);
    return 'ack';
  }

  // prepare ---------------------------------------------------------------------------------

  /** the job, its body and its secrets, or why it goes no further (or not yet) */
  private async prepare(source: Source): Promise<Prepared> {
    const found = await this.jobOf(source);
    if (found.kind === 'settled') return found;
    const { job } = found;
    const redelivery = source.kind === 'message' && source.env.routingKey === 'webhook.redeliver';
    if (await this.held(source, job, redelivery)) return { kind: 'settled', outcome: 'ack' };
    const fromDue = source.kind === 'due';
    const attempt = fromDue ? source.due.attempt : source.kind === 'held' ? source.attempt : 1;
    const done: DueChange | undefined = fromDue
      ? { kind: 'done', deliveryId: job.deliveryId, claimed: attempt }
      : undefined;
    const webhook = job.monitor.webhook;
    const skip = skipReason(job.event, job.monitor, this.options.now());
    if (!webhook || skip) {
      const row = unsentAttempt(job, attempt, 'skipped', skip ?? 'monitor has no webhook');
      return { kind: 'unsent', row, webhookKind: webhook?.kind ?? 'none', due: done };
    }
    const sendable: SendableJob = { ...job, monitor: { ...job.monitor, webhook } };
    const scheduled = source.kind !== 'message' || SCHEDULED_EVENTS.includes(source.env.routingKey);
    if (source.kind === 'message' && scheduled && webhook.ordering === 'fifo')
      return { kind: 'queued', due: dueOf(sendable, 1, this.options.now()) };
    const body = buildBody(webhook.kind, job.payload);
    const bytes = Buffer.from(body, 'utf8');
    const size = bytes.length;
    if (size > MAX_BODY_BYTES) {
      const error = `payload is ${size} bytes, more than the ${MAX_BODY_BYTES}-byte limit`;
      return {
        kind: 'unsent',
        row: unsentAttempt(job, attempt, 'failed', error),
        webhookKind: webhook.kind,
        due: done,
      };
    }
    const keys = this.signingKeys(sendable);
    const endpointKey = laneKey(webhook.kind, webhook.url);
    const pace = paceRuleFor(webhook.kind);
    const rules = { attempt, scheduled, fromDue, redelivery };
    return { kind: 'ready', job: sendable, body, bytes, keys, endpointKey, pace, ...rules };
  }

  /**
   * Whether the hold took the job: a message's live event, or a retry (fifo turn) that fell due,
   * while its endpoint is disabled or its held events still wait (a held event is not held again)
   */
  private async held(source: Source, job: Job, redelivery: boolean): Promise<boolean> {
    if (!this.holding || source.kind === 'held') return false;
    if (source.kind === 'due') return this.holding.hold(job, false, { attempt: source.due.attempt });
    return this.holding.hold(job, redelivery);
  }

  /** the job of a message, of a due delivery, or of a held event */
  private jobOf(source: Source): ReturnType<DeliveryFlowOptions['jobs']['ofDue']> {
    const { jobs } = this.options;
    switch (source.kind) {
      case 'message':
        return jobs.ofMessage(narrowEnvelope(source.env));
      case 'due':
        return jobs.ofDue(source.due);
      case 'held':
        return Promise.resolve({ kind: 'job', job: source.job });
    }
  }

  /**
   * The secrets of a delivery. During an overlapped rotation X-Service-Signature stays on the old
   * secret and webhook-signature carries the new one and the old one; afterwards only the new.
   */
  private signingKeys(job: SendableJob): SigningKeys {
    const webhook = job.monitor.webhook;
    const current = this.secrets.get(job.monitor.id, webhook.secretCiphertext);
    const until = webhook.previousSecretUntil;
    if (!webhook.previousSecretCiphertext || !until || until.getTime() <= this.options.now().getTime()) {
      return { secret: current, standardSecrets: [current] };
    }
    const previous = this.secrets.get(job.monitor.id, webhook.previousSecretCiphertext);
    return { secret: previous, standardSecrets: [current, previous] };
  }

  // acquire the lane ------------------------------------------------------------------------

  /**
   * A slot in the endpoint's lane; a backed-up lane parks a message (or, when parking fails, it
   * waits). A due delivery waits (its claim bounds how many do) and is never parked.
   */
  private async acquire(source: Source, ready: Ready): Promise<Acquired> {
    const { lanes, metrics } = this.options;
    const env = source.kind === 'message' ? source.env : null;
    let mayDefer = env !== null && this.parking !== null;
    for (;;) {
      const r = await lanes.acquire(ready.endpointKey, ready.pace, mayDefer, ready.job.monitor.accountId);
      if (r.kind === 'acquired') return r;
      if (r.kind === 'released') return { kind: 'settled', outcome: 'requeue' };
      if (env && this.parking && (await this.parking.park(env))) {
        metrics.messages.inc({ routing_key: env.routingKey, result: 'deferred' });
        return { kind: 'settled', outcome: 'ack' };
      }
      mayDefer = false; // parking failed: wait in memory like before
    }
  }

  // send ------------------------------------------------------------------------------------

  /** attempts until the endpoint's final answer: a Discord or Slack 429 with a wait left is waited out and sent again */
  private async send(ready: Ready, slot: LaneSlot, signal: AbortSignal): Promise<Answered> {
    const { job } = ready;
    const kind = job.monitor.webhook.kind;
    const waits: Waits = { count: 0, totalMs: 0 };
    for (;;) {
      const sent = await this.attempt(ready, signal);
      const wait = rateLimitWait(kind, sent.result, waits.count, waits.totalMs, Date.now());
      if (wait === null) {
        const error =
          sent.result.statusCode === 429 && kind !== 'native'
            ? rateLimitGiveUpError(kind, waits.count, waits.totalMs)
            : sent.result.error;
        return { kind: 'answered', sent, row: sentAttempt(job, ready.attempt, sent, error) };
      }
      waits.count++;
      waits.totalMs += wait;
      await this.record(sentAttempt(job, ready.attempt, sent, rateLimitWaitError(kind, wait, waits.count)), kind);
      await this.waitOut(wait, slot, signal);
    }
  }

  /** one signed request; the attempt is a CLIENT span under the message's CONSUMER span (OpenTelemetry, when on) */
  private async attempt(ready: Ready, signal: AbortSignal): Promise<SentAttempt> {
    const { job, body, bytes, keys, endpointKey } = ready;
    const webhook = job.monitor.webhook;
    const sequence = sequenceHeader(webhook.kind, job.payload);
    const headers = signedHeaders({ ...keys, event: job.event, deliveryId: job.deliveryId, body: bytes, sequence });
    const send = () => this.options.sender.send({ url: webhook.url, body: bytes, headers, endpointKey, signal });
    const result = !tracingEnabled()
      ? await send()
      : await inSpan(
          'webhook attempt',
          SpanKind.CLIENT,
          { 'webhook.kind': webhook.kind, 'webhook.delivery_id': job.deliveryId },
          send,
          (span, r) =>
            span.setAttributes({ 'webhook.outcome': r.outcome, 'http.response.status_code': r.statusCode ?? 0 }),
        );
    if (signal.aborted) throw new DrainAbortError('stopping: delivery not finished within the grace period');
    this.observe(job, result);
    return { request: { headers, body, bytes }, result };
  }

  private observe(job: SendableJob, result: SendResult): void {
    const { metrics } = this.options;
    metrics.latency.observe({ outcome: result.outcome }, result.latencyMs / 1000);
    if (job.detectedAt && result.outcome === 'delivered') {
      const age = (Date.now() - Date.parse(job.detectedAt)) / 1000;
      if (Number.isFinite(age) && age >= 0) metrics.hitAge.observe(age);
    }
  }

  // conclude --------------------------------------------------------------------------------

  /** delivered, failed for good, retrying on the webhook's schedule, or the schedule exhausted */
  private conclude(ready: Ready, answered: Answered): Concluded {
    const { job, attempt } = ready;
    const { result } = answered.sent;
    // a due row is settled only at the attempt it was claimed at (another replica may have moved it on)
    const claimed = ready.fromDue ? { claimed: attempt } : {};
    const done: DueChange | undefined = ready.fromDue
      ? { kind: 'done', deliveryId: job.deliveryId, ...claimed }
      : undefined;
    if (result.outcome === 'delivered') {
      const settles = ready.redelivery ? { kind: 'done' as const, deliveryId: job.deliveryId } : done;
      return { kind: 'delivered', row: answered.row, due: settles };
    }
    if (!ready.scheduled) return { kind: 'failed', row: answered.row, due: done };
    const policy = job.monitor.webhook.retryPolicy;
    const next = afterFailure({ policy, attempt, result, now: Date.now(), random: Math.random });
    switch (next.kind) {
      case 'final':
        return { kind: 'failed', row: answered.row, due: done };
      case 'exhausted':
        return { kind: 'exhausted', row: { ...answered.row, outcome: 'exhausted' }, due: done };
      case 'retry':
        return {
          kind: 'retrying',
          row: { ...answered.row, nextAttemptAt: next.at },
          due: { kind: 'due', due: dueOf(job, next.attempt, next.at), ...claimed },
        };
    }
  }

  // record ----------------------------------------------------------------------------------

  private async record(attempt: NewAttempt, kind: WebhookKind | 'none', due?: DueChange): Promise<void> {
    const started = performance.now();
    await this.options.repository.recordAttempt(attempt, due);
    this.options.metrics.record.observe({ write: due ? 'with_due' : 'batched' }, (performance.now() - started) / 1000);
    this.options.metrics.attempts.inc({ event: attempt.event, kind, outcome: attempt.outcome });
    this.log(attempt);
  }

  private log(attempt: NewAttempt): void {
    const { logger } = this.options;
    // winston formats (timestamp, redaction, JSON) every entry before the transport drops the ones
    // below its level: at `info` the per-delivery line would cost that for nothing
    if (attempt.outcome === 'delivered' && !logger.isLevelEnabled('verbose')) return;
    const fields = {
      event: attempt.event,
      deliveryId: attempt.deliveryId,
      monitorId: attempt.monitorId,
      hitId: attempt.hitId,
      outcome: attempt.outcome,
      attempt: attempt.attempt,
      nextAttemptAt: attempt.nextAttemptAt?.toISOString() ?? null,
      statusCode: attempt.statusCode,
      latencyMs: attempt.latencyMs,
      error: attempt.error,
      url: attempt.url,
    };
    if (attempt.outcome === 'delivered') logger.verbose('webhook delivered', fields);
    else if (attempt.outcome === 'skipped') logger.info('webhook skipped', fields);
    else if (attempt.outcome === 'exhausted')
      logger.warn('webhook delivery failed; its retry schedule is exhausted', fields);
    else logger.warn('webhook delivery failed', fields);
  }

  /** a 429 with a wait left: the lane pauses for the platform, then the same delivery goes again */
  private async waitOut(wait: number, slot: LaneSlot, signal: AbortSignal): Promise<void> {
    slot.blockUntil(Date.now() + wait);
    await sleep(wait, signal);
    if (signal.aborted) throw new DrainAbortError('stopping while waiting out a 429');
    await slot.paced();
  }

  // settle ----------------------------------------------------------------------------------

  /** the endpoint's final answer counts towards its health and its broken flag */
  private async settle(job: SendableJob, result: SendResult): Promise<void> {
    await this.updateHealth(job, result);
    await this.updateBrokenFlag(job, result);
  }

  private async updateBrokenFlag(job: SendableJob, result: SendResult): Promise<void> {
    const { repository, logger } = this.options;
    const webhook = job.monitor.webhook;
    const broken = brokenReasonFor(webhook.kind, result.statusCode);
    const url = redactWebhookUrl(webhook.url, webhook.kind);
    if (broken) {
      await repository.markBroken(webhook.id, broken);
      logger.warn('webhook endpoint marked broken', { monitorId: job.monitor.id, url, reason: broken });
    } else if (result.outcome === 'delivered' && webhook.isBroken) {
      await repository.clearBroken(webhook.id);
      logger.info('webhook endpoint works again', { monitorId: job.monitor.id, url });
    }
  }

  /**
   * Counts the final outcome of a send towards the endpoint's health (not for a healthy endpoint's
   * success: nothing would change). The repository writes the customer's notification with it.
   */
  private async updateHealth(job: SendableJob, result: SendResult): Promise<void> {
    const { repository, logger } = this.options;
    const webhook = job.monitor.webhook;
    const delivered = result.outcome === 'delivered';
    if (!healthNeedsUpdate(webhook, delivered)) return;
    const change = await repository.recordHealth({ endpointId: webhook.id, delivered, at: this.options.now() });
    if (!change) return;
    const fields = {
      monitorId: job.monitor.id,
      url: redactWebhookUrl(webhook.url, webhook.kind),
      consecutiveFailures: change.consecutiveFailures,
      firstFailureAt: change.firstFailureAt?.toISOString() ?? null,
    };
    if (change.becameDisabled)
      logger.warn('webhook endpoint disabled: live events are held until it is enabled again', fields);
    else if (change.becameFailing) logger.warn('webhook endpoint failing', fields);
    else if (delivered && webhook.disabledAt)
      logger.info('webhook endpoint re-enabled by a successful delivery', fields);
  }
}

export function createDeliveryFlow(options: DeliveryFlowOptions): DeliveryFlow {
  return new DeliveryFlow(options);
}
