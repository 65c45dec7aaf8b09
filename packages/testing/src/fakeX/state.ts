/**
 * The fake X's data: users and tweets, held in memory. `post()` stores a tweet and emits `'tweet'`
 * (the stream module delivers it at once); `rename()` and `suspend()` change an account the way X
 * does (the old username stops resolving; a suspended account answers X's "Forbidden" problem);
 * `update()` changes a profile, `deletePost()` deletes a post and `remove()` deletes an account.
 * Each post, deletion and profile change is also emitted as `'activity'` (a `FakeXActivity`: the
 * X Activity API's `event_type`, `filter.user_id` and `payload`; ./activity.ts delivers it).
 */
import { EventEmitter } from 'node:events';
import { compareIds, snowflakeId } from '@sts/core';

export interface FakeXUser {
  id: string;
  username: string;
  name: string;
  description: string;
  verified: boolean;
  profile_image_url: string;
  created_at: string;
  public_metrics: { followers_count: number; following_count: number; tweet_count: number; listed_count: number };
  suspended: boolean;
  /** posts visible to approved followers only (`protected: true` in the user object) */
  protected: boolean;
  /** the profile's website and location (XAA's profile.update.url / .geo) */
  url: string;
  location: string;
}

/** One X Activity API event as it happens (./activity.ts wraps it in XAA's envelope). */
export interface FakeXActivity {
  event_type: string;
  user_id: string;
  payload: Record<string, unknown>;
  /** when it happened (the backfill replays by it) */
  at: number;
}

/** The XAA event each changed profile field is told by. */
const PROFILE_EVENT_OF = {
  description: 'profile.update.bio',
  name: 'profile.update.screenname',
  profile_image_url: 'profile.update.profile_picture',
  verified: 'profile.update.verified_badge',
  url: 'profile.update.url',
  location: 'profile.update.geo',
} as const;

/** what `update()` may change of an account's profile */
export type FakeXProfilePatch = Partial<
  Pick<FakeXUser, 'name' | 'description' | 'verified' | 'profile_image_url' | 'protected' | 'url' | 'location'>
>;

export interface FakeXTweet {
  id: string;
  text: string;
  author_id: string;
  created_at: string;
  /** X leaves it out when it has none */
  lang?: string;
  edit_history_tweet_ids: string[];
  /** X sends it only for replies, quotes and reposts */
  referenced_tweets?: { type: 'replied_to' | 'quoted' | 'retweeted'; id: string }[];
  public_metrics: {
    retweet_count: number;
    reply_count: number;
    like_count: number;
    quote_count: number;
    bookmark_count: number;
    impression_count: number;
  };
}

export interface FakeXUserInput {
  username: string;
  id?: string;
  name?: string;
  description?: string;
  verified?: boolean;
  createdAt?: Date;
  followers?: number;
}

export interface FakeXPostInput {
  /** the author's current username, or its id */
  author: string;
  text: string;
  /** default now; the id is a snowflake of this time unless `id` is given */
  createdAt?: Date;
  id?: string;
  /** default 'en'; null: none (X leaves the field out) */
  lang?: string | null;
  likes?: number;
  references?: { type: 'replied_to' | 'quoted' | 'retweeted'; id: string }[];
}

let nextUserId = 1_000_000_000n;

export class FakeXState extends EventEmitter {
  readonly users = new Map<string, FakeXUser>();
  /** every tweet, oldest first (by id) */
  readonly tweets: FakeXTweet[] = [];
  /** each author's newest tweet id (X's `most_recent_tweet_id`); no entry: the account has no posts */
  private readonly latest = new Map<string, string>();

  addUser(input: FakeXUserInput): FakeXUser {
    const id = input.id ?? String(nextUserId++);
    const user: FakeXUser = {
      id,
      username: input.username,
      name: input.name ?? input.username,
      description: input.description ?? '',
      verified: input.verified ?? false,
      profile_image_url: `https://pbs.twimg.com/profile_images/${id}/photo_normal.jpg`,
      created_at: (input.createdAt ?? new Date('2015-06-01T00:00:00.000Z')).toISOString(),
      public_metrics: { followers_count: input.followers ?? 100, following_count: 10, tweet_count: 0, listed_count: 0 },
      suspended: false,
      protected: false,
      url: '',
      location: '',
    };
    this.users.set(id, user);
    return user;
  }

  /** The user with this username (any case) or id, suspended ones included. */
  user(usernameOrId: string): FakeXUser | undefined {
    const byId = this.users.get(usernameOrId);
    if (byId) return byId;
    const lower = usernameOrId.toLowerCase();
    for (const u of this.users.values()) if (u.username.toLowerCase() === lower) return u;
    return undefined;
  }

  post(input: FakeXPostInput): FakeXTweet {
    const author = this.user(input.author);
    if (!author) throw new Error(`fake X: no user ${input.author}`);
    const at = input.createdAt ?? new Date();
    const id = input.id ?? snowflakeId(at);
    const tweet: FakeXTweet = {
      id,
      text: input.text,
      author_id: author.id,
      created_at: at.toISOString(),
      ...(input.lang !== null && { lang: input.lang ?? 'en' }),
      edit_history_tweet_ids: [id],
      ...(input.references?.length && { referenced_tweets: input.references }),
      public_metrics: {
        retweet_count: 0,
        reply_count: 0,
        like_count: input.likes ?? 0,
        quote_count: 0,
        bookmark_count: 0,
        impression_count: 0,
      },
    };
    // keep id order (a tweet posted with an older time lands where X would list it)
    let i = this.tweets.length;
    while (i > 0 && compareIds(this.tweets[i - 1]!.id, id) > 0) i--;
    this.tweets.splice(i, 0, tweet);
    author.public_metrics.tweet_count++;
    const was = this.latest.get(author.id);
    if (was === undefined || compareIds(id, was) > 0) this.latest.set(author.id, id);
    this.emit('tweet', tweet, author);
    this.activity('post.create', author.id, { ...tweet });
    return tweet;
  }

  /** The author deletes the post: it no longer resolves; X's activity `post.delete` tells it. */
  deletePost(id: string): FakeXTweet {
    const i = this.tweets.findIndex((t) => t.id === id);
    if (i < 0) throw new Error(`fake X: no post ${id}`);
    const [tweet] = this.tweets.splice(i, 1) as [FakeXTweet];
    if (this.latest.get(tweet.author_id) === id) {
      const newest = this.newestFirst((t) => t.author_id === tweet.author_id)[0];
      if (newest) this.latest.set(tweet.author_id, newest.id);
      else this.latest.delete(tweet.author_id);
    }
    const author = this.users.get(tweet.author_id);
    if (author) author.public_metrics.tweet_count--;
    this.activity('post.delete', tweet.author_id, { id, author_id: tweet.author_id });
    return tweet;
  }

  private activity(eventType: string, userId: string, payload: Record<string, unknown>): void {
    const event: FakeXActivity = { event_type: eventType, user_id: userId, payload, at: Date.now() };
    this.emit('activity', event);
  }

  /** The account takes a new username; the old one no longer resolves. */
  rename(username: string, newUsername: string): FakeXUser {
    const u = this.user(username);
    if (!u) throw new Error(`fake X: no user ${username}`);
    const before = u.username;
    u.username = newUsername;
    this.activity('profile.update.handle', u.id, { before, after: newUsername });
    return u;
  }

  suspend(username: string, suspended = true): FakeXUser {
    const u = this.user(username);
    if (!u) throw new Error(`fake X: no user ${username}`);
    u.suspended = suspended;
    return u;
  }

  /** The account's profile changes (name, bio, avatar, verified, protected). */
  update(username: string, patch: FakeXProfilePatch): FakeXUser {
    const u = this.user(username);
    if (!u) throw new Error(`fake X: no user ${username}`);
    const before = { ...u };
    Object.assign(u, patch);
    for (const [field, eventType] of Object.entries(PROFILE_EVENT_OF) as [keyof typeof PROFILE_EVENT_OF, string][])
      if (before[field] !== u[field]) this.activity(eventType, u.id, { before: before[field], after: u[field] });
    return u;
  }

  /** The account is deleted: neither its id nor its username resolves any more. */
  remove(username: string): void {
    const u = this.user(username);
    if (!u) throw new Error(`fake X: no user ${username}`);
    this.users.delete(u.id);
  }

  /** The account's newest post id (X's `most_recent_tweet_id`), undefined when it has none. */
  mostRecentTweetId(userId: string): string | undefined {
    return this.latest.get(userId);
  }

  tweet(id: string): FakeXTweet | undefined {
    return this.tweets.find((t) => t.id === id);
  }

  /** Newest first, the order X lists timelines and search results in. */
  newestFirst(filter: (t: FakeXTweet) => boolean): FakeXTweet[] {
    const out: FakeXTweet[] = [];
    for (let i = this.tweets.length - 1; i >= 0; i--) if (filter(this.tweets[i]!)) out.push(this.tweets[i]!);
    return out;
  }
}
