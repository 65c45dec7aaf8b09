/**
 * The webhook dispatcher: takes monitor.hit, monitor.test and webhook.redeliver messages from its
 * own durable queue and turns each into at most one delivery (messages.ts), queued per endpoint
 * so one endpoint cannot hold the slots others need (lanes.ts, adapters/parking.ts), sent and
 * logged attempt by attempt (delivery.ts). A message is acknowledged only after its attempts are
 * committed; when the database write fails the handler throws, so the message comes back.
 *
 * Fails closed: when a stored secret cannot be decrypted (a wrong SECRETS_ENCRYPTION_KEY) it
 * logs one error, reports not ready, stops consuming and hands every message back.
 * Stops within a grace period: waiting messages go back at once, deliveries in flight get
 * `shutdownGraceMs` to finish; what is not finished then is handed back unlogged.
 */
import { bindActive } from '@sts/telemetry';
import { setMaxListeners } from 'node:events';
import type { Logger } from '@sts/common';
import { deadLetterQueueName, narrowEnvelope, type Envelope } from '@sts/messaging';
import type client from 'prom-client';
import { laneKey, paceRuleFor } from './domain/pacing';
import { createHttpsSender, type HttpsSender, type HttpsSenderOptions } from './adapters/httpsSender';
import { createAmqpParking, type Parking } from './adapters/parking';
import { isMissingParent, isTransientDbError, type DispatcherRepository } from './adapters/repository';
import type { ConsumeOutcome, DispatcherMessaging, DispatcherRoutingKey } from './adapters/consumer';
import { createDeliverer, DrainAbortError, SecretsUnavailableError, type Job } from './delivery';
import { createLaneScheduler, type LaneControl, type LaneScheduler } from './lanes';
import { createMessagePreparer } from './messages';
import { createMetrics, type DispatcherMetrics } from './metrics';
import { Holding } from './hold';
import type { HoldBounds } from './domain/hold';
import type { HoldingStore } from './adapters/holding';
import type { DispatcherEnv } from './env';

export const DISPATCHER_QUEUE = 'webhook-dispatcher';
const DISPATCHER_BINDINGS: DispatcherRoutingKey[] = [
  'monitor.hit',
  'monitor.test',
  'monitor.profile_changed',
  'monitor.target_unavailable',
  'monitor.post_deleted',
  'webhook.redeliver',
];

export interface DispatcherOptions {
  repository: DispatcherRepository;
  /** needed by start() only; tests may drive handle() directly */
  messaging?: DispatcherMessaging;
  logger: Logger;
  /** SECRETS_ENCRYPTION_KEY */
  secretsKey: string | Buffer;
  /** SECRETS_ENCRYPTION_KEYS_OLD (decrypt only) */
  secretsOldKeys?: readonly string[];
  timeoutMs?: number;
  maxConcurrencyPerEndpoint?: number;
  allowPrivateHosts?: readonly string[];
  prefetch?: number;
  queue?: string;
  registry?: client.Registry;
  /** test hooks of the sender (DNS resolution, URL override); see httpsSender.ts */
  senderOverrides?: Pick<HttpsSenderOptions, 'lookup' | 'urlOverride'>;
  now?: () => Date;
  /** when the database is unreachable, wait this long before handing the message back (default 1000) */
  transientRetryDelayMs?: number;
  /** AMQP URL for parking backed-up messages (start() sets parking up); without it they wait in memory */
  amqpUrl?: string;
  /** how long a parked message stays away before it comes back (default 5000) */
  deferMs?: number;
  /** a message may wait in memory only if its endpoint should start it within this time (default 2000) */
  holdMs?: number;
  /** stop(): how long deliveries in flight may take to finish (default 20000) */
  shutdownGraceMs?: number;
  /** the hold of a disabled endpoint's events (hold.ts); without it they are logged as skipped */
  holding?: HoldingStore;
  /** WEBHOOK_HOLD_DAYS and WEBHOOK_HOLD_MAX (default 3 days, 10,000) */
  holdBounds?: HoldBounds;
  /** how often held events of enabled endpoints are looked for (default 1000 ms) */
  holdSweepMs?: number;
  /** delete attempts older than this many days (default 30); 0 turns the job off */
}

export interface Dispatcher {
  /** declares and binds the queue, sets parking up, starts consuming */
  start(): Promise<void>;
  /** handles one message (what the consumer calls) */
  handle(envelope: Envelope<DispatcherRoutingKey>): Promise<ConsumeOutcome>;
  /**
   * Drains: waiting messages are handed back at once, deliveries in flight get shutdownGraceMs to
   * finish (logged and acked); the rest are aborted and handed back unlogged. Call together with
   * the messaging client's stop() (which cancels the consumer and waits for the handlers).
   */
  stop(): Promise<void>;
  /** closes the sender's connections and timers; call after stop() and the messaging client's stop() */
  close(): void;
  /** readiness: rejects once the dispatcher failed closed */
  check(): Promise<void>;
  inFlight(): number;
  /** releases held events of enabled endpoints now and resolves when that is done (start() does it every second) */
  releaseHeld(): Promise<void>;
}

/** Parking set up on its own connection, or null (then backed-up messages wait in memory). */
async function startParking(url: string, queue: string, delayMs: number, logger: Logger): Promise<Parking | null> {
  const p = createAmqpParking({ url, queue, bindings: DISPATCHER_BINDINGS, delayMs, logger });
  try {
    await p.setup();
    return p;
  } catch (err) {
    logger.warn('parking unavailable: backed-up messages wait in memory', {
      error: err instanceof Error ? err.message : String(err),
    });
    await p.close();
    return null;
  }
}

/** The options main.ts takes from the environment. */
export function dispatcherOptionsFromEnv(env: DispatcherEnv) {
  return {
    secretsKey: env.SECRETS_ENCRYPTION_KEY,
    secretsOldKeys: env.SECRETS_ENCRYPTION_KEYS_OLD ?? [],
    timeoutMs: env.WEBHOOK_TIMEOUT_MS,
    maxConcurrencyPerEndpoint: env.WEBHOOK_MAX_CONCURRENCY_PER_ENDPOINT,
    allowPrivateHosts: env.WEBHOOK_ALLOW_PRIVATE_HOSTS,
    prefetch: env.DISPATCH_PREFETCH,
    amqpUrl: env.AMQP_URL,
    deferMs: env.DISPATCH_DEFER_MS,
    shutdownGraceMs: env.DISPATCH_SHUTDOWN_GRACE_MS,
    holdBounds: { days: env.WEBHOOK_HOLD_DAYS, max: env.WEBHOOK_HOLD_MAX },
  } satisfies Partial<DispatcherOptions>;
}

/** what to do with a message whose handling threw (rethrows what is not understood) */
async function outcomeOfError(
  env: Envelope<DispatcherRoutingKey>,
  err: unknown,
  ctx: {
    logger: Logger;
    metrics: DispatcherMetrics;
    failClosed: (err: Error) => void;
    transientRetryDelayMs: number | undefined;
  },
): Promise<ConsumeOutcome> {
  const { logger, metrics } = ctx;
  const meta = { messageId: env.messageId, routingKey: env.routingKey };
  if (err instanceof SecretsUnavailableError) {
    ctx.failClosed(err);
    return 'requeue';
  }
  if (err instanceof DrainAbortError) {
    logger.info('delivery not finished within the shutdown grace period; left for another replica', meta);
    return 'requeue';
  }
  if (isTransientDbError(err)) {
    // PostgreSQL unreachable: not the message's fault. Hand it back after a pause (no dead
    // letter, no hot loop); it is delivered again, at least once, when the database is back.
    logger.warn('database unavailable; message requeued', {
      ...meta,
      error: err instanceof Error ? err.message : String(err),
    });
    await new Promise((r) => setTimeout(r, ctx.transientRetryDelayMs ?? 1000));
    return 'requeue';
  }
  if (isMissingParent(err)) {
    logger.info('monitor or hit deleted during delivery; message dropped', meta);
    return 'ack';
  }
  metrics.messages.inc({ routing_key: env.routingKey, result: 'error' });
  logger.error('handling failed; message will be retried', { ...meta, err });
  throw err;
}

/** The parts a dispatcher composes; the logic lives in them (messages.ts, delivery.ts, lanes.ts, the adapters). */
interface Parts {
  sender: HttpsSender;
  metrics: DispatcherMetrics;
  deliverer: ReturnType<typeof createDeliverer>;
  prepare: ReturnType<typeof createMessagePreparer>;
  lanes: LaneScheduler;
}

function prefetchOf(options: DispatcherOptions): number {
  return options.prefetch ?? 256;
}

function concurrencyOf(options: DispatcherOptions): number {
  return options.maxConcurrencyPerEndpoint ?? 8;
}

function createSender(options: DispatcherOptions): HttpsSender {
  const { logger } = options;
  return createHttpsSender({
    timeoutMs: options.timeoutMs ?? 15_000,
    maxConcurrencyPerEndpoint: concurrencyOf(options),
    allowPrivateHosts: options.allowPrivateHosts ?? [],
    // the delivery log says only "non-public address"; the address itself is for this log
    onRefused: (host, detail) => logger.warn('webhook address refused', { host, detail }),
    ...options.senderOverrides,
  });
}

function createParts(options: DispatcherOptions): Parts {
  const { repository, logger } = options;
  const concurrency = concurrencyOf(options);
  const sender = createSender(options);
  const metrics = createMetrics(options.registry);
  const now = options.now ?? (() => new Date());
  return {
    sender,
    metrics,
    deliverer: createDeliverer({
      repository,
      sender,
      logger,
      metrics,
      secretsKey: options.secretsKey,
      secretsOldKeys: options.secretsOldKeys,
      now,
    }),
    prepare: createMessagePreparer(repository, logger),
    // Half the prefetch at most waits for one endpoint: even a lane that looked fast when its line
    // formed leaves the other half to other endpoints until the sweep re-checks it.
    lanes: createLaneScheduler({
      concurrency,
      holdMs: options.holdMs ?? 2000,
      maxWaitingPerLane: Math.max(concurrency, Math.floor(prefetchOf(options) / 2)),
    }),
  };
}

/**
 * The running dispatcher: the drain and fail-closed state in fields, one method per step of a
 * message (handle → process → deliver) and of the life cycle (start, stop, close).
 */
class WebhookDispatcher implements Dispatcher {
  private parking: Parking | null = null;
  private readonly inflight = new Set<Promise<ConsumeOutcome>>();
  private readonly abort = new AbortController();
  private stopping: Promise<void> | null = null;
  private fault: Error | null = null;
  private readonly holding: Holding | null;

  constructor(
    private readonly options: DispatcherOptions,
    private readonly parts: Parts,
  ) {
    // one listener per delivery in flight (hundreds): not a leak
    setMaxListeners(0, this.abort.signal);
    this.holding = options.holding
      ? new Holding({
          store: options.holding,
          repository: options.repository,
          deliverer: parts.deliverer,
          lanes: parts.lanes,
          logger: options.logger,
          bounds: options.holdBounds ?? { days: 3, max: 10_000 },
          signal: this.abort.signal,
          now: options.now ?? (() => new Date()),
          ...(options.holdSweepMs !== undefined && { sweepMs: options.holdSweepMs }),
        })
      : null;
  }

  async start(): Promise<void> {
    const { options, parts } = this;
    if (!options.messaging) throw new Error('createDispatcher: start() needs the messaging client');
    const queue = options.queue ?? DISPATCHER_QUEUE;
    await options.messaging.consume({
      queue,
      bindings: DISPATCHER_BINDINGS,
      prefetch: prefetchOf(options),
      handler: this.handle,
    });
    if (options.amqpUrl) {
      this.parking = await startParking(options.amqpUrl, queue, options.deferMs ?? 5000, options.logger);
    }
    this.holding?.start();
    const parking = this.parking;
    const dlq = deadLetterQueueName(queue);
    if (parking) parts.metrics.setDeadLetterReader(async () => ({ [dlq]: await parking.depth(dlq) }));
  }

  /** handles one message (the consumer's handler) */
  readonly handle = async (env: Envelope<DispatcherRoutingKey>): Promise<ConsumeOutcome> => {
    let outcome: ConsumeOutcome = 'requeue';
    if (!this.fault && !this.stopping) {
      const work = this.process(env);
      this.inflight.add(work);
      try {
        outcome = await work;
      } finally {
        this.inflight.delete(work);
      }
    }
    this.parts.metrics.messages.inc({ routing_key: env.routingKey, result: outcome });
    return outcome;
  };

  stop(): Promise<void> {
    this.stopping ??= this.drain();
    return this.stopping;
  }

  close(): void {
    this.parts.sender.close();
    this.parts.lanes.close();
  }

  readonly check = (): Promise<void> => (this.fault ? Promise.reject(this.fault) : Promise.resolve());

  readonly inFlight = (): number => this.parts.sender.inFlight();

  readonly releaseHeld = async (): Promise<void> => {
    await this.holding?.releaseNow();
    await this.holding?.idle();
  };

  private async drain(): Promise<void> {
    this.parts.lanes.releaseAll();
    const timer = setTimeout(() => this.abort.abort(), this.options.shutdownGraceMs ?? 20_000);
    await Promise.allSettled([...this.inflight, this.holding?.stop()]);
    clearTimeout(timer);
    await this.parking?.close();
  }

  private failClosed(err: Error): void {
    if (this.fault) return;
    this.fault = err;
    const { logger, messaging } = this.options;
    logger.error('webhook-dispatcher failed closed: not consuming, messages stay on the queue', {
      reason: err.message,
      fix: 'start the dispatcher with the SECRETS_ENCRYPTION_KEY the secrets were stored with',
    });
    this.parts.lanes.releaseAll();
    // not awaited: the messaging client's stop waits for the handlers, this one included
    messaging?.stop().catch((e: unknown) => logger.warn('stopping the consumer failed', { error: String(e) }));
  }

  private async process(env: Envelope<DispatcherRoutingKey>): Promise<ConsumeOutcome> {
    const { logger } = this.options;
    if (!DISPATCHER_BINDINGS.includes(env.routingKey)) {
      logger.warn('unexpected routing key; dead-lettered', { routingKey: env.routingKey, messageId: env.messageId });
      return 'dead-letter';
    }
    try {
      const prepared = await this.parts.prepare(narrowEnvelope(env));
      return prepared.kind === 'settled' ? prepared.outcome : await this.deliver(env, prepared.job);
    } catch (err) {
      return outcomeOfError(env, err, {
        logger,
        metrics: this.parts.metrics,
        failClosed: (e) => this.failClosed(e),
        transientRetryDelayMs: this.options.transientRetryDelayMs,
      });
    }
  }

  /** runs a job that goes out in its endpoint's lane; parks the message when the lane is backed up */
  private async deliver(env: Envelope<DispatcherRoutingKey>, job: Job): Promise<ConsumeOutcome> {
    const { deliverer, lanes, metrics } = this.parts;
    if (await this.holding?.hold(job, env.routingKey === 'webhook.redeliver')) return 'ack';
    const sendable = deliverer.sendable(job);
    if (!sendable) {
      await deliverer.recordSkip(job);
      return 'ack';
    }
    const { kind, url } = sendable.monitor.webhook;
    let mayDefer = this.parking !== null;
    for (;;) {
      // bound to the message's trace (OpenTelemetry): a queued turn runs outside its async context
      const r = await lanes.run(
        laneKey(kind, url),
        paceRuleFor(kind),
        mayDefer,
        bindActive((control: LaneControl) => deliverer.send(sendable, control, this.abort.signal)),
        sendable.monitor.accountId,
      );
      if (r.kind === 'ran') return 'ack';
      if (r.kind === 'released') return 'requeue';
      if (this.parking && (await this.parking.park(env))) {
        metrics.messages.inc({ routing_key: env.routingKey, result: 'deferred' });
        return 'ack';
      }
      mayDefer = false; // parking failed: wait in memory like before
    }
  }
}

export function createDispatcher(options: DispatcherOptions): Dispatcher {
  return new WebhookDispatcher(options, createParts(options));
}
