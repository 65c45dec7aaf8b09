/**
 * The poller's X reads: `pollTweets` (mode `timeline`, one target a call), `searchGroup`
 * (mode `search`: one `from:a OR from:b ...` query serving ~20 targets a call) and
 * `readAccountSince` (one account known by id, through its user timeline: the stream backfill's
 * read when the search budget is spent).
 *
 * Both start at `since_id`; on a poll's first call `overlapMs` earlier in time (X ids are
 * snowflakes, so a time is an id): X makes tweets visible late, and those already recorded in that
 * window come again and are dropped by the hit key. X lists newest first, so both read pages back
 * to since_id and return the tweets oldest first.
 */
import { compareIds, isValidTweetId, snowflakeBefore, snowflakeTime } from '@sts/core';
import { InvalidCursorError, SourceUserError, type PollPage, type PollRequest, type SocialTweet } from '../types';
import type { XPriority } from './governor';
import type { QueryGroup } from './pack';
import type { XReadContext } from './reads';
import type { XUserResolution } from './users';
import { failed, isNotFound, isSuspended, mapXTweet, X_TWEET_PARAMS, type XTweet } from './wire';

export interface XPollContext extends XReadContext {
  /** pages read at most per call; default 8 */
  maxSincePages: number;
  overlapMs: number;
}

/** search/recent reaches 7 days back; a since_id older than that is refused by X */
const SEARCH_REACH_MS = 7 * 86_400_000 - 60_000;

/** An X poll position "x.<tweet id>"; null for none or another provider's position. */
function decodeXPosition(position: string | null): string | null {
  if (position === null || !position.startsWith('x.')) return null;
  const id = position.slice(2);
  if (id !== '0' && !isValidTweetId(id)) throw new InvalidCursorError('poll position is not valid');
  return id;
}

/** since_id for a read after `position`: the overlap window behind it on a first call, never before notBefore. */
function sinceFor(ctx: XPollContext, position: string | null, notBefore: Date, firstPage: boolean): string {
  let since = snowflakeBefore(notBefore);
  if (position !== null && position !== '0') {
    const behind = firstPage ? snowflakeBefore(new Date(snowflakeTime(position).getTime() - ctx.overlapMs)) : position;
    if (compareIds(behind, since) > 0) since = behind;
  }
  return since;
}

function unavailable(username: string, r: XUserResolution): SourceUserError | null {
  if (r.status === 'renamed') return new SourceUserError(r.message, username, 'renamed', r.newUsername);
  if (r.status === 'suspended') return new SourceUserError(r.message, username, 'suspended');
  return null;
}

interface TweetPages {
  tweets: SocialTweet[];
  /** pages were left unread (more than maxSincePages) */
  truncated: boolean;
  /** X answered with `errors` and no data (the account is gone or suspended) */
  problem: { suspended: boolean; detail: string } | null;
}

/** Reads newest-first pages back to `since`, at most ctx.maxSincePages; oldest first. */
async function readBack(
  ctx: XPollContext,
  call: { family: 'timeline' | 'search'; path: string; params: Record<string, string>; tokenParam: string },
  since: string,
  priority: XPriority,
  fallback?: Parameters<typeof mapXTweet>[2],
): Promise<TweetPages> {
  const collected: SocialTweet[] = [];
  let token: string | undefined;
  for (let pageNo = 0; pageNo < ctx.maxSincePages; pageNo++) {
    const { status, body } = await ctx.client.request<XTweet[]>({
      family: call.family,
      path: call.path,
      priority,
      params: {
        ...call.params,
        ...X_TWEET_PARAMS,
        since_id: since === '0' ? undefined : since,
        max_results: 100,
        [call.tokenParam]: token,
      },
    });
    if (status === 200 && isNotFound(body)) {
      const p = body.errors![0]!;
      return { tweets: [], truncated: false, problem: { suspended: isSuspended(p), detail: p.detail ?? 'not found' } };
    }
    if (status !== 200) throw failed(status, body);
    const users = body.includes?.users ?? [];
    for (const t of body.data ?? []) collected.push(mapXTweet(t, users, fallback));
    token = body.meta?.next_token;
    if (!token) break;
  }
  collected.sort((a, b) => compareIds(a.id, b.id));
  return { tweets: collected, truncated: token !== undefined, problem: null };
}

export async function pollTweets(ctx: XPollContext, username: string, request: PollRequest): Promise<PollPage | null> {
  const limit = request.limit;
  if (!Number.isInteger(limit) || limit < 1) throw new RangeError('limit must be a positive integer');
  const position = decodeXPosition(request.position);
  const priority = request.priority ?? 'high';
  const resolved = (await ctx.users.resolve([username], priority)).get(username.toLowerCase());
  if (!resolved || resolved.status === 'not_found') return null;
  const gone = unavailable(username, resolved);
  if (gone) throw gone;
  if (resolved.status !== 'ok') return null;
  const user = resolved.user;
  const since = sinceFor(ctx, position, request.notBefore, request.firstPage);
  const path = `/2/users/${encodeURIComponent(user.id)}/tweets`;
  const call = { family: 'timeline', path, params: {}, tokenParam: 'pagination_token' } as const;
  const read = await readBack(ctx, call, since, priority, user);
  if (read.problem) {
    // the cached account is gone since: look it up again next time, report it now
    await ctx.users.forget(username);
    const reason = read.problem.suspended ? 'suspended' : 'renamed';
    throw new SourceUserError(`@${username} cannot be read on X: ${read.problem.detail}`, username, reason);
  }
  const tweets = read.tweets.slice(0, limit);
  let next = position;
  for (const t of tweets) if (next === null || compareIds(t.id, next) > 0) next = t.id;
  // no tweet and no position: start at the floor next time
  const floor = snowflakeBefore(request.notBefore);
  return { tweets, position: `x.${next ?? floor}`, more: read.tweets.length > limit || read.truncated };
}

/** the authors X sent with the posts refresh the fleet's user cache (a cache failure costs only a lookup later) */
async function rememberAuthors(ctx: XPollContext, tweets: readonly SocialTweet[]): Promise<void> {
  if (tweets.length === 0) return;
  const authors = new Map(tweets.map((t) => [t.author.username.toLowerCase(), t.author]));
  await ctx.users.rememberMany([...authors.values()]).catch(() => undefined);
}

export interface GroupSearchRequest {
  /** the group's newest id from the previous call (null: start at notBefore) */
  sinceId: string | null;
  /** tweets created before this matter to nobody */
  notBefore: Date;
  /** re-read the overlap window behind sinceId (a poll's first call); default true */
  firstPage?: boolean;
  priority?: XPriority;
  /**
   * look the group's usernames up (batched, cached) to report renamed and suspended accounts in
   * `problems`; default true. The stream's backfill passes false: `from:` queries need no user id,
   * and the stream checks its accounts in the background instead (services/poller stream mode).
   */
  resolveUsers?: boolean;
}

export interface GroupSearchResult {
  /** oldest first; each carries its author (`author.username`) */
  tweets: SocialTweet[];
  /** store and pass as the next sinceId (never behind the given one) */
  newestId: string;
  /** more than maxSincePages pages were new: the oldest of them were not read */
  truncated: boolean;
  /** the group's usernames that cannot be read (renamed, suspended, not found), by lowercase name; empty without resolveUsers */
  problems: Map<string, Exclude<XUserResolution, { status: 'ok' }>>;
}

/**
 * One group query (`packFromQueries`) with since_id and paging. The group's usernames are also
 * resolved (batched, cached: usually no call; unless `resolveUsers: false`), so renamed and
 * suspended accounts are reported. The posts' authors (`includes.users`) refresh the user cache.
 */
export async function searchGroup(
  ctx: XPollContext,
  group: QueryGroup,
  request: GroupSearchRequest,
): Promise<GroupSearchResult> {
  const sinceId = request.sinceId;
  if (sinceId !== null && sinceId !== '0' && !isValidTweetId(sinceId))
    throw new RangeError('sinceId is not a tweet id');
  const priority = request.priority ?? 'high';
  const problems: GroupSearchResult['problems'] = new Map();
  if (request.resolveUsers ?? true)
    for (const [name, r] of await ctx.users.resolve(group.usernames, priority))
      if (r.status !== 'ok') problems.set(name, r);
  let since = sinceFor(ctx, sinceId, request.notBefore, request.firstPage ?? true);
  const reach = snowflakeBefore(new Date(Date.now() - SEARCH_REACH_MS));
  if (compareIds(since, reach) < 0) since = reach;
  const call = {
    family: 'search',
    path: '/2/tweets/search/recent',
    params: { query: group.query },
    tokenParam: 'next_token',
  } as const;
  const read = await readBack(ctx, call, since, priority);
  await rememberAuthors(ctx, read.tweets);
  let newest = sinceId ?? snowflakeBefore(request.notBefore);
  for (const t of read.tweets) if (compareIds(t.id, newest) > 0) newest = t.id;
  return { tweets: read.tweets, newestId: newest, truncated: read.truncated, problems };
}

export interface AccountSinceRequest {
  /** read the posts after this id (a time is an id: `snowflakeBefore`) */
  sinceId: string;
  priority?: XPriority;
}

export interface AccountSinceResult {
  /** oldest first */
  tweets: SocialTweet[];
  /** more than maxSincePages pages were new: the oldest of them were not read */
  truncated: boolean;
  /** X answered with `errors` and no data: the account cannot be read (suspended, gone) */
  unreadable: { suspended: boolean; detail: string } | null;
}

/**
 * One account's posts after `sinceId` through its user timeline (`GET /2/users/:id/tweets`, the
 * `timeline` family's budget, not search's), paged back to since_id. The account is known by id
 * (no user lookup); posts, replies and reposts come as the timeline lists them.
 */
export async function readAccountSince(
  ctx: XPollContext,
  userId: string,
  request: AccountSinceRequest,
): Promise<AccountSinceResult> {
  if (!/^[0-9]{1,19}$/.test(userId)) throw new RangeError('userId is not an X account id');
  if (request.sinceId !== '0' && !isValidTweetId(request.sinceId)) throw new RangeError('sinceId is not a tweet id');
  const path = `/2/users/${encodeURIComponent(userId)}/tweets`;
  const call = { family: 'timeline', path, params: {}, tokenParam: 'pagination_token' } as const;
  const read = await readBack(ctx, call, request.sinceId, request.priority ?? 'high');
  await rememberAuthors(ctx, read.tweets);
  return { tweets: read.tweets, truncated: read.truncated, unreadable: read.problem };
}
