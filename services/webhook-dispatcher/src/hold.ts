/**
 * Held while disabled, released when enabled (orchestration; the rules are domain/hold.ts, the
 * store adapters/holding.ts):
 *
 *   hold     a live event for a disabled endpoint, or one arriving while held ones still wait, is
 *            written to the hold and its message acknowledged; so is a retry (or fifo turn) that
 *            falls due then: its due row moves to the hold, its attempt number kept, in order by
 *            the event's time; past WEBHOOK_HOLD_MAX the oldest held are dropped and logged as skipped
 *   release  every `sweepMs` (and on `releaseNow()`): the enabled endpoints with held events are
 *            released one event at a time, oldest first, each through the endpoint's lane like any
 *            delivery (same pacing, the same attempt row, health and broken flag), so new events,
 *            held behind them meanwhile, go after them; events past WEBHOOK_HOLD_DAYS are dropped
 *   bound    in the same pass: a webhook with more than WEBHOOK_HOLD_MAX deliveries waiting for a
 *            retry or a fifo turn (enabled or not) has the oldest waiting dropped the same way
 *
 * An event is removed from the hold only after its attempt row is committed; while it is being
 * sent its claim is renewed every third of `leaseMs` (a send may wait in its lane and through 429
 * waits longer than one lease), so no other replica sends it meanwhile. A dispatcher that stops or
 * dies in between stops renewing: after `leaseMs` any replica sends it again (same delivery id: at
 * least once). Enabled means `disabled_at` is null: a successful test webhook,
 * or the enable of the CLI, dashboard and API (@sts/usecases `webhooks.enable`).
 */
import type { Logger } from '@sts/common';
import { errorMessage } from '@sts/core';
import { parsePayload, type RoutingKey } from '@sts/messaging';
import { droppedReasons, holdCutoff, type HoldBounds } from './domain/hold';
import { finalOutcome, LIVE_EVENTS, redactWebhookUrl } from './domain/policy';
import type { DeliveryEvent } from './adapters/consumer';
import type { DropRule, HeldEvent, HoldingStore } from './adapters/holding';
import type { MonitorContext, MonitorReader } from './adapters/monitorReader';
import type { createDeliveryFlow } from './delivery';
import type { Job } from './messages';

export interface HoldingOptions {
  store: HoldingStore;
  repository: MonitorReader;
  /** the delivery flow a released event goes through (delivery.ts) */
  flow: ReturnType<typeof createDeliveryFlow>;
  logger: Logger;
  bounds: HoldBounds;
  /** aborts releases in flight when the dispatcher stops */
  signal: AbortSignal;
  now: () => Date;
  /** how often the release looks for enabled endpoints with held events (default 1000 ms) */
  sweepMs?: number;
  /** how long a claimed event is one dispatcher's to send (default 120000 ms: timeout and 429 waits) */
  leaseMs?: number;
  /** endpoints released at once by one process (default 8) */
  maxReleasing?: number;
}

/** rows one drop statement removes at most */
const DROP_BATCH = 1000;
/** what is held: a monitor's live events (not a test ping, not a requested redelivery) */
const HELD_EVENTS: readonly string[] = LIVE_EVENTS satisfies readonly DeliveryEvent[];

/** the job of a held event: its payload as published, the monitor as it is now */
function jobOf(row: HeldEvent, monitor: MonitorContext): Job | null {
  if (!HELD_EVENTS.includes(row.event)) return null;
  const event = row.event as Exclude<DeliveryEvent, 'monitor.test'>;
  const payload = parsePayload(event satisfies RoutingKey, row.payload);
  const job: Job = { deliveryId: row.deliveryId, hitId: row.hitId, monitor, event, payload };
  return 'detectedAt' in payload ? { ...job, detectedAt: payload.detectedAt } : job;
}

/** the time a held event is ordered by: its detectedAt (a deletion: deletedAt) */
function heldOrder(job: Job, now: Date): Date {
  const p = job.payload;
  const at = Date.parse('detectedAt' in p ? p.detectedAt : 'deletedAt' in p ? p.deletedAt : '');
  return Number.isFinite(at) ? new Date(at) : now;
}

export class Holding {
  private readonly releasing = new Set<string>();
  private readonly chains = new Set<Promise<void>>();
  private timer: NodeJS.Timeout | null = null;
  private passing: Promise<void> | null = null;

  constructor(private readonly o: HoldingOptions) {}

  private leaseMs(): number {
    return this.o.leaseMs ?? 120_000;
  }

  /**
   * Holds a job the delivery policy holds (policy.ts `holdsEvent`: its endpoint is disabled or
   * still releasing); `url` is its endpoint's URL as the log stores it. `due`: the job is a claimed
   * due delivery (a retry, a fifo turn), its row moved to the hold.
   */
  async hold(job: Job, url: string, due?: { attempt: number }): Promise<void> {
    const { store, logger, bounds, now } = this.o;
    const webhook = job.monitor.webhook;
    if (!webhook) throw new Error('hold: the job has no webhook');
    const count = await store.hold({
      endpointId: webhook.id,
      monitorId: job.monitor.id,
      event: job.event,
      deliveryId: job.deliveryId,
      hitId: job.hitId,
      payload: job.payload,
      url,
      detectedAt: heldOrder(job, now()),
      ...(due && { due }),
    });
    const fields = { deliveryId: job.deliveryId, monitorId: job.monitor.id, held: count };
    if (due)
      logger.info('webhook retry held: the endpoint is disabled; it goes out in order once it is enabled again', {
        ...fields,
        event: job.event,
        attempt: due.attempt,
      });
    else logger.debug('webhook event held', fields);
    if (count !== null && count > bounds.max) await this.drop(webhook.id, job.monitor.id);
  }

  start(): void {
    this.timer ??= setInterval(() => void this.releaseNow(), this.o.sweepMs ?? 1000);
    this.timer.unref();
  }

  /** one pass: drops what is past the age bound, starts releasing every enabled endpoint with held events */
  releaseNow(): Promise<void> {
    this.passing ??= this.pass().finally(() => (this.passing = null));
    return this.passing;
  }

  /** resolves when every release started so far is done (tests; stop()) */
  async idle(): Promise<void> {
    while (this.passing || this.chains.size > 0) await Promise.allSettled([this.passing, ...this.chains]);
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.idle();
  }

  private async pass(): Promise<void> {
    const { store, logger, now, bounds } = this.o;
    try {
      for (const endpointId of await store.expired(holdCutoff(bounds, now()), DROP_BATCH)) {
        await this.drop(endpointId, null);
      }
      for (const over of await store.overDue(bounds.max, DROP_BATCH))
        await this.dropDue(over.endpointId, over.monitorId);
      const max = this.o.maxReleasing ?? 8;
      if (this.releasing.size >= max || this.o.signal.aborted) return;
      for (const endpointId of await store.releasable(max)) {
        if (this.releasing.size >= max) break;
        if (this.releasing.has(endpointId)) continue;
        this.releasing.add(endpointId);
        const chain = this.release(endpointId).finally(() => {
          this.releasing.delete(endpointId);
          this.chains.delete(chain);
        });
        this.chains.add(chain);
      }
    } catch (err) {
      logger.warn('webhook hold: release pass failed; trying again', { err: errorMessage(err) });
    }
  }

  private async drop(endpointId: string, monitorId: string | null): Promise<void> {
    const { bounds, now } = this.o;
    const reasons = droppedReasons(bounds);
    const rule: DropRule = {
      cutoff: holdCutoff(bounds, now()),
      max: bounds.max,
      ageReason: reasons.age,
      sizeReason: reasons.size,
    };
    const dropped = await this.o.store.drop(endpointId, rule, DROP_BATCH);
    if (dropped > 0)
      this.o.logger.warn('webhook hold full or too old: oldest held events dropped', {
        endpointId,
        monitorId,
        dropped,
      });
  }

  /** the webhook's oldest deliveries waiting past the bound, dropped and logged as skipped (a batch a pass) */
  private async dropDue(endpointId: string, monitorId: string): Promise<void> {
    const { store, repository, bounds, logger } = this.o;
    const webhook = (await repository.getMonitor(monitorId))?.webhook;
    if (!webhook) return; // deleted meanwhile: its due rows went with it
    const url = redactWebhookUrl(webhook.url, webhook.kind);
    const rule = { max: bounds.max, reason: droppedReasons(bounds).due, url };
    const dropped = await store.dropDue(endpointId, rule, DROP_BATCH);
    if (dropped > 0)
      logger.warn('webhook deliveries waiting past the bound: the oldest dropped', { endpointId, monitorId, dropped });
  }

  /** sends the endpoint's held events one at a time, oldest first, until none is left (or it is disabled again) */
  private async release(endpointId: string): Promise<void> {
    const { store, logger, signal } = this.o;
    try {
      for (;;) {
        if (signal.aborted) return;
        const row = await store.claimNext(endpointId, this.leaseMs());
        if (!row) return;
        if (!(await this.releaseOne(row, endpointId))) return;
      }
    } catch (err) {
      logger.warn('webhook hold: release stopped; the next pass goes on', { endpointId, err: errorMessage(err) });
    }
  }

  /** one held event out (or logged as skipped); false when the release stops here */
  private async releaseOne(row: HeldEvent, endpointId: string): Promise<boolean> {
    const { store, repository, flow, signal } = this.o;
    const monitor = await repository.getMonitor(row.monitorId);
    if (!monitor) return false; // deleted: its held events went with it
    if (monitor.webhook?.disabledAt) {
      await store.unclaim(row.id);
      return false;
    }
    const job = jobOf(row, monitor);
    if (!job) this.o.logger.warn('webhook hold: an event of an unknown kind dropped', { deliveryId: row.deliveryId });
    // a claim that expired: sent and logged before (a dispatcher stopped before removing it)? not
    // again; a held retry's earlier attempts do not count
    const logged = row.reclaimed && (await this.sentAlready(row));
    if (job && !logged) {
      // the flow skips it (logged) when it may not go out, else sends it in its endpoint's lane
      const outcome = await this.keepingClaim(row.id, () =>
        flow.deliver({ kind: 'held', job, attempt: row.attempt }, signal),
      );
      if (outcome === 'requeue') return false; // stopping: the claim expires and another replica sends it
    }
    await store.finish(row.id, endpointId);
    return true;
  }

  /** runs `work` while renewing the held event's claim every third of the lease */
  private async keepingClaim<T>(id: string, work: () => Promise<T>): Promise<T> {
    const { store, logger } = this.o;
    const leaseMs = this.leaseMs();
    const timer = setInterval(
      () => {
        store
          .renew(id, leaseMs)
          .catch((err: unknown) => logger.warn('webhook hold: renewing a claim failed', { err: errorMessage(err) }));
      },
      Math.max(1, Math.floor(leaseMs / 3)),
    );
    timer.unref();
    try {
      return await work();
    } finally {
      clearInterval(timer);
    }
  }

  /** whether the held event's own attempt (its number or a later one) has a final row in the log */
  private async sentAlready(row: HeldEvent): Promise<boolean> {
    const logged = await this.o.repository.loggedAttempts(row.deliveryId);
    return finalOutcome(logged.filter((a) => (a.attempt ?? 1) >= row.attempt)) !== null;
  }
}
