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

export interface SocialTweet {
  id: string;
  text: string;
  authorId: string;
  author: SocialUser;
  createdAt: Date;
  lang: string | null;
  metrics: { likeCount: number; retweetCount: number; replyCount: number; quoteCount: number };
}

export interface Page<T> {
  items: T[];
  /** opaque; null when there is nothing after this page */
  nextCursor: string | null;
}

export interface PageRequest {
  limit: number;
  cursor?: string | undefined;
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
   * For the poller: the user's tweets newer than `sinceId` (all recent ones when null), OLDEST
   * first, at most `limit`. Null when the user does not exist.
   * With a `sinceId` these are the `limit` OLDEST tweets after it (so a poller that advances to the
   * last id it got never skips any); with null, the `limit` NEWEST tweets (a starting point).
   * Ids compare as numbers. A `sinceId` that is not a numeric id throws InvalidCursorError.
   */
  getTweetsSince(username: string, sinceId: string | null, limit: number): Promise<SocialTweet[] | null>;
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

/** A cursor the source did not issue (400 at the API). */
export class InvalidCursorError extends Error {
  override name = 'InvalidCursorError';
}
