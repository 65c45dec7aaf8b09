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
import { createLaneScheduler, type LaneControl } from './lanes';
import { createMessagePreparer } from './messages';
import { createMetrics } from './metrics';
import { createRetentionJob, type RetentionJob } from './retention';
import type { DispatcherEnv } from './env';

export const DISPATCHER_QUEUE = 'webhook-dispatcher';
const DISPATCHER_BINDINGS: DispatcherRoutingKey[] = ['monitor.hit', 'monitor.test', 'webhook.redeliver'];

export interface DispatcherOptions {
  repository: DispatcherRepository;
  /** needed by start() only; tests may drive handle() directly */
  messaging?: DispatcherMessaging;
  logger: Logger;
  /** SECRETS_ENCRYPTION_KEY */
  secretsKey: string | Buffer;
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
  /** delete attempts older than this many days (default 30); 0 turns the job off */
  retentionDays?: number;
  retentionIntervalMs?: number;
}

export interface Dispatcher {
  /** declares and binds the queue, sets parking up, starts consuming and the retention job */
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
  retention: RetentionJob;
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
    timeoutMs: env.WEBHOOK_TIMEOUT_MS,
    maxConcurrencyPerEndpoint: env.WEBHOOK_MAX_CONCURRENCY_PER_ENDPOINT,
    allowPrivateHosts: env.WEBHOOK_ALLOW_PRIVATE_HOSTS,
    prefetch: env.DISPATCH_PREFETCH,
    amqpUrl: env.AMQP_URL,
    deferMs: env.DISPATCH_DEFER_MS,
    shutdownGraceMs: env.DISPATCH_SHUTDOWN_GRACE_MS,
    retentionDays: env.DELIVERY_LOG_RETENTION_DAYS,
    retentionIntervalMs: env.DELIVERY_LOG_RETENTION_INTERVAL_MS,
  } satisfies Partial<DispatcherOptions>;
}

/** what to do with a message whose handling threw (rethrows what is not understood) */
async function outcomeOfError(
  env: Envelope<DispatcherRoutingKey>,
  err: unknown,
  ctx: {
    logger: Logger;
    metrics: ReturnType<typeof createMetrics>;
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

/**
 * Composition of the parts above; over ~120 lines only because the returned object's methods
 * (start / stop / handle) share the drain and fail-closed state as closures. Every inner function
 * is short; the logic lives in messages.ts, delivery.ts, lanes.ts and the adapters.
 */
// eslint-disable-next-line max-lines-per-function -- composition; the reason is in the comment above
export function createDispatcher(options: DispatcherOptions): Dispatcher {
  const { repository: repo, logger } = options;
  const queue = options.queue ?? DISPATCHER_QUEUE;
  const prefetch = options.prefetch ?? 256;
  const concurrency = options.maxConcurrencyPerEndpoint ?? 8;
  const sender: HttpsSender = createHttpsSender({
    timeoutMs: options.timeoutMs ?? 15_000,
    maxConcurrencyPerEndpoint: concurrency,
    allowPrivateHosts: options.allowPrivateHosts ?? [],
    // the delivery log says only "non-public address"; the address itself is for this log
    onRefused: (host, detail) => logger.warn('webhook address refused', { host, detail }),
    ...options.senderOverrides,
  });
  const metrics = createMetrics(options.registry);
  const deliverer = createDeliverer({
    repository: repo,
    sender,
    logger,
    metrics,
    secretsKey: options.secretsKey,
    now: options.now ?? (() => new Date()),
  });
  const prepare = createMessagePreparer(repo, logger);
  // Half the prefetch at most waits for one endpoint: even a lane that looked fast when its line
  // formed leaves the other half to other endpoints until the sweep re-checks it.
  const lanes = createLaneScheduler({
    concurrency,
    holdMs: options.holdMs ?? 2000,
    maxWaitingPerLane: Math.max(concurrency, Math.floor(prefetch / 2)),
  });
  const retention = createRetentionJob({
    repository: repo,
    logger,
    retentionDays: options.retentionDays ?? 30,
    intervalMs: options.retentionIntervalMs ?? 3_600_000,
  });
  let parking: Parking | null = null;
  const inflight = new Set<Promise<ConsumeOutcome>>();
  const abort = new AbortController();
  // one listener per delivery in flight (hundreds): not a leak
  setMaxListeners(0, abort.signal);
  let stopping: Promise<void> | null = null;
  let fault: Error | null = null;

  function failClosed(err: Error): void {
    if (fault) return;
    fault = err;
    logger.error('webhook-dispatcher failed closed: not consuming, messages stay on the queue', {
      reason: err.message,
      fix: 'start the dispatcher with the SECRETS_ENCRYPTION_KEY the secrets were stored with',
    });
    lanes.releaseAll();
    // not awaited: the messaging client's stop waits for the handlers, this one included
    options.messaging?.stop().catch((e: unknown) => logger.warn('stopping the consumer failed', { error: String(e) }));
  }

  /** runs a job that goes out in its endpoint's lane; parks the message when the lane is backed up */
  async function deliver(env: Envelope<DispatcherRoutingKey>, job: Job): Promise<ConsumeOutcome> {
    const sendable = deliverer.sendable(job);
    if (!sendable) {
      await deliverer.recordSkip(job);
      return 'ack';
    }
    const { kind, url } = sendable.monitor.webhook;
    let mayDefer = parking !== null;
    for (;;) {
      // bound to the message's trace (OpenTelemetry): a queued turn runs outside its async context
      const r = await lanes.run(
        laneKey(kind, url),
        paceRuleFor(kind),
        mayDefer,
        bindActive((control: LaneControl) => deliverer.send(sendable, control, abort.signal)),
      );
      if (r.kind === 'ran') return 'ack';
      if (r.kind === 'released') return 'requeue';
      if (parking && (await parking.park(env))) {
        metrics.messages.inc({ routing_key: env.routingKey, result: 'deferred' });
        return 'ack';
      }
      mayDefer = false; // parking failed: wait in memory like before
    }
  }

  async function process(env: Envelope<DispatcherRoutingKey>): Promise<ConsumeOutcome> {
    if (!DISPATCHER_BINDINGS.includes(env.routingKey)) {
      logger.warn('unexpected routing key; dead-lettered', { routingKey: env.routingKey, messageId: env.messageId });
      return 'dead-letter';
    }
    try {
      const prepared = await prepare(narrowEnvelope(env));
      return 'outcome' in prepared ? prepared.outcome : await deliver(env, prepared.job);
    } catch (err) {
      return outcomeOfError(env, err, {
        logger,
        metrics,
        failClosed,
        transientRetryDelayMs: options.transientRetryDelayMs,
      });
    }
  }

  async function handle(env: Envelope<DispatcherRoutingKey>): Promise<ConsumeOutcome> {
    let outcome: ConsumeOutcome = 'requeue';
    if (!fault && !stopping) {
      const work = process(env);
      inflight.add(work);
      try {
        outcome = await work;
      } finally {
        inflight.delete(work);
      }
    }
    metrics.messages.inc({ routing_key: env.routingKey, result: outcome });
    return outcome;
  }

  return {
    async start() {
      if (!options.messaging) throw new Error('createDispatcher: start() needs the messaging client');
      await options.messaging.consume({ queue, bindings: DISPATCHER_BINDINGS, prefetch, handler: handle });
      if (options.amqpUrl) parking = await startParking(options.amqpUrl, queue, options.deferMs ?? 5000, logger);
      const dlq = deadLetterQueueName(queue);
      if (parking) metrics.setDeadLetterReader(async () => ({ [dlq]: await parking!.depth(dlq) }));
      if ((options.retentionDays ?? 30) > 0) retention.start();
    },
    handle,
    stop() {
      stopping ??= (async () => {
        lanes.releaseAll();
        const timer = setTimeout(() => abort.abort(), options.shutdownGraceMs ?? 20_000);
        await Promise.allSettled([...inflight]);
        clearTimeout(timer);
        await retention.stop();
        await parking?.close();
      })();
      return stopping;
    },
    close() {
      sender.close();
      lanes.close();
    },
    check: () => (fault ? Promise.reject(fault) : Promise.resolve()),
    inFlight: () => sender.inFlight(),
    retention,
  };
}
