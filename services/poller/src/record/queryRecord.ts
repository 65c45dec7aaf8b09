/**
 * Recording for one query monitor read on X (its stream rule, its backfill, its recent search):
 * the posts X passed are matched again against the parsed query and the monitor's filters
 * (compileMonitors: X's rule reads words a little differently, e.g. substrings), then recorded
 * through the shared `record()` (hits with their monitor.hit events, unique on monitor + tweet)
 * with the monitor's own cursor row `?query:<id>` (queryCursorKeyOf): its last check and its
 * coverage (packages/db coverage.ts), and the search's since_id.
 */
import { queryCursorKeyOf } from '@sts/db';
import type { SocialTweet } from '@sts/social';
import { compileMonitors, type WatchingMonitor } from '../domain/hits';
import type { CursorState, NewHit, PollerRepository } from '../adapters/repository';
import { advance, record } from './record';

/** the x_stream_owed key of a query monitor's window (its cursor key) */
export const queryOwedKey = queryCursorKeyOf;

/** the monitor of an owed key or cursor key, or null for a username */
export function queryOwedMonitor(key: string): string | null {
  const prefix = queryCursorKeyOf('');
  return key.startsWith(prefix) && key.length > prefix.length ? key.slice(prefix.length) : null;
}

/**
 * Records `tweets` for `monitor`; `position` (an X search's `x.<newest id>`) moves its cursor
 * forward only (null: the stream, which leaves the search position alone). The new hits.
 */
export function recordQueryTweets(
  repository: Pick<PollerRepository, 'recordBatch'>,
  monitor: WatchingMonitor,
  tweets: readonly SocialTweet[],
  position: string | null,
  polledAt: Date,
): Promise<NewHit[]> {
  const cursor: CursorState = { lastTweetId: null, lastTweetAt: null, position: null };
  advance(cursor, { tweets: [...tweets], position: position ?? '' });
  cursor.position = position;
  return record(repository, {
    targetKey: queryCursorKeyOf(monitor.id),
    tweets,
    monitors: compileMonitors([monitor]),
    cursor,
    polledAt,
  });
}
