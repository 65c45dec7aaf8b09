/**
 * The webhook dispatcher: takes the monitor events (hits, test pings, notices) and
 * webhook.redeliver messages from its own durable queue and hands each to the delivery flow (delivery.ts: prepare → acquire the
 * endpoint's lane → send → record → settle), which turns it into at most one delivery. A
 * message is acknowledged only after its attempts are committed; when the database write fails
 * the handler throws, so the message comes back. This file composes the parts and runs the
 * service's life (start, drain, close); life.ts holds each delivery's.
 *
 * Fails closed: when a stored secret cannot be decrypted (a wrong SECRETS_ENCRYPTION_KEY) it
 * logs one error, reports not ready, stops consuming and hands every message back.
 * Stops within a grace period: waiting messages go back at once, deliveries in flight get
 * `shutdownGraceMs` to finish; what is not finished then is handed back unlogged.
 */
import type { Logger } from '@sts/common';
import { errorMessage } from '@sts/core';
import { deadLetterQueueName, type EnvelopeOf } from '@sts/messaging';
import type client from 'prom-client';
import { createHttpsSender, type HttpsSender, type HttpsSenderOptions } from './adapters/httpsSender';
import { createAmqpParking, type Parking } from './adapters/parking';
import type { ClaimedDue } from './adapters/dueStore';
import type { DispatcherRepository } from './adapters/repository';
import {
  DISPATCHER_BINDINGS,
  type ConsumeOutcome,
  type DispatcherMessaging,
  type DispatcherRoutingKey,
} from './adapters/consumer';
import { createDeliveryFlow } from './delivery';
import { DispatchLife } from './life';
import { createLaneScheduler, type LaneScheduler } from './lanes';
import { createJobSources } from './messages';
import { DueDeliveries } from './dueDeliveries';
import { createMetrics, type DispatcherMetrics } from './metrics';
import { dispatchSettingDefaults, type DispatcherEnv } from './env';
import { Holding } from './hold';
import type { HoldBounds } from './domain/hold';
import type { HoldingStore } from './adapters/holding';

export const DISPATCHER_QUEUE = 'webhook-dispatcher';

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
  /** when the database is unreachable, wait this long before handing the message back (default TRANSIENT_RETRY_DELAY_MS) */
  transientRetryDelayMs?: number;
  /** AMQP URL for parking backed-up messages (start() sets parking up); without it they wait in memory */
  amqpUrl?: string;
  /** how long a parked message stays away before it comes back */
  deferMs?: number;
  /** a message may wait in memory only if its endpoint should start it within this time (default HOLD_MS) */
  holdMs?: number;
  /** stop(): how long deliveries in flight may take to finish */
  shutdownGraceMs?: number;
  /** how often due deliveries (retries, fifo turns) are claimed */
  duePollMs?: number;
  /** due deliveries in flight at once */
  dueInFlight?: number;
  /** the hold of a disabled endpoint's events (hold.ts); without it they are logged as skipped */
  holding?: HoldingStore;
  /** WEBHOOK_HOLD_DAYS and WEBHOOK_HOLD_MAX (default: the environment's) */
  holdBounds?: HoldBounds;
  /** how often held events of enabled endpoints are looked for (default 1000 ms) */
  holdSweepMs?: number;
}

/** a message may wait in memory for a lane only if the lane should start it within this time (ms) */
const HOLD_MS = 2000;
/** when the database is unreachable, how long a message waits before it is handed back (ms) */
const TRANSIENT_RETRY_DELAY_MS = 1000;

/** createDispatcher's options with every limit set: the environment's defaults for those left out (tests leave most out) */
type Resolved = DispatcherOptions & Required<Pick<DispatcherOptions, LimitName>>;
type LimitName =
  | 'timeoutMs'
  | 'maxConcurrencyPerEndpoint'
  | 'prefetch'
  | 'deferMs'
  | 'shutdownGraceMs'
  | 'holdMs'
  | 'transientRetryDelayMs'
  | 'duePollMs'
  | 'dueInFlight';

function resolve(options: DispatcherOptions): Resolved {
  const d = dispatchSettingDefaults;
  return {
    ...options,
    timeoutMs: options.timeoutMs ?? d.WEBHOOK_TIMEOUT_MS,
    maxConcurrencyPerEndpoint: options.maxConcurrencyPerEndpoint ?? d.WEBHOOK_MAX_CONCURRENCY_PER_ENDPOINT,
    prefetch: options.prefetch ?? d.DISPATCH_PREFETCH,
    deferMs: options.deferMs ?? d.DISPATCH_DEFER_MS,
    shutdownGraceMs: options.shutdownGraceMs ?? d.DISPATCH_SHUTDOWN_GRACE_MS,
    holdMs: options.holdMs ?? HOLD_MS,
    transientRetryDelayMs: options.transientRetryDelayMs ?? TRANSIENT_RETRY_DELAY_MS,
    duePollMs: options.duePollMs ?? d.DISPATCH_DUE_POLL_MS,
    dueInFlight: options.dueInFlight ?? d.DISPATCH_DUE_IN_FLIGHT,
  };
}

/**
 * A due delivery's claim outlasts what one delivery can take: its wait in the lane, the request
 * (timeoutMs, once more on the sender's one reconnect) and Discord/Slack 429 waits (at most a
 * minute, domain/pacing.ts).
 */
const dueLeaseMs = (timeoutMs: number) => 4 * timeoutMs + 120_000;

export interface Dispatcher {
  /** declares and binds the queue, sets parking up, starts consuming */
  start(): Promise<void>;
  /** handles one message (what the consumer calls) */
  handle(envelope: EnvelopeOf<DispatcherRoutingKey>): Promise<ConsumeOutcome>;
  /** claims the deliveries due now (retries, fifo turns) and resolves once they are settled; start() polls for them */
  deliverDue(): Promise<number>;
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
      err: errorMessage(err),
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
    duePollMs: env.DISPATCH_DUE_POLL_MS,
    dueInFlight: env.DISPATCH_DUE_IN_FLIGHT,
    holdBounds: { days: env.WEBHOOK_HOLD_DAYS, max: env.WEBHOOK_HOLD_MAX },
  } satisfies Partial<DispatcherOptions>;
}

/** The parts a dispatcher composes; the logic lives in them (delivery.ts and what it calls). */
interface Parts {
  sender: HttpsSender;
  metrics: DispatcherMetrics;
  flow: ReturnType<typeof createDeliveryFlow>;
  lanes: LaneScheduler;
  life: DispatchLife;
}

/** the due deliveries' poller, handing each to `handler` */
function createDue(options: Resolved, handler: (due: ClaimedDue) => Promise<ConsumeOutcome>): DueDeliveries {
  return new DueDeliveries({
    repository: options.repository,
    logger: options.logger,
    handler,
    pollMs: options.duePollMs,
    maxInFlight: options.dueInFlight,
    perWebhook: options.maxConcurrencyPerEndpoint,
    leaseMs: dueLeaseMs(options.timeoutMs),
  });
}

function createSender(options: Resolved): HttpsSender {
  const { logger } = options;
  return createHttpsSender({
    timeoutMs: options.timeoutMs,
    maxConcurrencyPerEndpoint: options.maxConcurrencyPerEndpoint,
    allowPrivateHosts: options.allowPrivateHosts ?? [],
    // the delivery log says only "non-public address"; the address itself is for this log
    onRefused: (host, detail) => logger.warn('webhook address refused', { host, detail }),
    ...options.senderOverrides,
  });
}

function createParts(options: Resolved): Parts {
  const { repository, logger, messaging } = options;
  const concurrency = options.maxConcurrencyPerEndpoint;
  const sender = createSender(options);
  const metrics = createMetrics(options.registry);
  // Half the prefetch at most waits for one endpoint: even a lane that looked fast when its line
  // formed leaves the other half to other endpoints until the sweep re-checks it.
  const lanes = createLaneScheduler({
    concurrency,
    holdMs: options.holdMs,
    maxWaitingPerLane: Math.max(concurrency, Math.floor(options.prefetch / 2)),
  });
  const life = new DispatchLife({
    logger,
    metrics,
    transientRetryDelayMs: options.transientRetryDelayMs,
    onFault: () => {
      lanes.releaseAll();
      // not awaited: the messaging client's stop waits for the handlers, the failing one included
      messaging?.stop().catch((e: unknown) => logger.warn('stopping the consumer failed', { err: errorMessage(e) }));
    },
  });
  const flow = createDeliveryFlow({
    attempts: repository,
    dueStore: repository,
    sender,
    logger,
    metrics,
    jobs: createJobSources(repository, logger),
    lanes,
    life,
    secretsKey: options.secretsKey,
    secretsOldKeys: options.secretsOldKeys,
    now: options.now ?? (() => new Date()),
  });
  return { sender, metrics, flow, lanes, life };
}

/**
 * The running dispatcher: its parts wired to the consumer, the due poller and the hold, and the
 * service's life (start, stop, close). A message goes from the consumer straight to the flow.
 */
class WebhookDispatcher implements Dispatcher {
  private parking: Parking | null = null;
  private stopping: Promise<void> | null = null;
  private readonly due: DueDeliveries;
  private readonly holding: Holding | null;
  readonly handle: Dispatcher['handle'];

  constructor(
    private readonly options: Resolved,
    private readonly parts: Parts,
  ) {
    this.handle = parts.flow.handle;
    this.due = createDue(options, parts.flow.handleDue);
    this.holding = options.holding
      ? new Holding({
          store: options.holding,
          repository: options.repository,
          flow: parts.flow,
          logger: options.logger,
          bounds: options.holdBounds ?? {
            days: dispatchSettingDefaults.WEBHOOK_HOLD_DAYS,
            max: dispatchSettingDefaults.WEBHOOK_HOLD_MAX,
          },
          signal: parts.life.signal,
          now: options.now ?? (() => new Date()),
          ...(options.holdSweepMs !== undefined && { sweepMs: options.holdSweepMs }),
        })
      : null;
    parts.flow.useHolding(this.holding);
  }

  async start(): Promise<void> {
    const { options, parts } = this;
    if (!options.messaging) throw new Error('createDispatcher: start() needs the messaging client');
    const queue = options.queue ?? DISPATCHER_QUEUE;
    await options.messaging.consume({
      queue,
      bindings: DISPATCHER_BINDINGS,
      prefetch: options.prefetch,
      handler: parts.flow.handle,
    });
    if (options.amqpUrl) {
      this.parking = await startParking(options.amqpUrl, queue, options.deferMs, options.logger);
      parts.flow.useParking(this.parking);
    }
    this.holding?.start();
    const parking = this.parking;
    const dlq = deadLetterQueueName(queue);
    if (parking) parts.metrics.setDeadLetterReader(async () => ({ [dlq]: await parking.depth(dlq) }));
    this.due.start();
  }

  readonly deliverDue = (): Promise<number> => this.due.runOnce();

  stop(): Promise<void> {
    this.stopping ??= this.drain();
    return this.stopping;
  }

  close(): void {
    this.parts.sender.close();
    this.parts.lanes.close();
  }

  readonly check = (): Promise<void> => {
    const fault = this.parts.life.failure();
    return fault ? Promise.reject(fault) : Promise.resolve();
  };

  readonly inFlight = (): number => this.parts.sender.inFlight();

  readonly releaseHeld = async (): Promise<void> => {
    await this.holding?.releaseNow();
    await this.holding?.idle();
  };

  private async drain(): Promise<void> {
    const { life, lanes } = this.parts;
    life.stop();
    lanes.releaseAll();
    await life.drain(this.options.shutdownGraceMs, [this.due.stop(), this.holding?.stop()]);
    await this.parking?.close();
  }
}

export function createDispatcher(options: DispatcherOptions): Dispatcher {
  const resolved = resolve(options);
  return new WebhookDispatcher(resolved, createParts(resolved));
}
