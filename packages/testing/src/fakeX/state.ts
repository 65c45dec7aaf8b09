/**
 * The fake X's data: users and tweets, held in memory. `post()` stores a tweet and emits `'tweet'`
 * (the stream module delivers it at once); `rename()` and `suspend()` change an account the way X
 * does (the old username stops resolving; a suspended account answers X's "Forbidden" problem);
 * `update()` changes a profile and `remove()` deletes an account.
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
}

/** what `update()` may change of an account's profile */
export type FakeXProfilePatch = Partial<
  Pick<FakeXUser, 'name' | 'description' | 'verified' | 'profile_image_url' | 'protected'>
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
    return tweet;
  }

  /** The account takes a new username; the old one no longer resolves. */
  rename(username: string, newUsername: string): FakeXUser {
    const u = this.user(username);
    if (!u) throw new Error(`fake X: no user ${username}`);
    u.username = newUsername;
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
    return Object.assign(u, patch);
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
