/**
 * Keeps the delivery log bounded: every `intervalMs` (and once shortly after start), attempts older
 * than DELIVERY_LOG_RETENTION_DAYS are deleted in batches of `batchSize` rows, each batch its own
 * short statement (row locks on the batch only, never a table lock), with a pause between batches
 * so the deliveries' own inserts are never starved. Several replicas may run it at once: a batch
 * skips rows another replica has locked (FOR UPDATE SKIP LOCKED) instead of waiting for them.
 */
import type { Logger } from '@sts/common';
import type { DispatcherRepository } from './adapters/repository';

export interface RetentionOptions {
  repository: Pick<DispatcherRepository, 'deleteAttemptsBefore'>;
  logger: Logger;
  retentionDays: number;
  intervalMs: number;
  batchSize?: number;
  /** pause between two batches */
  pauseMs?: number;
  now?: () => Date;
}

export interface RetentionJob {
  start(): void;
  /** one full pass; resolves with the number of rows deleted */
  runOnce(): Promise<number>;
  /** stops the timer and waits for a pass in progress to end its current batch */
  stop(): Promise<void>;
}

export function createRetentionJob(options: RetentionOptions): RetentionJob {
  const batchSize = options.batchSize ?? 1000;
  const pauseMs = options.pauseMs ?? 50;
  const now = options.now ?? (() => new Date());
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<number> | null = null;
  let stopped = false;

  async function pass(): Promise<number> {
    const cutoff = new Date(now().getTime() - options.retentionDays * 86_400_000);
    let total = 0;
    while (!stopped) {
      const deleted = await options.repository.deleteAttemptsBefore(cutoff, batchSize);
      total += deleted;
      if (deleted < batchSize) break;
      await new Promise((r) => setTimeout(r, pauseMs));
    }
    if (total > 0) options.logger.info('old delivery attempts removed', { deleted: total, before: cutoff });
    return total;
  }

  function runOnce(): Promise<number> {
    running ??= pass().finally(() => {
      running = null;
    });
    return running;
  }

  function schedule(delay: number): void {
    if (stopped) return;
    timer = setTimeout(() => {
      runOnce().then(
        () => schedule(options.intervalMs),
        (err: unknown) => {
          // the database may be down: try again at the next interval
          options.logger.warn('removing old delivery attempts failed', {
            error: err instanceof Error ? err.message : String(err),
          });
          schedule(options.intervalMs);
        },
      );
    }, delay);
    timer.unref();
  }

  return {
    start() {
      // a random first delay spreads replicas started together
      schedule(Math.round(5_000 + Math.random() * 25_000));
    },
    runOnce,
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await running?.catch(() => undefined);
    },
  };
}
