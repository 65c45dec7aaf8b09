/**
 * The one interface through which read-api and the poller read users and tweets. Providers:
 * `local` (PostgreSQL, the default) and `x` (the X API v2). Records are provider-neutral; the
 * HTTP layer maps them to the API's snake_case shapes and the webhook payloads.
 */
export interface SocialUser {
  /** numeric identifier carried as a string */
  id: string;
  username: string;
  name: string;
  description: string | null;
  followersCount: number;
  followingCount: number;
  tweetCount: number;
  verified: boolean;
  profileImageUrl: string | null;
  createdAt: Date | null;
}

/** An account known only by its id (and the names a post carried): no profile, every count zero. */
export function bareUser(id: string, username = '', name = ''): SocialUser {
  return {
    id,
    username,
    name,
    description: null,
    followersCount: 0,
    followingCount: 0,
    tweetCount: 0,
    verified: false,
    profileImageUrl: null,
    createdAt: null,
  };
}

export interface SocialTweet {
  id: string;
  text: string;
  authorId: string;
  author: SocialUser;
  createdAt: Date;
  lang: string | null;
  metrics: { likeCount: number; retweetCount: number; replyCount: number; quoteCount: number };
  /** X's `referenced_tweets`: what this post replies to, quotes or reposts; absent or [] = an original post */
  referencedTweets?: ReferencedTweet[];
}

/** One of X's `referenced_tweets` (types `replied_to`, `quoted`, `retweeted`). */
export interface ReferencedTweet {
  type: 'replied_to' | 'quoted' | 'retweeted';
  id: string;
}

export interface Page<T> {
  items: T[];
  /** opaque; null when there is nothing after this page */
  nextCursor: string | null;
}

export interface PageRequest {
  limit: number;
  cursor?: string | undefined;
  /** X: the call's priority for the fleet's rate-limit budget; default 'high' (the monitor preview asks 'low') */
  priority?: 'high' | 'low';
}

export interface PollRequest {
  /** the `position` the previous call returned; null: start at `notBefore` */
  position: string | null;
  /** tweets created before this matter to nobody (the oldest watching monitor's creation) */
  notBefore: Date;
  limit: number;
  /** the first call of a poll; X re-reads its overlap window only then (so later pages progress) */
  firstPage: boolean;
  /**
   * X: the call's priority for the fleet's rate-limit budget ('low': targets watched only by Free
   * accounts, which leave a reserve of each window to the others); default 'high'
   */
  priority?: 'high' | 'low';
}

export interface PollPage {
  tweets: SocialTweet[];
  /** where the next call starts (opaque; "l.<xid>.<id>" local, "x.<id>" X) */
  position: string;
  /** more may be waiting after `position` now: call again */
  more: boolean;
}

export interface SocialSource {
  readonly name: 'local' | 'x';
  getUser(username: string): Promise<SocialUser | null>;
  /** newest first; null when the user does not exist */
  getUserTimeline(username: string, page: PageRequest): Promise<Page<SocialTweet> | null>;
  getTweet(id: string): Promise<SocialTweet | null>;
  /** full-text search, newest first */
  search(query: string, page: PageRequest): Promise<Page<SocialTweet>>;
  /**
   * For the poller: the user's tweets after `request.position` in the source's own poll order,
   * oldest first, at most `limit` (X may answer more: its overlap window). Null when the user does
   * not exist. Store the returned `position` with what was recorded and pass it to the next call;
   * call again at once while `more` is true. The position never moves past a tweet that can still
   * become visible (local: the snapshot horizon; X: an overlap window re-read behind it, see each
   * provider), so a tweet may come twice but is never skipped: callers deduplicate (hit key).
   * A position of the other provider counts as none; a malformed one throws InvalidCursorError.
   */
  pollTweets(username: string, request: PollRequest): Promise<PollPage | null>;
  /**
   * The local store only: every author's tweets after `request.position`, in the same poll order
   * and with the same guarantees as pollTweets (the query monitors' intake matches them). No
   * position: from the tweets created since `notBefore`.
   */
  pollAllTweets?(request: PollRequest): Promise<PollPage>;
}

/** The data source failed or timed out (502 / 504 at the API). */
export class SocialSourceError extends Error {
  override name = 'SocialSourceError';
  constructor(
    message: string,
    readonly timeout = false,
  ) {
    super(message);
  }
}

/**
 * The fleet's X budget cannot afford the call now (the rate-limit governor refused it, or X
 * answered 429): nothing was lost, try again after `retryAfterMs` (503 UPSTREAM_BUSY at the API).
 */
export class SourceBusyError extends SocialSourceError {
  override name = 'SourceBusyError';
  constructor(
    message: string,
    readonly family: string,
    readonly retryAfterMs: number,
  ) {
    super(message);
  }
}

/**
 * A watched account cannot be read any more: renamed (`newUsername` when X told it) or suspended.
 * The poller records the message as the target's `last_error`, which its monitors show.
 */
export class SourceUserError extends SocialSourceError {
  override name = 'SourceUserError';
  constructor(
    message: string,
    readonly username: string,
    readonly reason: 'renamed' | 'suspended',
    readonly newUsername: string | null = null,
  ) {
    super(message);
  }
}

/** A cursor the source did not issue (400 at the API). */
export class InvalidCursorError extends Error {
  override name = 'InvalidCursorError';
}
