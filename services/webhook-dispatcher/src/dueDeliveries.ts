/**
 * Due deliveries: the retries and fifo turns waiting in PostgreSQL (webhook_deliveries_due), the
 * dispatcher's second source of work beside its queue. Every `pollMs` (every `busyPollMs` while
 * polls keep finding work), and again as soon as one finishes, it claims what is due (FOR UPDATE
 * SKIP LOCKED, with a lease: adapters/dueStore.ts
 * `claimDue`) up to `maxInFlight` in this process and at most `perWebhook` of one webhook, and
 * hands each to `handler` (the delivery flow's `handleDue`). They never hold a slot of the queue's
 * prefetch, so a retrying endpoint's backlog never delays another endpoint's first attempts;
 * at send time they take their endpoint's lane like any delivery (concurrency and pacing).
 *
 * What falls due goes out close to its time, a few rows at a time, not a poll's worth at once
 * (domain/duePolling.ts).
 *
 * The row is the only record of a waiting delivery: nothing is kept in memory between polls. While
 * a delivery is in flight its claim is renewed every third of the lease, so a send that takes
 * longer than one lease (a backed-up lane, a slow endpoint, platform 429 waits) is never claimed
 * again meanwhile. A process that dies holding claims stops renewing them: at its lease's end any
 * replica takes them.
 */
import { errorMessage } from '@sts/core';
import type { Logger } from '@sts/common';
import type { ConsumeOutcome } from './adapters/consumer';
import type { ClaimedDue, DueStore } from './adapters/dueStore';
import { nextPollDelay } from './domain/duePolling';

export interface DueDeliveriesOptions {
  repository: DueStore;
  logger: Logger;
  /** the delivery of one claimed row: `ack` settled it, `requeue` gives the claim back, `dead-letter` drops it */
  handler: (due: ClaimedDue) => Promise<ConsumeOutcome>;
  pollMs: number;
  /** the poll interval while polls keep finding work (default a tenth of pollMs) */
  busyPollMs?: number;
  maxInFlight: number;
  perWebhook: number;
  /** longer than one delivery can take (lane wait, request, platform 429 waits) */
  leaseMs: number;
}

export class DueDeliveries {
  private readonly inflight = new Set<Promise<void>>();
  /** webhook id → its deliveries in flight here */
  private readonly byWebhook = new Map<string, number>();
  /** delivery id → the attempt it was claimed at, for the deliveries in flight here (their claims are renewed) */
  private readonly claims = new Map<string, number>();
  private renewal: NodeJS.Timeout | null = null;
  private timer: NodeJS.Timeout | null = null;
  private polling: Promise<number> | null = null;
  private stopped = true;
  /** when a poll last claimed something (ms; -Infinity: never) */
  private lastClaimAt = -Infinity;

  constructor(private readonly options: DueDeliveriesOptions) {}

  /** polls every pollMs until stop() */
  start(): void {
    this.stopped = false;
    this.schedule();
  }

  /** claims what is due now (within the bounds) and starts it; resolves with how many it claimed */
  poll(): Promise<number> {
    this.polling ??= this.claim().finally(() => (this.polling = null));
    return this.polling;
  }

  /** claims what is due and resolves once those deliveries are settled */
  async runOnce(): Promise<number> {
    const claimed = await this.poll();
    await Promise.allSettled([...this.inflight]);
    return claimed;
  }

  /** no more polls; resolves once the deliveries in flight are settled (the flow bounds them on drain) */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.polling?.catch(() => 0);
    await Promise.allSettled([...this.inflight]);
  }

  private schedule(): void {
    if (this.stopped) return;
    const delay = nextPollDelay(this.options, Date.now(), this.lastClaimAt);
    this.timer = setTimeout(() => {
      this.timer = null;
      this.poll()
        .catch((err: unknown) => this.options.logger.warn('due deliveries: claim failed', { err: errorMessage(err) }))
        .finally(() => this.schedule());
    }, delay);
    this.timer.unref();
  }

  private async claim(): Promise<number> {
    const { repository, maxInFlight, perWebhook, leaseMs } = this.options;
    const limit = maxInFlight - this.inflight.size;
    if (limit <= 0) return 0;
    const busyWebhooks = [...this.byWebhook].filter(([, n]) => n >= perWebhook).map(([id]) => id);
    const claimed = await repository.claimDue({ limit, perWebhook, busyWebhooks, leaseMs });
    if (claimed.length > 0) this.lastClaimAt = Date.now();
    for (const due of claimed) this.begin(due);
    return claimed.length;
  }

  private begin(due: ClaimedDue): void {
    this.byWebhook.set(due.webhookId, (this.byWebhook.get(due.webhookId) ?? 0) + 1);
    this.claims.set(due.deliveryId, due.attempt);
    this.renewal ??= setInterval(() => void this.renew(), Math.max(1, Math.floor(this.options.leaseMs / 3)));
    this.renewal.unref();
    const work = this.run(due).finally(() => {
      this.inflight.delete(work);
      this.claims.delete(due.deliveryId);
      if (this.claims.size === 0 && this.renewal) {
        clearInterval(this.renewal);
        this.renewal = null;
      }
      const left = (this.byWebhook.get(due.webhookId) ?? 1) - 1;
      if (left > 0) this.byWebhook.set(due.webhookId, left);
      else this.byWebhook.delete(due.webhookId);
      // a fifo webhook's next turn, or more of a backlog, goes without waiting for the next tick
      if (!this.stopped) void this.poll().catch(() => 0);
    });
    this.inflight.add(work);
  }

  /** the claims in flight here, extended by a lease from now */
  private async renew(): Promise<void> {
    const { repository, logger, leaseMs } = this.options;
    const claims = [...this.claims].map(([deliveryId, attempt]) => ({ deliveryId, attempt }));
    try {
      await repository.renewDue(claims, leaseMs);
    } catch (err) {
      logger.warn('due deliveries: renewing claims failed; tried again', { err: errorMessage(err) });
    }
  }

  private async run(due: ClaimedDue): Promise<void> {
    const { repository, logger, handler } = this.options;
    try {
      const outcome = await handler(due);
      if (outcome === 'requeue') await repository.releaseDue(due.deliveryId);
      else if (outcome === 'dead-letter') await repository.dropDue(due.deliveryId);
    } catch (err) {
      // its lease runs out and it is claimed again
      logger.error('due delivery failed; tried again when its claim expires', { deliveryId: due.deliveryId, err });
    }
  }
}
