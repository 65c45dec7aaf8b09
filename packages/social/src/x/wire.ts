/**
 * X API v2 answer shapes (what this service reads of them) and their mapping to the
 * provider-neutral records.
 */
import { bareUser, SocialSourceError, type ReferencedTweet, type SocialTweet, type SocialUser } from '../types';

export const X_USER_FIELDS = 'created_at,description,profile_image_url,public_metrics,verified';
export const X_TWEET_FIELDS = 'author_id,created_at,lang,public_metrics,referenced_tweets';

/** The fields every tweet read asks for: the author expanded, the fields the records need. */
export const X_TWEET_PARAMS = {
  expansions: 'author_id',
  'tweet.fields': X_TWEET_FIELDS,
  'user.fields': X_USER_FIELDS,
} as const;

export interface XUser {
  id: string;
  username: string;
  name: string;
  description?: string;
  verified?: boolean;
  profile_image_url?: string;
  created_at?: string;
  public_metrics?: { followers_count?: number; following_count?: number; tweet_count?: number };
}

export interface XTweet {
  id: string;
  text: string;
  author_id?: string;
  created_at?: string;
  lang?: string;
  public_metrics?: { like_count?: number; retweet_count?: number; reply_count?: number; quote_count?: number };
  referenced_tweets?: { type?: string; id?: string }[];
}

/** One problem of an `errors` array (partial errors) or a problem document. */
export interface XProblem {
  title?: string;
  detail?: string;
  type?: string;
  message?: string;
  value?: string;
  resource_id?: string;
  parameter?: string;
  parameters?: Record<string, unknown>;
}

export interface XResponse<T> {
  data?: T;
  includes?: { users?: XUser[] };
  meta?: { result_count?: number; next_token?: string; newest_id?: string; oldest_id?: string };
  errors?: XProblem[];
  title?: string;
  detail?: string;
  type?: string;
}

const PROBLEM_NOT_FOUND = 'https://api.twitter.com/2/problems/resource-not-found';

function int(value: number | undefined): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : 0;
}

function date(value: string | undefined): Date | null {
  if (!value) return null;
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? null : d;
}

export function mapXUser(u: XUser): SocialUser {
  return {
    id: u.id,
    username: u.username,
    name: u.name,
    description: u.description ?? null,
    followersCount: int(u.public_metrics?.followers_count),
    followingCount: int(u.public_metrics?.following_count),
    tweetCount: int(u.public_metrics?.tweet_count),
    verified: u.verified === true,
    profileImageUrl: u.profile_image_url ?? null,
    createdAt: date(u.created_at),
  };
}

export function mapXTweet(t: XTweet, users: readonly XUser[], fallbackAuthor?: SocialUser): SocialTweet {
  const authorId = t.author_id ?? fallbackAuthor?.id ?? '';
  const u = users.find((x) => x.id === authorId);
  const author = u
    ? mapXUser(u)
    : fallbackAuthor && fallbackAuthor.id === authorId
      ? fallbackAuthor
      : bareUser(authorId);
  const createdAt = date(t.created_at);
  if (!createdAt) throw new SocialSourceError('the X API answered a tweet without created_at');
  return {
    id: t.id,
    text: t.text,
    authorId,
    author,
    createdAt,
    lang: t.lang ?? null,
    metrics: {
      likeCount: int(t.public_metrics?.like_count),
      retweetCount: int(t.public_metrics?.retweet_count),
      replyCount: int(t.public_metrics?.reply_count),
      quoteCount: int(t.public_metrics?.quote_count),
    },
    referencedTweets: referencesOf(t),
  };
}

const REFERENCE_TYPES: readonly string[] = ['replied_to', 'quoted', 'retweeted'] satisfies ReferencedTweet['type'][];

/** X's referenced_tweets, types it may add later left out. */
export function referencesOf(t: Pick<XTweet, 'referenced_tweets'>): ReferencedTweet[] {
  return (t.referenced_tweets ?? []).flatMap((r) =>
    typeof r.id === 'string' && r.type !== undefined && REFERENCE_TYPES.includes(r.type)
      ? [{ type: r.type as ReferencedTweet['type'], id: r.id }]
      : [],
  );
}

/** A suspended account's problem ("Forbidden", "User has been suspended"). */
export function isSuspended(p: XProblem): boolean {
  return p.title === 'Forbidden' || /suspended/i.test(p.detail ?? '');
}

/** X's "not found" answer: 200 with an `errors` array and no `data` (a suspended account included). */
export function isNotFound(body: XResponse<unknown>): boolean {
  return (
    body.data === undefined &&
    Array.isArray(body.errors) &&
    body.errors.length > 0 &&
    body.errors.every(
      (e) =>
        e.type === PROBLEM_NOT_FOUND ||
        e.title === 'Not Found Error' ||
        e.title === 'Forbidden' ||
        e.type === 'https://api.twitter.com/2/problems/not-authorized-for-resource',
    )
  );
}

/** The SocialSourceError for an answer the caller did not expect. */
export function failed(status: number, body: XResponse<unknown>): SocialSourceError {
  const first = body.errors?.[0]?.detail ?? body.errors?.[0]?.message;
  const parts = [body.detail ?? body.title, first].filter((p): p is string => typeof p === 'string' && p !== '');
  return new SocialSourceError(`the X API answered HTTP ${status}${parts.length ? `: ${parts.join(': ')}` : ''}`);
}
