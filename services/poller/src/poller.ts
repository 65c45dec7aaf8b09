/**
 * The poller: every tick it finds the due targets (distinct lower-cased usernames of active
 * monitors), takes each one's lease, reads the tweets after the target's poll position from the
 * social source (one call per target and page, however many monitors watch it), matches them
 * against the monitors and records hits, events and the new position in one transaction per page.
 * The source never moves the position past a tweet that can still appear (see the README,
 * "Cursors"); a tweet read twice is one hit and one event (unique monitor + tweet).
 */
import type { Logger } from '@sts/common';
import { compareIds } from '@sts/core';
import type { SocialSource, SocialTweet } from '@sts/social';
import { compileMonitors, findHits, hitEvent } from './domain/hits';
import { dueTargets, oldestCreation, type IntervalPolicy, type TargetState } from './domain/schedule';
import type { LeaseStore } from './adapters/lease';
import type { CursorState, NewHit, PollerRepository } from './adapters/repository';

export type PollOutcome = 'ok' | 'error' | 'skipped';

export interface PollerMetrics {
  polls(outcome: PollOutcome): void;
  hits(count: number): void;
}

export interface PollerOptions {
  repository: PollerRepository;
  source: SocialSource;
  leases: LeaseStore;
  logger: Logger;
  intervals: IntervalPolicy;
  /** targets polled at once by this replica (default 8) */
  concurrency?: number;
  /** tweets per source call (default 100) */
  batchSize?: number;
  /** a poll's time limit (default 30 s); its lease lives twice as long */
  pollTimeoutMs?: number;
  /** how often due targets are looked for (default 1 s) */
  tickMs?: number;
  metrics?: PollerMetrics;
  now?: () => Date;
}

export interface CycleResult {
  /** targets due (all with `force`) */
  targets: number;
  polled: number;
  /** leased by another replica, polled by one since this cycle looked, or no active monitor left */
  skipped: number;
  failed: number;
  /** hits recorded (new ones only) */
  hits: number;
}

export interface Poller {
  /** polls every tick until stop() */
  start(): void;
  /** stops taking targets and waits for the polls in flight */
  stop(): Promise<void>;
  /** Polls every due target once (every target with `force`); what tests and benchmarks call. */
  runCycle(opts?: { force?: boolean }): Promise<CycleResult>;
}

class PollTimeout extends Error {
  override name = 'PollTimeout';
}

/** Redis did not answer: the cycle ends (once, not once per target) and the next tick retries. */
class LeaseStoreError extends Error {
  override name = 'LeaseStoreError';
}

function withTimeout<T>(p: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new PollTimeout(message)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

function newestOf(tweets: readonly SocialTweet[]): SocialTweet | undefined {
  let newest: SocialTweet | undefined;
  for (const t of tweets) if (!newest || compareIds(t.id, newest.id) > 0) newest = t;
  return newest;
}

// eslint-disable-next-line max-lines-per-function -- a factory of closures (pollTarget, runCycle, schedule) sharing the per-target state and the cycle timer
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
  let stopping = false;
  const inFlight = new Set<string>();

  async function pollTarget(target: TargetState): Promise<'error' | 'skipped' | number> {
    const key = target.targetKey;
    if (inFlight.has(key)) return 'skipped';
    inFlight.add(key);
    let token: string | null;
    try {
      token = await leases.acquire(key, pollTimeoutMs * 2);
    } catch (err) {
      inFlight.delete(key);
      throw new LeaseStoreError(`lease store unavailable: ${errorMessage(err)}`);
    }
    if (!token) {
      inFlight.delete(key);
      return 'skipped';
    }
    const deadline = Date.now() + pollTimeoutMs;
    try {
      const stored = await repository.cursor(key);
      // another replica polled the target after this cycle read the targets: not due any more
      const seen = target.lastPolledAt?.getTime() ?? -Infinity;
      if (stored?.lastPolledAt && stored.lastPolledAt.getTime() > seen) return 'skipped';
      const monitors = compileMonitors(await repository.monitorsFor(key));
      if (monitors.length === 0) return 'skipped';
      // tweets created before the oldest active monitor match nothing. A cursor from before poll
      // positions existed (position null, last_tweet_at set) resumes at its newest tweet's time.
      let notBefore = oldestCreation(monitors.map((m) => m.createdAt));
      if (!stored?.position && stored?.lastTweetAt && stored.lastTweetAt > notBefore) notBefore = stored.lastTweetAt;
      const cursor: CursorState = {
        lastTweetId: stored?.lastTweetId ?? null,
        lastTweetAt: stored?.lastTweetAt ?? null,
        position: stored?.position ?? null,
      };
      let total = 0;
      let firstPage = true;
      // page until the source has nothing more; each page is its own transaction
      for (;;) {
        const left = deadline - Date.now();
        if (left <= 0) throw new PollTimeout(`poll took longer than ${pollTimeoutMs} ms`);
        const page = await withTimeout(
          source.pollTweets(target.username, { position: cursor.position, notBefore, limit: batchSize, firstPage }),
          left,
          `the social source did not answer within ${pollTimeoutMs} ms`,
        );
        // past the deadline the lease may lapse soon: write nothing, the next poll redoes the page
        if (Date.now() > deadline) throw new PollTimeout(`poll took longer than ${pollTimeoutMs} ms`);
        const polledAt = now();
        if (page === null) {
          await repository.recordFailure(key, `target user @${target.username} not found`, polledAt);
          return 'error';
        }
        const tweets = page.tweets;
        const hits: NewHit[] = findHits(tweets, monitors).map((h) => ({
          monitorId: h.monitor.id,
          accountId: h.monitor.accountId,
          tweetId: h.tweet.id,
          tweetText: h.tweet.text,
          tweetAuthorId: h.tweet.authorId,
          tweetAuthorUsername: h.tweet.author.username,
          tweetCreatedAt: h.tweet.createdAt,
          detectedAt: polledAt,
          event: hitEvent(h, polledAt),
        }));
        const newest = newestOf(tweets);
        if (newest && (cursor.lastTweetId === null || compareIds(newest.id, cursor.lastTweetId) > 0)) {
          cursor.lastTweetId = newest.id;
          cursor.lastTweetAt = newest.createdAt;
        }
        cursor.position = page.position;
        total += await repository.recordBatch(key, hits, cursor, polledAt);
        firstPage = false;
        if (!page.more) break;
      }
      return total;
    } catch (err) {
      const message = errorMessage(err);
      logger.warn('poll failed', { target: key, error: message });
      await repository
        .recordFailure(key, message.slice(0, 500), now())
        .catch((e: unknown) =>
          logger.warn('could not record the poll failure', { target: key, error: errorMessage(e) }),
        );
      return 'error';
    } finally {
      inFlight.delete(key);
      await leases.release(key, token).catch(() => undefined);
    }
  }

  async function runCycle(opts: { force?: boolean } = {}): Promise<CycleResult> {
    const all = await repository.targets();
    const due = opts.force ? all : dueTargets(all, intervals, now());
    const result: CycleResult = { targets: due.length, polled: 0, skipped: 0, failed: 0, hits: 0 };
    let next = 0;
    let aborted: unknown;
    const worker = async () => {
      while (next < due.length && !stopping && aborted === undefined) {
        const target = due[next++]!;
        let r: 'error' | 'skipped' | number;
        try {
          r = await pollTarget(target);
        } catch (err) {
          aborted = err;
          return;
        }
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
    if (aborted !== undefined) throw aborted instanceof Error ? aborted : new Error(errorMessage(aborted));
    return result;
  }

  function schedule(): void {
    if (!running) return;
    timer = setTimeout(() => {
      current = runCycle()
        .catch((err: unknown) => logger.error('poll cycle failed', { error: errorMessage(err) }))
        .finally(schedule);
    }, tickMs);
  }

  return {
    start() {
      if (running) return;
      running = true;
      stopping = false;
      schedule();
    },
    async stop() {
      running = false;
      stopping = true;
      clearTimeout(timer);
      try {
        await current;
      } finally {
        stopping = false;
      }
    },
    runCycle,
  };
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
