/**
 * X `search` mode rules, no I/O: which due targets a tick polls, a group's
 * since_id, and which of a group's tweets belong to which target.
 */
import { compareIds, snowflakeBefore, snowflakeTime } from '@sts/core';
import type { SocialTweet } from '@sts/social';
import { isPushed, type TargetState } from './schedule';

export type XMonitorMode = 'stream' | 'search' | 'timeline';

/**
 * The due targets a tick polls. In `stream` mode, while a stream covers the pushed targets (a
 * Starter or trial watcher), the tick polls only the Free-only ones (on their plan interval); with
 * no stream running it polls them all (by batched search), so nothing is left unread.
 */
export function tickTargets(
  mode: XMonitorMode,
  due: readonly TargetState[],
  now: Date,
  streamCovers: boolean,
): TargetState[] {
  if (mode !== 'stream' || !streamCovers) return [...due];
  return due.filter((t) => !isPushed(t, now));
}

/** The id inside an X poll position ("x.<id>"); null for none or another provider's. */
function xPositionId(position: string | null): string | null {
  if (position === null || !position.startsWith('x.')) return null;
  const id = position.slice(2);
  return /^[0-9]{1,20}$/.test(id) ? id : null;
}

/**
 * A group's since_id: the oldest of its targets' positions, so no target misses a tweet (each
 * target's own position still filters what it gets); null when one has none (it starts at notBefore).
 */
export function groupSinceId(positions: readonly (string | null)[]): string | null {
  let oldest: string | null = null;
  for (const p of positions) {
    const id = xPositionId(p);
    if (id === null) return null;
    if (oldest === null || compareIds(id, oldest) < 0) oldest = id;
  }
  return oldest;
}

/**
 * The tweets of a group search that belong to one target: its author, created at or after the
 * target's notBefore, and not behind its own position by more than the overlap window (the
 * window is re-read on purpose: posts X shows late; hits are unique per monitor and tweet).
 */
export function tweetsForTarget(
  targetKey: string,
  tweets: readonly SocialTweet[],
  position: string | null,
  notBefore: Date,
  overlapMs: number,
): SocialTweet[] {
  const id = xPositionId(position);
  const floor = id === null ? null : snowflakeBefore(new Date(snowflakeTime(id).getTime() - overlapMs));
  return tweets.filter(
    (t) =>
      t.author.username.toLowerCase() === targetKey &&
      t.createdAt.getTime() >= notBefore.getTime() &&
      (floor === null || compareIds(t.id, floor) > 0),
  );
}
