/**
 * Records tweets the stream (or a backfill) delivered through the SAME rules as polled ones: the
 * targets' active monitors (PollerRepository.monitorsForMany), the tick's hit building (poll.ts
 * pageHits) and PollerRepository.recordMany — hits, their monitor.hit events (outbox) and the
 * targets' cursors in one transaction, unique on monitor + tweet, so a tweet the stream and a backfill both bring
 * is one hit and one event.
 */
import type { SocialTweet } from '@sts/social';
import { compileMonitors } from '../../domain/hits';
import type { PollerRepository } from '../../adapters/repository';
import { pageHits } from '../../record/record';

export interface RecordedBatch {
  /** new hits */
  hits: number;
  /** the new hits' tweet creation and recording times (detection latency) */
  newHits: { tweetCreatedAt: Date; detectedAt: Date }[];
}

/**
 * Records tweets of any authors (targets) in one read of their monitors and one transaction
 * (PollerRepository.recordMany), targets in key order (concurrent recorders lock rows alike).
 */
export async function recordTweets(
  repository: PollerRepository,
  tweets: readonly SocialTweet[],
  now: () => Date = () => new Date(),
): Promise<RecordedBatch> {
  const byTarget = new Map<string, SocialTweet[]>();
  for (const t of tweets) {
    const key = t.author.username.toLowerCase();
    if (key === '') continue; // no author expansion: cannot be attributed
    const list = byTarget.get(key) ?? [];
    list.push(t);
    byTarget.set(key, list);
  }
  if (byTarget.size === 0) return { hits: 0, newHits: [] };
  const monitorsOf = await repository.monitorsForMany([...byTarget.keys()]);
  const at = now();
  const batches = [...byTarget.keys()].sort().flatMap((targetKey) => {
    const monitors = compileMonitors(monitorsOf.get(targetKey) ?? []);
    if (monitors.length === 0) return [];
    const list = byTarget.get(targetKey)!;
    let newest = list[0]!;
    for (const t of list) if (BigInt(t.id) > BigInt(newest.id)) newest = t;
    // position null: the stream leaves the target's poll position (search/timeline modes) alone
    const cursor = { lastTweetId: newest.id, lastTweetAt: newest.createdAt, position: null };
    return [{ targetKey, hits: pageHits(list, monitors, at), cursor }];
  });
  const inserted = await repository.recordMany(batches, at);
  return { hits: inserted.length, newHits: inserted };
}
