/**
 * The `x` provider: the X API v2 over HTTPS with an app-only bearer token.
 *
 *   GET /2/users/by?usernames=           batched user lookup (≤100), cached for the fleet (users.ts)
 *   GET /2/users?ids=                    batched account lookup by id (≤100): profiles and health (accounts.ts)
 *   GET /2/users/by/username/:username   profile read
 *   GET /2/users/:id/tweets              timeline (newest first, max_results 5..100, pagination_token, since_id);
 *                                        also one account since an id by its id (readAccountSince)
 *   GET /2/tweets/:id                    one tweet
 *   GET /2/tweets/search/recent          search of the last 7 days; batched `from:` groups (poll.ts)
 *
 * Every call goes through client.ts (governor → request → observe → X's errors). "Not found" (X
 * answers 200 with an `errors` array and no `data`) is null.
 */
import type { RedisClient } from '@sts/common';
import type { SocialSource } from '../types';
import { lookupAccounts, type XAccountRequest, type XAccounts } from './accounts';
import { createXClient, type XClient, type XClientOptions } from './client';
import { createRedisGovernor, type XPriority } from './governor';
import {
  pollTweets,
  readAccountSince,
  searchGroup,
  type AccountSinceRequest,
  type AccountSinceResult,
  type GroupSearchRequest,
  type GroupSearchResult,
  type XPollContext,
} from './poll';
import type { QueryGroup } from './pack';
import { getTweet, getUser, getUserTimeline, search } from './reads';
import { createXUserDirectory, type XUserDirectory, type XUserResolution } from './users';

export interface XSourceOptions extends XClientOptions {
  /** at most this many pages are read by pollTweets / searchGroup to find the oldest new tweets; default 8 */
  maxSincePages?: number;
  /** a poll's first call re-reads this window behind the position; default 30 000 ms */
  overlapMs?: number;
  /** the fleet's Redis: the governor (unless `governor` is given) and the user cache live there */
  redis?: RedisClient;
  /** how long a resolved username is cached (X_USER_CACHE_TTL_SECONDS); default 3600 */
  userCacheTtlSeconds?: number;
  /** an existing client (shared with the stream) instead of one built from these options */
  client?: XClient;
}

export interface XSource extends SocialSource {
  readonly name: 'x';
  readonly client: XClient;
  readonly users: XUserDirectory;
  /** batched, cached: usernames → accounts or why they cannot be read (keyed by lowercase name) */
  resolveUsers(usernames: readonly string[], priority?: XPriority): Promise<Map<string, XUserResolution>>;
  /** watched accounts by id (and by name when not known yet), 100 a call: their profiles and health */
  lookupAccounts(request: XAccountRequest): Promise<XAccounts>;
  /** one `from:` group query (packFromQueries) since the group's last id, paged */
  searchGroup(group: QueryGroup, request: GroupSearchRequest): Promise<GroupSearchResult>;
  /** one account (by id) since an id through its user timeline (the `timeline` budget), paged */
  readAccountSince(userId: string, request: AccountSinceRequest): Promise<AccountSinceResult>;
}

export function isXSource(source: SocialSource): source is XSource {
  return source.name === 'x' && typeof (source as Partial<XSource>).searchGroup === 'function';
}

export function createXSource(options: XSourceOptions): XSource {
  const governor = options.governor ?? (options.redis ? createRedisGovernor(options.redis) : undefined);
  const client = options.client ?? createXClient({ ...options, ...(governor && { governor }) });
  const users = createXUserDirectory({
    client,
    ...(options.redis && { redis: options.redis }),
    ...(options.userCacheTtlSeconds !== undefined && { ttlSeconds: options.userCacheTtlSeconds }),
  });
  const ctx: XPollContext = {
    client,
    users,
    maxSincePages: options.maxSincePages ?? 8,
    overlapMs: options.overlapMs ?? 30_000,
  };
  return {
    name: 'x',
    client,
    users,
    getUser: (username) => getUser(ctx, username),
    getUserTimeline: (username, page) => getUserTimeline(ctx, username, page),
    getTweet: (id) => getTweet(ctx, id),
    search: (query, page) => search(ctx, query, page),
    pollTweets: (username, request) => pollTweets(ctx, username, request),
    resolveUsers: (usernames, priority) => users.resolve(usernames, priority),
    lookupAccounts: (request) => lookupAccounts(client, users, request),
    searchGroup: (group, request) => searchGroup(ctx, group, request),
    readAccountSince: (userId, request) => readAccountSince(ctx, userId, request),
  };
}
