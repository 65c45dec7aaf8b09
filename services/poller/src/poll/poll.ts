/**
 * One target's poll: take its lease, read the tweets after its position from the social source
 * (one call per page, however many monitors watch it), match them against the monitors and record
 * hits, events, the new position and the target's next due time in one transaction per page.
 * The source never moves the position past a tweet that can still appear (README, "Cursors"); a
 * tweet read twice is one hit and one event (unique monitor + tweet).
 */
import type { Logger } from '@sts/common';
import { compareIds } from '@sts/core';
import { SourceBusyError, type PollPage, type SocialSource, type SocialTweet } from '@sts/social';
import { compileMonitors, findHits, hitEvent, type CompiledMonitor } from '../domain/hits';
import { isPushed, oldestCreation, scheduleAfterPoll, type IntervalPolicy, type TargetState } from '../domain/schedule';
import type { LeaseStore } from '../adapters/lease';
import type { CursorState, NewHit, PollerRepository, StoredCursor } from '../adapters/repository';

export type PollOutcome = 'ok' | 'error' | 'skipped';

/** What a poll did: its outcome, the new hits and the position it ended at (null when it read nothing). */
export interface PollResult {
  outcome: PollOutcome;
  hits: NewHit[];
  position: string | null;
  /** refused by the fleet's budget (SourceBusyError): the tick takes no further target */
  busy?: true;
}

export interface TargetPollDeps {
  repository: PollerRepository;
  source: SocialSource;
  leases: LeaseStore;
  logger: Logger;
  intervals: IntervalPolicy;
  batchSize: number;
  pollTimeoutMs: number;
  now: () => Date;
}

class PollTimeout extends Error {
  override name = 'PollTimeout';
}

/** Redis did not answer: the cycle ends (once, not once per target) and the next tick retries. */
export class LeaseStoreError extends Error {
  override name = 'LeaseStoreError';
}

const SKIPPED: PollResult = { outcome: 'skipped', hits: [], position: null };

export function withTimeout<T>(p: Promise<T>, ms: number, message: string): Promise<T> {
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

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The hits of one page, stamped `polledAt` (the X stream records its posts with it too). */
export function pageHits(tweets: readonly SocialTweet[], monitors: CompiledMonitor[], polledAt: Date): NewHit[] {
  return findHits(tweets, monitors).map((h) => ({
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
}

/**
 * Where the poll starts. Tweets created before the oldest active monitor match nothing. A cursor
 * from before poll positions existed (position null, last_tweet_at set) resumes at its newest tweet's time.
 */
export function startOf(
  stored: StoredCursor | null,
  monitors: CompiledMonitor[],
): { cursor: CursorState; notBefore: Date } {
  let notBefore = oldestCreation(monitors.map((m) => m.createdAt));
  if (!stored?.position && stored?.lastTweetAt && stored.lastTweetAt > notBefore) notBefore = stored.lastTweetAt;
  const cursor: CursorState = {
    lastTweetId: stored?.lastTweetId ?? null,
    lastTweetAt: stored?.lastTweetAt ?? null,
    position: stored?.position ?? null,
  };
  return { cursor, notBefore };
}

export function advance(cursor: CursorState, page: Pick<PollPage, 'tweets' | 'position'>): void {
  const newest = newestOf(page.tweets);
  if (newest && (cursor.lastTweetId === null || compareIds(newest.id, cursor.lastTweetId) > 0)) {
    cursor.lastTweetId = newest.id;
    cursor.lastTweetAt = newest.createdAt;
  }
  cursor.position = page.position;
}

interface PollOptions {
  /** woken by a committed tweet: polls even when another replica polled since `target` was read */
  push?: boolean;
  /** when `target` was read (default: now); a monitor or plan change stamped later re-evaluates it at once */
  readAt?: Date;
}

export type TargetPoll = (target: TargetState, opts?: PollOptions) => Promise<PollResult>;

/** Polls one target under its lease; `inFlight` holds the targets this replica is polling. */
export function createTargetPoll(deps: TargetPollDeps, inFlight: Set<string>): TargetPoll {
  const { repository, leases, logger, pollTimeoutMs, now } = deps;

  /** pages until the source has nothing more; each page is its own transaction */
  async function readPages(target: TargetState, push: boolean, readAt: Date): Promise<PollResult> {
    const key = target.targetKey;
    const deadline = Date.now() + pollTimeoutMs;
    const stored = await repository.cursor(key);
    // another replica polled the target after this cycle read the targets: not due any more (a
    // push is for a tweet committed after that poll's read, so it polls anyway)
    const seen = target.lastPolledAt?.getTime() ?? -Infinity;
    if (!push && stored?.lastPolledAt && stored.lastPolledAt.getTime() > seen) return SKIPPED;
    const monitors = compileMonitors(await repository.monitorsFor(key));
    if (monitors.length === 0) return SKIPPED;
    const { cursor, notBefore } = startOf(stored, monitors);
    const recorded: NewHit[] = [];
    for (let firstPage = true; ; firstPage = false) {
      const left = deadline - Date.now();
      if (left <= 0) throw new PollTimeout(`poll took longer than ${pollTimeoutMs} ms`);
      const page = await withTimeout(
        deps.source.pollTweets(target.username, {
          position: cursor.position,
          notBefore,
          limit: deps.batchSize,
          firstPage,
          // X budget: targets watched only by Free accounts leave a reserve to Starter/trial ones
          priority: isPushed(target, now()) ? 'high' : 'low',
        }),
        left,
        `the social source did not answer within ${pollTimeoutMs} ms`,
      );
      // past the deadline the lease may lapse soon: write nothing, the next poll redoes the page
      if (Date.now() > deadline) throw new PollTimeout(`poll took longer than ${pollTimeoutMs} ms`);
      const polledAt = now();
      const schedule = scheduleAfterPoll(target, deps.intervals, polledAt, readAt);
      if (page === null) {
        await repository.recordFailure(key, `target user @${target.username} not found`, polledAt, schedule);
        return { outcome: 'error', hits: recorded, position: cursor.position };
      }
      const hits = pageHits(page.tweets, monitors, polledAt);
      advance(cursor, page);
      recorded.push(...(await repository.recordBatch(key, hits, cursor, polledAt, schedule)));
      if (!page.more) return { outcome: 'ok', hits: recorded, position: cursor.position };
    }
  }

  async function failed(target: TargetState, err: unknown, readAt: Date): Promise<PollResult> {
    const key = target.targetKey;
    const message = errorMessage(err);
    logger.warn('poll failed', { target: key, error: message });
    const polledAt = now();
    const schedule = scheduleAfterPoll(target, deps.intervals, polledAt, readAt);
    const busy = err instanceof SourceBusyError;
    // refused by the fleet's budget: no read and no poll (last_polled_at stays), so the target
    // stays due and the tick stops taking targets (cycle.ts); each tick then tries once, and when
    // the budget reopens every unread target is due and taken in fair order (`fairOrder`)
    const write = busy
      ? repository.recordRefusal(key, message.slice(0, 500), { ...schedule, nextDueAt: polledAt })
      : repository.recordFailure(key, message.slice(0, 500), polledAt, schedule);
    await write.catch((e: unknown) =>
      logger.warn('could not record the poll failure', { target: key, error: errorMessage(e) }),
    );
    return busy ? { outcome: 'error', hits: [], position: null, busy } : { outcome: 'error', hits: [], position: null };
  }

  return async (target, opts = {}) => {
    const key = target.targetKey;
    if (inFlight.has(key)) return SKIPPED;
    inFlight.add(key);
    const readAt = opts.readAt ?? now();
    let token: string | null;
    try {
      token = await leases.acquire(key, pollTimeoutMs * 2);
    } catch (err) {
      inFlight.delete(key);
      throw new LeaseStoreError(`lease store unavailable: ${errorMessage(err)}`);
    }
    if (!token) {
      inFlight.delete(key);
      return SKIPPED;
    }
    try {
      return await readPages(target, opts.push ?? false, readAt);
    } catch (err) {
      return await failed(target, err, readAt);
    } finally {
      inFlight.delete(key);
      await leases.release(key, token).catch(() => undefined);
    }
  };
}
