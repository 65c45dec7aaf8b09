/**
 * Watched accounts' profiles and health, in batches: the poller's periodic account lookup.
 *
 *   GET /2/users?ids=              accounts known by id (a rename keeps the id), ≤ 100 a call
 *   GET /2/users/by?usernames=     accounts not known yet (their first look), ≤ 100 a call
 *
 * Both are `users` calls of the fleet's budget (the governor). X answers 200 with the accounts it
 * found in `data` (a protected one has `protected: true`) and one partial error per other id or
 * name in `errors`: "User has been suspended" (title Forbidden) or "Could not find user"
 * (resource-not-found: deleted or deactivated, or for a name: renamed too). Found accounts refresh
 * the fleet's user cache, so the polls need no lookup of their own.
 *
 * `mostRecent` also asks `most_recent_tweet_id` (the account's newest post, absent when it has
 * none) and `public_metrics` (its post count): the same user read, which the stream's backfill
 * uses to prove an account posted nothing since a time (services/poller stream/recentCheck.ts).
 */
import { chunks } from '@sts/core';
import type { SocialUser } from '../types';
import type { XClient } from './client';
import type { XPriority } from './governor';
import type { XUserDirectory } from './users';
import { failed, isSuspended, mapXUser, type XProblem, type XUser } from './wire';

/** the fields the profile comparison and the health need (id, name and username always come) */
export const X_ACCOUNT_FIELDS = 'name,description,profile_image_url,verified,username,protected';

/** what `mostRecent` adds to the fields */
const MOST_RECENT_FIELDS = 'most_recent_tweet_id,public_metrics';

const BATCH = 100;

/** what X said of a found account's posts (only when the request asked `mostRecent`) */
interface XAccountPosts {
  /** `most_recent_tweet_id`; null when X sent none (an account without posts) */
  mostRecentTweetId: string | null;
  /** `public_metrics.tweet_count`; null when X sent none */
  tweetCount: number | null;
}

/** One account as X answered: found (active or protected), or the partial error's reason. */
export type XAccountState =
  | { status: 'active'; user: SocialUser; posts?: XAccountPosts }
  | { status: 'protected'; user: SocialUser; posts?: XAccountPosts }
  | { status: 'suspended'; user: null }
  | { status: 'not_found'; user: null };

export interface XAccountRequest {
  ids: readonly string[];
  usernames: readonly string[];
  /** default 'low': a background check leaves the window's reserve to the polls */
  priority?: XPriority;
  /** also ask each account's newest post id and post count (`posts` of the found states) */
  mostRecent?: boolean;
}

export interface XAccounts {
  /** every requested id has an entry */
  byId: Map<string, XAccountState>;
  /** every requested username has an entry, keyed lowercase */
  byUsername: Map<string, XAccountState>;
}

/** X's answer for an account looked up by id when `userId` is known, else by username (`targetKey`) */
export function answerFor(
  t: { targetKey: string; userId: string | null },
  found: XAccounts,
): XAccountState | undefined {
  return t.userId ? found.byId.get(t.userId) : found.byUsername.get(t.targetKey);
}

type Found = XUser & { protected?: boolean; most_recent_tweet_id?: string };

function problemState(p: XProblem | undefined): XAccountState {
  return p && isSuspended(p) ? { status: 'suspended', user: null } : { status: 'not_found', user: null };
}

function postsOf(u: Found): XAccountPosts {
  const count = u.public_metrics?.tweet_count;
  return {
    mostRecentTweetId: typeof u.most_recent_tweet_id === 'string' ? u.most_recent_tweet_id : null,
    tweetCount: typeof count === 'number' && Number.isFinite(count) ? count : null,
  };
}

function foundState(u: Found, mostRecent: boolean): XAccountState {
  const user = mapXUser(u);
  const posts = mostRecent ? { posts: postsOf(u) } : {};
  return u.protected === true ? { status: 'protected', user, ...posts } : { status: 'active', user, ...posts };
}

/** One call for ≤ 100 keys; every key gets an entry (one X neither found nor reported is not found). */
async function lookupBatch(
  client: XClient,
  by: 'ids' | 'usernames',
  keys: string[],
  priority: XPriority,
  mostRecent: boolean,
): Promise<{ states: Map<string, XAccountState>; found: SocialUser[] }> {
  const fields = mostRecent ? `${X_ACCOUNT_FIELDS},${MOST_RECENT_FIELDS}` : X_ACCOUNT_FIELDS;
  const { status, body } = await client.request<Found[]>({
    family: 'users',
    path: by === 'ids' ? '/2/users' : '/2/users/by',
    params: { [by]: keys.join(','), 'user.fields': fields },
    priority,
  });
  if (status !== 200) throw failed(status, body);
  const keyOf = (k: string) => (by === 'ids' ? k : k.toLowerCase());
  const data = new Map((body.data ?? []).map((u) => [keyOf(by === 'ids' ? u.id : u.username), u]));
  const problems = new Map((body.errors ?? []).map((p) => [keyOf(p.value ?? p.resource_id ?? ''), p]));
  const states = new Map<string, XAccountState>();
  for (const key of keys.map(keyOf)) {
    const u = data.get(key);
    states.set(key, u ? foundState(u, mostRecent) : problemState(problems.get(key)));
  }
  return { states, found: [...data.values()].map(mapXUser) };
}

/** Looks the accounts up, 100 a call; a refused or failed call throws (SourceBusyError, SocialSourceError). */
export async function lookupAccounts(
  client: XClient,
  users: Pick<XUserDirectory, 'rememberMany'>,
  request: XAccountRequest,
): Promise<XAccounts> {
  const priority = request.priority ?? 'low';
  const out: XAccounts = { byId: new Map(), byUsername: new Map() };
  const found: SocialUser[] = [];
  const plan = [
    ...chunks([...new Set(request.ids)], BATCH).map((keys) => ({ by: 'ids' as const, keys, into: out.byId })),
    ...chunks([...new Set(request.usernames.map((n) => n.toLowerCase()))], BATCH).map((keys) => ({
      by: 'usernames' as const,
      keys,
      into: out.byUsername,
    })),
  ];
  for (const { by, keys, into } of plan) {
    const batch = await lookupBatch(client, by, keys, priority, request.mostRecent === true);
    for (const [k, v] of batch.states) into.set(k, v);
    found.push(...batch.found);
  }
  // a cache failure costs the polls a lookup later, nothing else
  await users.rememberMany(found).catch(() => undefined);
  return out;
}
