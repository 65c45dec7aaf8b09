/**
 * Recording for one query monitor read on X (its stream rule, its backfill, its recent search):
 * the posts X passed are matched again against the parsed query and the monitor's filters
 * (compileMonitors: X's rule reads words a little differently, e.g. substrings), then recorded
 * through the shared `record()` (hits with their monitor.hit events, unique on monitor + tweet)
 * with the monitor's own cursor row `?query:<id>` (queryCursorKeyOf): its last check and its
 * coverage (packages/db coverage.ts), and the search's since_id.
 */
import { queryCursorKeyOf, type WatchingMonitor } from '@sts/db';
import type { SocialTweet } from '@sts/social';
import { compileMonitors } from '../domain/hits';
import type { CursorState, NewHit } from '../domain/pipeline';
import type { HitWriter } from '../adapters/hitWriter';
import { advance, record } from './record';

/**
 * Records `tweets` for `monitor`; `position` (an X search's `x.<newest id>`) moves its cursor
 * forward only (null: the stream, which leaves the search position alone). The new hits.
 */
export function recordQueryTweets(
  writer: Pick<HitWriter, 'recordBatch'>,
  monitor: WatchingMonitor,
  tweets: readonly SocialTweet[],
  position: string | null,
  polledAt: Date,
): Promise<NewHit[]> {
  const cursor: CursorState = { lastTweetId: null, lastTweetAt: null, position: null };
  advance(cursor, { tweets: [...tweets], position: position ?? '' });
  cursor.position = position;
  return record(writer, {
    targetKey: queryCursorKeyOf(monitor.id),
    tweets,
    monitors: compileMonitors([monitor]),
    cursor,
    polledAt,
  });
}
