/**
 * The `local` provider: users and tweets stored in PostgreSQL (social_users, social_tweets).
 * Timelines and search are newest first, paged by keyset on (created_at, id as a number) with
 * opaque cursors; search is full text over the generated `search` tsvector column (GIN index)
 * through websearch_to_tsquery('simple', q). Database errors are not wrapped: the caller decides
 * what an unreachable database means (read-api answers 503).
 */
import { Prisma, type Db } from '@sts/db';
import { isValidTweetId, isValidUsername, snowflakeId } from '@sts/core';
import { decodeKeyset, encodeKeyset } from './cursor';
import {
  InvalidCursorError,
  type Page,
  type PageRequest,
  type SocialSource,
  type SocialTweet,
  type SocialUser,
} from './types';

/** Bad input to the local-store writers (unknown author, empty or over-long text, bad username). */
export class SocialInputError extends Error {
  override name = 'SocialInputError';
}

export const TWEET_MAX_LENGTH = 280;
export const USER_NAME_MAX_LENGTH = 50;
export const USER_DESCRIPTION_MAX_LENGTH = 160;

const TWEET_ID = /^[1-9][0-9]{0,18}$/;

/** A social_users row (or any record with the SocialUser fields) as the SocialUser it carries, without the store's own columns. */
function toUser(row: SocialUser): SocialUser {
  return {
    id: row.id,
    username: row.username,
    name: row.name,
    description: row.description,
    followersCount: row.followersCount,
    followingCount: row.followingCount,
    tweetCount: row.tweetCount,
    verified: row.verified,
    profileImageUrl: row.profileImageUrl,
    createdAt: row.createdAt,
  };
}

/** A social_tweets row joined with its author, as the raw queries below select it. */
interface TweetRow {
  id: string;
  author_id: string;
  text: string;
  lang: string | null;
  like_count: number;
  retweet_count: number;
  reply_count: number;
  quote_count: number;
  created_at: Date;
  u_username: string;
  u_name: string;
  u_description: string | null;
  u_followers_count: number;
  u_following_count: number;
  u_tweet_count: number;
  u_verified: boolean;
  u_profile_image_url: string | null;
  u_created_at: Date;
}

const TWEET_COLUMNS = Prisma.sql`
  t.id, t.author_id, t.text, t.lang, t.like_count, t.retweet_count, t.reply_count, t.quote_count, t.created_at,
  u.username AS u_username, u.name AS u_name, u.description AS u_description,
  u.followers_count AS u_followers_count, u.following_count AS u_following_count,
  u.tweet_count AS u_tweet_count, u.verified AS u_verified,
  u.profile_image_url AS u_profile_image_url, u.created_at AS u_created_at`;

function toTweet(row: TweetRow): SocialTweet {
  const author: SocialUser = {
    id: row.author_id,
    username: row.u_username,
    name: row.u_name,
    description: row.u_description,
    followersCount: row.u_followers_count,
    followingCount: row.u_following_count,
    tweetCount: row.u_tweet_count,
    verified: row.u_verified,
    profileImageUrl: row.u_profile_image_url,
    createdAt: row.u_created_at,
  };
  return {
    id: row.id,
    text: row.text,
    authorId: row.author_id,
    author,
    createdAt: row.created_at,
    lang: row.lang,
    metrics: {
      likeCount: row.like_count,
      retweetCount: row.retweet_count,
      replyCount: row.reply_count,
      quoteCount: row.quote_count,
    },
  };
}

/** `AND (created_at, id) < cursor` in newest-first order; ids compare as numbers. */
function keysetBefore(cursor: string | undefined, kind: string): Prisma.Sql {
  if (cursor === undefined) return Prisma.empty;
  const { at, id } = decodeKeyset(cursor, kind, TWEET_ID);
  // the plain created_at bound lets the (…, created_at DESC, id DESC) indexes prune
  return Prisma.sql`AND t.created_at <= ${at} AND (t.created_at, t.id::numeric) < (${at}::timestamptz, ${id}::numeric)`;
}

function pageOf(rows: TweetRow[], limit: number, kind: string): Page<SocialTweet> {
  const items = rows.slice(0, limit).map(toTweet);
  const last = items[items.length - 1];
  return { items, nextCursor: rows.length > limit && last ? encodeKeyset(kind, last.createdAt, last.id) : null };
}

function checkLimit(limit: number): number {
  if (!Number.isInteger(limit) || limit < 1) throw new RangeError('limit must be a positive integer');
  return Math.min(limit, 1000);
}

export function createLocalSource({ db }: { db: Db }): SocialSource {
  async function findUser(username: string): Promise<SocialUser | null> {
    if (!isValidUsername(username)) return null;
    const row = await db.socialUser.findUnique({ where: { usernameKey: username.toLowerCase() } });
    return row ? toUser(row) : null;
  }

  return {
    name: 'local',

    getUser: findUser,

    async getUserTimeline(username: string, page: PageRequest): Promise<Page<SocialTweet> | null> {
      const limit = checkLimit(page.limit);
      const after = keysetBefore(page.cursor, 'tl');
      const user = await findUser(username);
      if (!user) return null;
      const rows = await db.$queryRaw<TweetRow[]>`
        SELECT ${TWEET_COLUMNS}
        FROM social_tweets t JOIN social_users u ON u.id = t.author_id
        WHERE t.author_id = ${user.id} ${after}
        ORDER BY t.created_at DESC, t.id::numeric DESC
        LIMIT ${limit + 1}`;
      return pageOf(rows, limit, 'tl');
    },

    async getTweet(id: string): Promise<SocialTweet | null> {
      if (!isValidTweetId(id)) return null;
      const rows = await db.$queryRaw<TweetRow[]>`
        SELECT ${TWEET_COLUMNS}
        FROM social_tweets t JOIN social_users u ON u.id = t.author_id
        WHERE t.id = ${id}`;
      return rows[0] ? toTweet(rows[0]) : null;
    },

    async search(query: string, page: PageRequest): Promise<Page<SocialTweet>> {
      const limit = checkLimit(page.limit);
      const after = keysetBefore(page.cursor, 'sr');
      // NUL cannot be sent to PostgreSQL; it carries no search meaning anyway
      const q = query.replace(/\0/g, ' ').trim();
      if (!q) return { items: [], nextCursor: null };
      const rows = await db.$queryRaw<TweetRow[]>`
        SELECT ${TWEET_COLUMNS}
        FROM social_tweets t JOIN social_users u ON u.id = t.author_id
        WHERE t.search @@ websearch_to_tsquery('simple', ${q}) ${after}
        ORDER BY t.created_at DESC, t.id::numeric DESC
        LIMIT ${limit + 1}`;
      return pageOf(rows, limit, 'sr');
    },

    async getTweetsSince(username: string, sinceId: string | null, limit: number): Promise<SocialTweet[] | null> {
      const n = checkLimit(limit);
      if (sinceId !== null && !isValidTweetId(sinceId)) throw new InvalidCursorError('sinceId must be a numeric id');
      const user = await findUser(username);
      if (!user) return null;
      if (sinceId === null) {
        // no starting point: the newest `limit` tweets, returned oldest first
        const rows = await db.$queryRaw<TweetRow[]>`
          SELECT ${TWEET_COLUMNS}
          FROM social_tweets t JOIN social_users u ON u.id = t.author_id
          WHERE t.author_id = ${user.id}
          ORDER BY t.id::numeric DESC
          LIMIT ${n}`;
        return rows.reverse().map(toTweet);
      }
      const rows = await db.$queryRaw<TweetRow[]>`
        SELECT ${TWEET_COLUMNS}
        FROM social_tweets t JOIN social_users u ON u.id = t.author_id
        WHERE t.author_id = ${user.id} AND t.id::numeric > ${sinceId}::numeric
        ORDER BY t.id::numeric ASC
        LIMIT ${n}`;
      return rows.map(toTweet);
    },
  };
}

// ---- writers for the local store (admin CLI, seed, demo generator, tests) ----

/**
 * A user to store: the SocialUser fields, `username` and `name` required. `id` (numeric) is a new
 * snowflake id when absent and ignored when the user exists; `tweetCount` follows the stored tweets.
 */
export type SocialUserInput = Pick<SocialUser, 'username' | 'name'> &
  Partial<
    Pick<SocialUser, 'id' | 'description' | 'followersCount' | 'followingCount' | 'verified' | 'profileImageUrl'>
  > & {
    createdAt?: Date;
  };

function countNonNegative(value: number | undefined, field: string): number | undefined {
  if (value === undefined) return undefined;
  if (!Number.isInteger(value) || value < 0 || value > 2_147_483_647) {
    throw new SocialInputError(`${field} must be a whole number from 0 to 2147483647`);
  }
  return value;
}

function codePoints(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

/**
 * Creates a user of the local store, or updates the given fields of the existing one with the same
 * username (case-insensitive): an upsert by username. Returns the stored user.
 */
export async function createSocialUser(db: Db, input: SocialUserInput): Promise<SocialUser> {
  if (typeof input.username !== 'string' || !isValidUsername(input.username)) {
    throw new SocialInputError('username must be 1 to 15 letters, digits or underscores');
  }
  const name = typeof input.name === 'string' ? input.name.trim() : '';
  if (!name) throw new SocialInputError('name is required');
  if (codePoints(name) > USER_NAME_MAX_LENGTH) {
    throw new SocialInputError(`name must be at most ${USER_NAME_MAX_LENGTH} characters`);
  }
  if (input.description && codePoints(input.description) > USER_DESCRIPTION_MAX_LENGTH) {
    throw new SocialInputError(`description must be at most ${USER_DESCRIPTION_MAX_LENGTH} characters`);
  }
  if (input.id !== undefined && !isValidTweetId(input.id)) throw new SocialInputError('id must be a numeric id');
  const followersCount = countNonNegative(input.followersCount, 'followers');
  const followingCount = countNonNegative(input.followingCount, 'following');
  const fields = {
    username: input.username,
    name,
    ...(input.description !== undefined ? { description: input.description } : {}),
    ...(followersCount !== undefined ? { followersCount } : {}),
    ...(followingCount !== undefined ? { followingCount } : {}),
    ...(input.verified !== undefined ? { verified: input.verified } : {}),
    ...(input.profileImageUrl !== undefined ? { profileImageUrl: input.profileImageUrl } : {}),
  };
  const createdAt = input.createdAt ?? new Date();
  const row = await db.socialUser.upsert({
    where: { usernameKey: input.username.toLowerCase() },
    create: { ...fields, id: input.id ?? snowflakeId(createdAt), usernameKey: input.username.toLowerCase(), createdAt },
    update: fields,
  });
  return toUser(row);
}

export interface SocialTweetInput {
  authorUsername: string;
  text: string;
  /** defaults to now; the id is a snowflake of this time, so ids follow time as on X */
  createdAt?: Date;
  lang?: string | null;
  /** numeric id; a new snowflake id when absent */
  id?: string;
  metrics?: Partial<SocialTweet['metrics']>;
}

/** Stores a tweet by an existing user of the local store and counts it on the author. */
export async function createSocialTweet(db: Db, input: SocialTweetInput): Promise<SocialTweet> {
  if (typeof input.text !== 'string' || input.text.trim() === '') throw new SocialInputError('text must not be empty');
  if (codePoints(input.text) > TWEET_MAX_LENGTH) {
    throw new SocialInputError(`text must be at most ${TWEET_MAX_LENGTH} characters`);
  }
  if (input.text.includes('\0')) throw new SocialInputError('text must not contain NUL characters');
  if (typeof input.authorUsername !== 'string' || !isValidUsername(input.authorUsername)) {
    throw new SocialInputError('author must be a valid username');
  }
  if (input.id !== undefined && !isValidTweetId(input.id)) throw new SocialInputError('id must be a numeric id');
  const createdAt = input.createdAt ?? new Date();
  if (Number.isNaN(createdAt.getTime())) throw new SocialInputError('createdAt is not a valid date');
  const m = input.metrics ?? {};
  const likeCount = countNonNegative(m.likeCount, 'like_count') ?? 0;
  const retweetCount = countNonNegative(m.retweetCount, 'retweet_count') ?? 0;
  const replyCount = countNonNegative(m.replyCount, 'reply_count') ?? 0;
  const quoteCount = countNonNegative(m.quoteCount, 'quote_count') ?? 0;
  return db.$transaction(async (tx) => {
    const author = await tx.socialUser.findUnique({ where: { usernameKey: input.authorUsername.toLowerCase() } });
    if (!author) throw new SocialInputError(`unknown author "${input.authorUsername}"`);
    const row = await tx.socialTweet.create({
      data: {
        id: input.id ?? snowflakeId(createdAt),
        authorId: author.id,
        text: input.text,
        lang: input.lang ?? null,
        likeCount,
        retweetCount,
        replyCount,
        quoteCount,
        createdAt,
      },
      select: {
        id: true,
        text: true,
        lang: true,
        likeCount: true,
        retweetCount: true,
        replyCount: true,
        quoteCount: true,
        createdAt: true,
      },
    });
    const updated = await tx.socialUser.update({
      where: { id: author.id },
      data: { tweetCount: { increment: 1 } },
    });
    return {
      id: row.id,
      text: row.text,
      authorId: author.id,
      author: toUser(updated),
      createdAt: row.createdAt,
      lang: row.lang,
      metrics: {
        likeCount: row.likeCount,
        retweetCount: row.retweetCount,
        replyCount: row.replyCount,
        quoteCount: row.quoteCount,
      },
    };
  });
}
