/**
 * The life around each delivery: whether the dispatcher still takes work (not once it failed
 * closed or began to stop), the deliveries in flight (what a drain waits for), the signal that
 * aborts them when the grace period ends, and what an error of the flow makes of its message or
 * due delivery. The flow (delivery.ts) asks it; app.ts starts and drains it.
 */
import { setMaxListeners } from 'node:events';
import type { Logger } from '@sts/common';
import { errorMessage } from '@sts/core';
import { isMissingParent, isTransientDbError } from './adapters/attemptWriter';
import type { ConsumeOutcome } from './adapters/consumer';
import { SecretsUnavailableError } from './adapters/secrets';
import type { DispatcherMetrics } from './metrics';

/** The dispatcher is stopping and this delivery did not finish within the grace period; nothing was logged. */
export class DrainAbortError extends Error {
  override name = 'DrainAbortError';
}

export interface DispatchLifeOptions {
  logger: Logger;
  metrics: Pick<DispatcherMetrics, 'messages'>;
  /** when the database is unreachable, how long a message waits before it is handed back */
  transientRetryDelayMs: number;
  /** the dispatcher failed closed: stop consuming, hand waiting messages back */
  onFault(): void;
}

export class DispatchLife {
  private readonly inflight = new Set<Promise<ConsumeOutcome>>();
  private readonly abort = new AbortController();
  private stopping = false;
  private fault: Error | null = null;

  constructor(private readonly o: DispatchLifeOptions) {
    // one listener per delivery in flight (hundreds): not a leak
    setMaxListeners(0, this.abort.signal);
  }

  /** aborts the deliveries still in flight when a drain's grace period ends */
  get signal(): AbortSignal {
    return this.abort.signal;
  }

  /** new work is taken: the dispatcher has neither failed closed nor begun to stop */
  admits(): boolean {
    return this.fault === null && !this.stopping;
  }

  /** why the dispatcher failed closed (readiness), or null */
  failure(): Error | null {
    return this.fault;
  }

  /** `work` is in flight until it settles */
  track(work: Promise<ConsumeOutcome>): Promise<ConsumeOutcome> {
    this.inflight.add(work);
    return work.finally(() => this.inflight.delete(work));
  }

  /** takes no new work from now on */
  stop(): void {
    this.stopping = true;
  }

  /**
   * Resolves once the deliveries in flight and `others` settled; what is still running after
   * `graceMs` is aborted through `signal`.
   */
  async drain(graceMs: number, others: readonly (Promise<unknown> | undefined)[]): Promise<void> {
    this.stop();
    const timer = setTimeout(() => this.abort.abort(), graceMs);
    await Promise.allSettled([...this.inflight, ...others]);
    clearTimeout(timer);
  }

  /** what an error of the flow makes of its message or due delivery (rethrows what is not understood) */
  async outcomeOf(meta: { messageId: string; routingKey: string }, err: unknown): Promise<ConsumeOutcome> {
    const { logger, metrics } = this.o;
    if (err instanceof SecretsUnavailableError) {
      this.failClosed(err);
      return 'requeue';
    }
    if (err instanceof DrainAbortError) {
      logger.info('delivery not finished within the shutdown grace period; left for another replica', meta);
      return 'requeue';
    }
    if (isTransientDbError(err)) {
      // PostgreSQL unreachable: not the message's fault. Hand it back after a pause (no dead
      // letter, no hot loop); it is delivered again, at least once, when the database is back.
      logger.warn('database unavailable; message requeued', { ...meta, err: errorMessage(err) });
      await new Promise((r) => setTimeout(r, this.o.transientRetryDelayMs));
      return 'requeue';
    }
    if (isMissingParent(err)) {
      logger.info('monitor or hit deleted during delivery; message dropped', meta);
      return 'ack';
    }
    metrics.messages.inc({ routing_key: meta.routingKey, result: 'error' });
    logger.error('handling failed; message will be retried', { ...meta, err });
    throw err;
  }

  private failClosed(err: Error): void {
    if (this.fault) return;
    this.fault = err;
    this.o.logger.error('webhook-dispatcher failed closed: not consuming, messages stay on the queue', {
      reason: err.message,
      fix: 'start the dispatcher with the SECRETS_ENCRYPTION_KEY the secrets were stored with',
    });
    this.o.onFault();
  }
}
