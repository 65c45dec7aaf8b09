/**
 * One delivery as one flow, read from top to bottom in `deliver` (the shape of Svix's worker:
 * prepare_dispatch, make_http_call, handle_successful_dispatch / handle_failed_dispatch), each
 * step a method whose result is a tagged union the flow branches on. The consumer hands a message
 * to `handle`, the due poller a retry or fifo turn to `handleDue`, the hold a held event to
 * `deliver`:
 *
 *   prepare  the job (messages.ts) of a message or of a due delivery (a retry, a fifo turn), then
 *            its plan (domain/plan.ts, pure, asking the policy, the body and the pacing once
 *            each): held, logged without a request, queued for its fifo turn, or sent with its
 *            body, sequence header, lane and 429 rule; then the signing secrets
 *            → settled | unsent | queued | ready
 *   acquire  a slot in the endpoint's lane (lanes.ts); a backed-up lane parks the message on the
 *            broker (adapters/parking.ts) → acquired | settled
 *   send     one signed HTTPS attempt (fresh timestamp and signature, a CLIENT span); Discord and
 *            Slack 429 answers are the platform's flow control (the pacing's 429 rule): the same
 *            delivery (same X-Service-Delivery) goes again after the wait the platform names, at most
 *            RATE_LIMIT_MAX_WAITS times and RATE_LIMIT_MAX_TOTAL_MS in all, each attempt recorded
 *            → answered (the final answer); the lane's slot is released right after it
 *   conclude what the answer makes of the delivery: delivered, failed, retrying (its next attempt
 *            due on the webhook's schedule, domain/retrySchedule.ts) or exhausted
 *   record   the attempt row (batched into one INSERT per tick by adapters/attemptWriter.ts; with its due
 *            row in one statement when the delivery has one), its metric and its log line
 *   settle   the final answer counts towards the endpoint's health and broken flag
 *
 * The flow calls the other files and they return to it; none calls back into it. The pure rules
 * are in domain/ (policy, bodies, pacing, retry schedule, health). life.ts holds each delivery's
 * life around it (taken or handed back, in flight for the drain, what an error becomes).
 */
import { inSpan, SpanKind, tracingEnabled } from '@sts/telemetry';
import type { Logger } from '@sts/common';
import { signedHeaders } from '@sts/signing';
import type { WebhookKind } from './domain/payloads';
import { planDelivery } from './domain/plan';
import { brokenReasonFor } from './domain/policy';
import { healthNeedsUpdate } from './domain/health';
import type { EnvelopeOf } from '@sts/messaging';
import type { Pacing } from './domain/pacing';
import type { HttpsSender, SendResult } from './adapters/httpsSender';
import { DISPATCHER_BINDINGS, type ConsumeOutcome, type DispatcherRoutingKey } from './adapters/consumer';
import type { Parking } from './adapters/parking';
import { SigningSecrets, type SigningKeys } from './adapters/secrets';
import type { AttemptWriter, NewAttempt } from './adapters/attemptWriter';
import { DrainAbortError, type DispatchLife } from './life';
import type { ClaimedDue, DueChange, DueStore, NewDue } from './adapters/dueStore';
import type { MonitorContext } from './adapters/monitorReader';
import { afterFailure } from './domain/retrySchedule';
import type { LaneScheduler, LaneSlot } from './lanes';
import type { createJobSources, Job } from './messages';
import type { DispatcherMetrics } from './metrics';

/** A job that goes out: its monitor has a webhook and no skip reason. */
type SendableJob = Job & { monitor: MonitorContext & { webhook: NonNullable<MonitorContext['webhook']> } };

export interface DeliveryFlowOptions {
  /** the attempt rows, the endpoint's health and broken flag */
  attempts: AttemptWriter;
  /** a fifo webhook's events wait there for their turn */
  dueStore: Pick<DueStore, 'enqueueDue'>;
  sender: HttpsSender;
  logger: Logger;
  metrics: DispatcherMetrics;
  /** message or due delivery → job (messages.ts) */
  jobs: ReturnType<typeof createJobSources>;
  lanes: LaneScheduler;
  /** whether work is taken, what is in flight, what an error makes of a message */
  life: DispatchLife;
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

/**
 * What a delivery comes from: a message (its first attempt), a due delivery claimed from the
 * database (a retry, a fifo turn), or an event held while its endpoint was disabled (hold.ts)
 */
export type Source =
  | { kind: 'message'; env: EnvelopeOf<DispatcherRoutingKey> }
  | { kind: 'due'; due: ClaimedDue }
  | { kind: 'held'; job: Job; attempt: number };

/** the hold of a disabled endpoint's events (hold.ts): takes a job the policy holds (a due one: its row too) */
interface Hold {
  hold(job: Job, url: string, due?: { attempt: number }): Promise<void>;
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
  /** the endpoint's URL as the attempt log stores it */
  url: string;
  body: string;
  /** the body encoded once: signed, sent and measured as these bytes */
  bytes: Buffer;
  /** the sequence header (a fifo webhook's order), the same on every attempt */
  sequence: number | undefined;
  keys: SigningKeys;
  /** the lane, the pace and the 429 rule (domain/pacing.ts) */
  pacing: Pacing;
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

/** send: the endpoint's final answer (after any 429 waits) and the row that records it */
interface Answered {
  kind: 'answered';
  /** what came back, with the request's headers as sent */
  result: SendResult;
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

/** The columns every attempt row of a job shares; `url`: its endpoint's as the log stores it. */
function attemptBase(job: Job, attempt: number, url: string) {
  return {
    attempt,
    nextAttemptAt: null,
    monitorId: job.monitor.id,
    hitId: job.hitId,
    event: job.event,
    deliveryId: job.deliveryId,
    url,
  };
}

/** the row of a job that did not get as far as a request (skipped, or its body too large) */
function unsentAttempt(
  job: Job,
  attempt: number,
  url: string,
  outcome: 'skipped' | 'failed',
  error: string,
): NewAttempt {
  return {
    ...attemptBase(job, attempt, url),
    outcome,
    statusCode: null,
    latencyMs: null,
    error,
    responseSnippet: null,
  };
}

/** the attempt row, with its detail: the request as sent and what came back */
function sentAttempt(ready: Ready, result: SendResult, error: string | null): NewAttempt {
  return {
    ...attemptBase(ready.job, ready.attempt, ready.url),
    outcome: result.outcome,
    statusCode: result.statusCode,
    latencyMs: result.latencyMs,
    error,
    responseSnippet: result.responseSnippet,
    requestHeaders: result.requestHeaders,
    requestBody: ready.body,
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

/** the job with the webhook the plan found it goes to */
function sendableOf(job: Job, webhook: SendableJob['monitor']['webhook']): SendableJob {
  return { ...job, monitor: { ...job.monitor, webhook } };
}

/** The flow of one delivery (see the top of the file), sharing the secret cache, adapters and metrics. */
class DeliveryFlow {
  private readonly secrets: SigningSecrets;
  private parking: Parking | null = null;
  private holding: Hold | null = null;

  constructor(private readonly options: DeliveryFlowOptions) {
    this.secrets = new SigningSecrets(options.secretsKey, options.secretsOldKeys);
  }

  /** from now on a backed-up lane's messages are parked on the broker (without: they wait in memory) */
  useParking(parking: Parking | null): void {
    this.parking = parking;
  }

  /** from now on a disabled endpoint's new events are held (without: logged as skipped) */
  useHolding(holding: Hold | null): void {
    this.holding = holding;
  }

  /** the consumer's handler: one message, its first attempt */
  readonly handle = async (env: EnvelopeOf<DispatcherRoutingKey>): Promise<ConsumeOutcome> => {
    const { life, logger, metrics } = this.options;
    const meta = { messageId: env.messageId, routingKey: env.routingKey };
    let outcome: ConsumeOutcome = 'requeue';
    if (life.admits() && !DISPATCHER_BINDINGS.includes(env.routingKey)) {
      logger.warn('unexpected routing key; dead-lettered', meta);
      outcome = 'dead-letter';
    } else if (life.admits()) outcome = await life.track(this.run({ kind: 'message', env }, meta));
    metrics.messages.inc({ routing_key: env.routingKey, result: outcome });
    return outcome;
  };

  /** the due poller's handler: one claimed due delivery (a retry, a fifo turn) */
  readonly handleDue = async (due: ClaimedDue): Promise<ConsumeOutcome> => {
    const { life } = this.options;
    if (!life.admits()) return 'requeue';
    return life.track(this.run({ kind: 'due', due }, { messageId: due.deliveryId, routingKey: due.event }));
  };

  /** the delivery, and what its error makes of the message or due delivery */
  private async run(source: Source, meta: { messageId: string; routingKey: string }): Promise<ConsumeOutcome> {
    try {
      return await this.deliver(source, this.options.life.signal);
    } catch (err) {
      return this.options.life.outcomeOf(meta, err);
    }
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
        await this.options.dueStore.enqueueDue(prepared.due);
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
    await this.settle(prepared, answered.result);
    return 'ack';
  }

  // prepare ---------------------------------------------------------------------------------

  /**
   * The job, then its plan (domain/plan.ts): the hold takes it, its row is logged without a
   * request, it waits for its fifo turn, or it is ready with its secrets.
   */
  private async prepare(source: Source): Promise<Prepared> {
    const found = await this.jobOf(source);
    if (found.kind === 'settled') return found;
    const { job } = found;
    const redelivery = source.kind === 'message' && source.env.routingKey === 'webhook.redeliver';
    const holding = this.holding;
    const now = this.options.now();
    const plan = planDelivery({ ...job, origin: source.kind, redelivery, holding: holding !== null, now });
    const fromDue = source.kind === 'due';
    const attempt = fromDue ? source.due.attempt : source.kind === 'held' ? source.attempt : 1;
    const done: DueChange | undefined = fromDue
      ? { kind: 'done', deliveryId: job.deliveryId, claimed: attempt }
      : undefined;
    switch (plan.kind) {
      case 'held':
        await holding!.hold(job, plan.url, fromDue ? { attempt } : undefined);
        return { kind: 'settled', outcome: 'ack' };
      case 'unsent': {
        const row = unsentAttempt(job, attempt, plan.url, plan.outcome, plan.error);
        return { kind: 'unsent', row, webhookKind: plan.webhookKind, due: done };
      }
      case 'queued':
        return { kind: 'queued', due: dueOf(sendableOf(job, plan.webhook), 1, now) };
      case 'send': {
        const sendable = sendableOf(job, plan.webhook);
        const { url, body, bytes, sequence, pacing, scheduled } = plan;
        const keys = this.secrets.keysFor(sendable.monitor.id, sendable.monitor.webhook, now);
        const rules = { attempt, scheduled, fromDue, redelivery };
        return { kind: 'ready', job: sendable, url, body, bytes, sequence, keys, pacing, ...rules };
      }
    }
  }

  /** the job of a message, of a due delivery, or of a held event */
  private jobOf(source: Source): ReturnType<DeliveryFlowOptions['jobs']['ofDue']> {
    const { jobs } = this.options;
    switch (source.kind) {
      case 'message':
        return jobs.ofMessage(source.env);
      case 'due':
        return jobs.ofDue(source.due);
      case 'held':
        return Promise.resolve({ kind: 'job', job: source.job });
    }
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
      const r = await lanes.acquire(ready.pacing.laneKey, ready.pacing.pace, mayDefer, ready.job.monitor.accountId);
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

  /**
   * attempts until the endpoint's final answer: a Discord or Slack 429 is the pacing's to judge
   * (its 429 rule, worked out in prepare): with a wait left it is waited out and sent again
   */
  private async send(ready: Ready, slot: LaneSlot, signal: AbortSignal): Promise<Answered> {
    const { after429 } = ready.pacing;
    const kind = ready.job.monitor.webhook.kind;
    const waits: Waits = { count: 0, totalMs: 0 };
    for (;;) {
      const result = await this.attempt(ready, signal);
      const limited = result.statusCode === 429 && after429 ? after429(result, waits, Date.now()) : null;
      if (limited?.kind !== 'wait') {
        const error = limited ? limited.error : result.error;
        return { kind: 'answered', result, row: sentAttempt(ready, result, error) };
      }
      waits.count++;
      waits.totalMs += limited.ms;
      await this.record(sentAttempt(ready, result, limited.error), kind);
      await this.waitOut(limited.ms, slot, signal);
    }
  }

  /** one signed request; the attempt is a CLIENT span under the message's CONSUMER span (OpenTelemetry, when on) */
  private async attempt(ready: Ready, signal: AbortSignal): Promise<SendResult> {
    const { job, bytes, sequence, keys } = ready;
    const endpointKey = ready.pacing.laneKey;
    const webhook = job.monitor.webhook;
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
    return result;
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
    const { result } = answered;
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
    await this.options.attempts.recordAttempt(attempt, due);
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
  private async settle(ready: Ready, result: SendResult): Promise<void> {
    await this.updateHealth(ready, result);
    await this.updateBrokenFlag(ready, result);
  }

  private async updateBrokenFlag({ job, url }: Ready, result: SendResult): Promise<void> {
    const { attempts, logger } = this.options;
    const webhook = job.monitor.webhook;
    const broken = brokenReasonFor(webhook.kind, result.statusCode);
    if (broken) {
      await attempts.markBroken(webhook.id, broken);
      logger.warn('webhook endpoint marked broken', { monitorId: job.monitor.id, url, reason: broken });
    } else if (result.outcome === 'delivered' && webhook.isBroken) {
      await attempts.clearBroken(webhook.id);
      logger.info('webhook endpoint works again', { monitorId: job.monitor.id, url });
    }
  }

  /**
   * Counts the final outcome of a send towards the endpoint's health (not for a healthy endpoint's
   * success: nothing would change). The repository writes the customer's notification with it.
   */
  private async updateHealth({ job, url }: Ready, result: SendResult): Promise<void> {
    const { attempts, logger } = this.options;
    const webhook = job.monitor.webhook;
    const delivered = result.outcome === 'delivered';
    if (!healthNeedsUpdate(webhook, delivered)) return;
    const change = await attempts.recordHealth({ endpointId: webhook.id, delivered, at: this.options.now() });
    if (!change) return;
    const fields = {
      monitorId: job.monitor.id,
      url,
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
