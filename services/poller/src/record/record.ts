/**
 * The one way out of every intake: a batch of one target's tweets becomes its hits, their
 * monitor.hit events (outbox), the target's advanced cursor and its schedule
 * (HitWriter.recordBatch: chunks of hits with their events, then the cursor; unique on
 * monitor + tweet, so a tweet read twice is one hit and one event). The tick's and the push's
 * target poll and the X search call `record`; the X stream records through the same
 * `pageHits` and recordBatch.
 */
import { compareIds } from '@sts/core';
import type { PollPage, SocialTweet } from '@sts/social';
import { findHits, hitEvent, type CompiledMonitor } from '../domain/hits';
import { oldestCreation, type ScheduleWrite } from '../domain/schedule';
import type { CursorState, NewHit, StoredCursor } from '../domain/pipeline';
import type { HitWriter } from '../adapters/hitWriter';

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

function newestOf(tweets: readonly SocialTweet[]): SocialTweet | undefined {
  let newest: SocialTweet | undefined;
  for (const t of tweets) if (!newest || compareIds(t.id, newest.id) > 0) newest = t;
  return newest;
}

/** Moves `cursor` past `page`: its newest tweet and the source's new position. */
export function advance(cursor: CursorState, page: Pick<PollPage, 'tweets' | 'position'>): void {
  const newest = newestOf(page.tweets);
  if (newest && (cursor.lastTweetId === null || compareIds(newest.id, cursor.lastTweetId) > 0)) {
    cursor.lastTweetId = newest.id;
    cursor.lastTweetAt = newest.createdAt;
  }
  cursor.position = page.position;
}

export interface Batch {
  targetKey: string;
  /** the tweets read (of this target's author) */
  tweets: readonly SocialTweet[];
  monitors: CompiledMonitor[];
  /** the cursor, already advanced past `tweets` */
  cursor: CursorState;
  polledAt: Date;
  /** the target's next due time (none: the schedule stays) */
  schedule?: ScheduleWrite;
}

/** Records one batch; returns the hits that were new. */
export function record(writer: Pick<HitWriter, 'recordBatch'>, b: Batch): Promise<NewHit[]> {
  const hits = pageHits(b.tweets, b.monitors, b.polledAt);
  return writer.recordBatch(b.targetKey, hits, b.cursor, b.polledAt, b.schedule);
}

/** A poll's page: moves `b.cursor` past it, then records its tweets; returns the hits that were new. */
export function recordPage(
  writer: Pick<HitWriter, 'recordBatch'>,
  page: Pick<PollPage, 'tweets' | 'position'>,
  b: Omit<Batch, 'tweets'>,
): Promise<NewHit[]> {
  advance(b.cursor, page);
  return record(writer, { ...b, tweets: page.tweets });
}
