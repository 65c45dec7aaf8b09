/**
 * The poller: every tick it finds the due targets (distinct lower-cased usernames of active
 * monitors), takes each one's lease, reads the tweets after the target's cursor from the social
 * source (one call per target and page, however many monitors watch it), matches them against
 * the monitors and records hits, events and the new cursor in one transaction.
 */
import type { Logger } from '@sts/common';
import { snowflakeBefore } from '@sts/core';
import type { SocialSource } from '@sts/social';
import { compileMonitors, dueTargets, findHits, hitEvent, type IntervalPolicy, type TargetState } from './domain/hits';
import type { LeaseStore } from './adapters/lease';
import type { NewHit, PollerRepository } from './adapters/repository';

export interface PollerMetrics {
  polls(outcome: 'ok' | 'error' | 'skipped'): void;
  hits(count: number): void;
}

export interface PollerOptions {
  repository: PollerRepository;
  source: SocialSource;
  leases: LeaseStore;
  logger: Logger;
  intervals: IntervalPolicy;
  /** targets polled at once */
  concurrency?: number;
  /** tweets per source call */
  batchSize?: number;
  /** a poll's time limit; its lease lives twice as long */
  pollTimeoutMs?: number;
  /** how often due targets are looked for */
  tickMs?: number;
  metrics?: PollerMetrics;
  now?: () => Date;
}

export interface CycleResult {
  targets: number;
  polled: number;
  skipped: number;
  failed: number;
  hits: number;
}

export interface Poller {
  start(): void;
  stop(): Promise<void>;
  /** Polls every due target once (every target with `force`); what tests and benchmarks call. */
  runCycle(opts?: { force?: boolean }): Promise<CycleResult>;
}

class PollTimeout extends Error {}

export function createPoller(options: PollerOptions): Poller {
  const { repository, source, leases, logger, intervals } = options;
  const concurrency = options.concurrency ?? 8;
  const batchSize = options.batchSize ?? 100;
  const pollTimeoutMs = options.pollTimeoutMs ?? 30_000;
  const tickMs = options.tickMs ?? 1000;
  const now = options.now ?? (() => new Date());
  let timer: NodeJS.Timeout | undefined;
  let current: Promise<unknown> | undefined;
  let running = false;
  const inFlight = new Set<string>();

  async function pollTarget(target: TargetState): Promise<'error' | 'skipped' | number> {
    if (inFlight.has(target.targetKey)) return 'skipped';
    const token = await leases.acquire(target.targetKey, pollTimeoutMs * 2);
    if (!token) return 'skipped';
    inFlight.add(target.targetKey);
    const deadline = Date.now() + pollTimeoutMs;
    try {
      const monitors = compileMonitors(await repository.monitorsFor(target.targetKey));
      if (monitors.length === 0) return 'skipped';
      // A target never polled starts at its oldest monitor's creation: tweet ids are snowflakes
      // (time-ordered), so nothing posted after a monitor was created is missed or replayed.
      const cursor = (await repository.cursor(target.targetKey)) ?? {
        lastTweetId: snowflakeBefore(new Date(Math.min(...monitors.map((m) => m.createdAt.getTime())))),
        lastTweetAt: null,
      };
      let total = 0;
      // page until the source has nothing newer; each page is its own transaction
      for (;;) {
        if (Date.now() > deadline) throw new PollTimeout(`poll took longer than ${pollTimeoutMs} ms`);
        const tweets = await source.getTweetsSince(target.username, cursor.lastTweetId, batchSize);
        const polledAt = now();
        if (tweets === null) {
          await repository.recordFailure(target.targetKey, `target user @${target.username} not found`, polledAt);
          return 'error';
        }
        const detectedAt = now();
        const hits: NewHit[] = findHits(tweets, monitors).map((h) => ({
          monitorId: h.monitor.id,
          accountId: h.monitor.accountId,
          tweetId: h.tweet.id,
          tweetText: h.tweet.text,
          tweetAuthorId: h.tweet.authorId,
          tweetAuthorUsername: h.tweet.author.username,
          tweetCreatedAt: h.tweet.createdAt,
          detectedAt,
          event: hitEvent(h, detectedAt),
        }));
        const newest = tweets[tweets.length - 1];
        if (newest) {
          cursor.lastTweetId = newest.id;
          cursor.lastTweetAt = newest.createdAt;
        }
        total += await repository.recordBatch(target.targetKey, hits, cursor, polledAt);
        if (tweets.length < batchSize) break;
      }
      return total;
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      logger.warn('poll failed', { target: target.targetKey, error: message });
      await repository.recordFailure(target.targetKey, message.slice(0, 500), now()).catch(() => undefined);
      return 'error';
    } finally {
      inFlight.delete(target.targetKey);
      await leases.release(target.targetKey, token).catch(() => undefined);
    }
  }

  async function runCycle(opts: { force?: boolean } = {}): Promise<CycleResult> {
    const all = await repository.targets();
    const due = opts.force ? all : dueTargets(all, intervals, now());
    const result: CycleResult = { targets: due.length, polled: 0, skipped: 0, failed: 0, hits: 0 };
    let next = 0;
    const worker = async () => {
      while (next < due.length) {
        const target = due[next++]!;
        const r = await pollTarget(target);
        if (r === 'skipped') result.skipped++;
        else if (r === 'error') result.failed++;
        else {
          result.polled++;
          result.hits += r;
          options.metrics?.hits(r);
        }
        options.metrics?.polls(typeof r === 'number' ? 'ok' : r);
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, due.length) }, worker));
    return result;
  }

  function schedule(): void {
    if (!running) return;
    timer = setTimeout(() => {
      current = runCycle()
        .catch((err: unknown) =>
          logger.error('poll cycle failed', { error: err instanceof Error ? err.message : String(err) }),
        )
        .finally(schedule);
    }, tickMs);
  }

  return {
    start() {
      if (running) return;
      running = true;
      schedule();
    },
    async stop() {
      running = false;
      clearTimeout(timer);
      await current;
    },
    runCycle,
  };
}
