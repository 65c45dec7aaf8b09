/**
 * The owed backfill's lookup pre-check (X's `most_recent_tweet_id`): which usernames' windows an
 * account lookup may pay without a search, and which answers prove a window empty. No I/O.
 *
 * - A post id is a snowflake: its time is when the post was made. An account whose newest post is
 *   older than a window's `since` (less QUIET_MARGIN_MS for the clocks) posted nothing in it; one
 *   X reports without posts (no `most_recent_tweet_id` and a post count of 0) neither.
 * - Anything else is searched as before: a newer post, a suspended, protected-but-unsure, missing or
 *   unanswered account, a count that contradicts a missing id. When unsure, search.
 * - An active account whose newest post is not older than the window (the same margin) is known
 *   to have posted in it: when the search budget is spent its window may be read through its user
 *   timeline instead (accountReads.ts). A protected account is left to search.
 * - Candidates: usernames of stream targets (not query monitors' windows), none of whose rows is a
 *   post known lost (that account did post). A rule change's windows of a target never looked at
 *   are always candidates (their lookup is the target's first account look, owed anyway); other
 *   windows only when the pass's searches do not fit the search budget left in its window.
 * - A candidate is looked up only `lagMs` after its newest row was owed (the window's end: the
 *   rule in force, the connection back), so X has taken in the posts made before it; until then it
 *   waits, as a partial rule-change search does while more rule changes are coming.
 */
import { isValidTweetId, snowflakeTime } from '@sts/core';
import type { XAccountState } from '@sts/social';
import { mergeOwedWindows, type OwedWindow } from './streamOwed';

/** how much older than a window's start the newest post must be: X's and this fleet's clocks differ */
export const QUIET_MARGIN_MS = 5_000;

export interface QuietCandidate {
  username: string;
  /** the oldest window of the username */
  since: Date;
  ids: bigint[];
}

export interface CandidateInput {
  now: Date;
  lagMs: number;
  /** the searches this pass needs do not fit the search budget left in the current window */
  budgetShort: boolean;
  /** usernames whose target was never looked at (their lookup is a first look, owed anyway) */
  neverLooked: ReadonlySet<string>;
  /** a stream target watches the username */
  watched: (username: string) => boolean;
  /** rule changes still coming (a rule-change lookup waits for their usernames, up to `holdMs`) */
  changesPending: boolean;
  holdMs: number;
}

export interface CandidatePlan {
  /** looked up now */
  check: QuietCandidate[];
  /** rows left for a later pass (their lookup is not due yet) */
  waiting: bigint[];
}

/** which usernames of `rows` (usernames' windows, no query monitor's) to look up now, and which wait */
export function lookupCandidates(rows: readonly OwedWindow[], input: CandidateInput): CandidatePlan {
  const out: CandidatePlan = { check: [], waiting: [] };
  const now = input.now.getTime();
  for (const m of mergeOwedWindows(rows).values()) {
    if (m.lost || !input.watched(m.username)) continue;
    const firstLook = m.rulesOnly && input.neverLooked.has(m.username);
    if (!firstLook && !input.budgetShort) continue;
    const settling = now - m.newest.getTime() < input.lagMs;
    const gathering = firstLook && input.changesPending && now - m.dueSince.getTime() < input.holdMs;
    if (settling || gathering) out.waiting.push(...m.ids);
    else out.check.push({ username: m.username, since: m.since, ids: m.ids });
  }
  return out;
}

/** X's answer proves the account posted nothing after `since` */
export function provesQuiet(answer: XAccountState | undefined, since: Date): boolean {
  if (!answer || answer.status === 'suspended' || answer.status === 'not_found' || !answer.posts) return false;
  const { mostRecentTweetId, tweetCount } = answer.posts;
  if (mostRecentTweetId === null) return tweetCount === 0;
  if (!isValidTweetId(mostRecentTweetId)) return false;
  return snowflakeTime(mostRecentTweetId).getTime() < since.getTime() - QUIET_MARGIN_MS;
}

/** X's answer shows the active account posted after `since` (less the margin): its window has posts to read */
export function provesPosted(answer: XAccountState | undefined, since: Date): boolean {
  if (answer?.status !== 'active' || !answer.posts) return false;
  const id = answer.posts.mostRecentTweetId;
  if (id === null || !isValidTweetId(id)) return false;
  return snowflakeTime(id).getTime() >= since.getTime() - QUIET_MARGIN_MS;
}
