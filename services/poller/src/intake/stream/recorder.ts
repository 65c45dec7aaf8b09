/**
 * Records tweets the stream (or a backfill) delivered through the SAME path as polled ones: the
 * target's active monitors (PollerRepository.monitorsFor), the tick's hit building (poll.ts pageHits) and
 * PollerRepository.recordBatch — hits, their monitor.hit events (outbox) and the target's cursor
 * in one transaction, unique on monitor + tweet, so a tweet the stream and a backfill both bring
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

/** Records the tweets of one author (target). */
async function recordTarget(
  repository: PollerRepository,
  targetKey: string,
  tweets: SocialTweet[],
  now: () => Date,
): Promise<RecordedBatch> {
  const monitors = compileMonitors(await repository.monitorsFor(targetKey));
  if (monitors.length === 0) return { hits: 0, newHits: [] };
  const at = now();
  const hits = pageHits(tweets, monitors, at);
  let newest = tweets[0]!;
  for (const t of tweets) if (BigInt(t.id) > BigInt(newest.id)) newest = t;
  const inserted = await repository.recordBatch(
    targetKey,
    hits,
    // position null: the stream leaves the target's poll position (search/timeline modes) alone
    { lastTweetId: newest.id, lastTweetAt: newest.createdAt, position: null },
    at,
  );
  return { hits: inserted.length, newHits: inserted };
}

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
  const out: RecordedBatch = { hits: 0, newHits: [] };
  for (const [key, list] of byTarget) {
    const r = await recordTarget(repository, key, list, now);
    out.hits += r.hits;
    out.newHits.push(...r.newHits);
  }
  return out;
}
