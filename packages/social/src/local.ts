/**
 * The `local` provider: users and tweets stored in PostgreSQL (social_users, social_tweets, ids as
 * bigint, carried as strings outside). Every query is index-bound (see packages/social/README.md):
 * - timelines: keyset on (created_at, id) over (author_id, created_at DESC, id DESC);
 * - search: full text through websearch_to_tsquery('simple', q), newest first, from the posting
 *   table social_tweet_terms (term, created_at, tweet_id), kept by a trigger: one term (or terms
 *   joined by `or`) reads just the page from its postings, whatever its frequency; other queries
 *   walk the rarest required term's postings rechecking each tweet, over at most SEARCH_WALK_ROWS,
 *   before the GIN index on `search` (see packages/social/README.md, "Search");
 * - pollTweets: one author's tweets in (xid, id) order after the position, only below the snapshot
 *   horizon (COMMIT_HORIZON of @sts/db), over (author_id, xid, id).
 * Database errors are not wrapped: the caller decides what an unreachable database means (read-api
 * answers 503).
 */
import { COMMIT_HORIZON, Prisma, type Db } from '@sts/db';
import { isValidTweetId, isValidUsername, snowflakeId } from '@sts/core';
import { decodeKeyset, encodeKeyset } from './cursor';
import {
  drivers,
  isExact,
  needsChoice,
  parseTsQuery,
  positiveLexemes,
  TsQueryParseError,
  type TsNode,
} from './tsquery';
import {
  InvalidCursorError,
  type Page,
  type PageRequest,
  type PollPage,
  type PollRequest,
  type ReferencedTweet,
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

/**
 * Rows a search walks (postings of one driver term, or the time index when no term drives) before
 * it stops and asks the GIN index for every match instead. Only queries whose postings are not
 * exactly their matches walk (`a b`, phrases, exclusions; see search): one term, or terms joined by
 * `or`, read just the page from the postings. Measured in bench/store.ts.
 */
const SEARCH_WALK_ROWS = 1000;
/** Postings read per term (at most) to choose which term of `a b` drives the walk (termWeights). */
const TERM_SAMPLE = 500;
/** Query texts whose parsed tsquery the source keeps (oldest dropped first). */
const PARSE_CACHE_SIZE = 1000;

const TWEET_ID = /^[1-9][0-9]{0,18}$/;
const BIGINT_MAX = 9223372036854775807n;
const XID8 = /^(0|[1-9][0-9]{0,19})$/;

/** A social_users row (the SocialUser fields, its id a bigint) as the SocialUser it carries, without the store's own columns. */
function toUser(row: Omit<SocialUser, 'id'> & { id: bigint }): SocialUser {
  return {
    id: String(row.id),
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

/** A social_tweets row joined with its author, as the raw queries below select it (ids as text). */
interface TweetRow {
  id: string;
  author_id: string;
  text: string;
  lang: string | null;
  like_count: number;
  retweet_count: number;
  reply_count: number;
  quote_count: number;
  reply_to_id: string | null;
  quote_of_id: string | null;
  repost_of_id: string | null;
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

const TWEET_FIELDS = Prisma.sql`
  t.id::text AS id, t.author_id::text AS author_id, t.text, t.lang, t.like_count, t.retweet_count, t.reply_count,
  t.quote_count, t.reply_to_id::text AS reply_to_id, t.quote_of_id::text AS quote_of_id,
  t.repost_of_id::text AS repost_of_id, t.created_at`;

const AUTHOR_FIELDS = Prisma.sql`
  u.username AS u_username, u.name AS u_name, u.description AS u_description,
  u.followers_count AS u_followers_count, u.following_count AS u_following_count,
  u.tweet_count AS u_tweet_count, u.verified AS u_verified,
  u.profile_image_url AS u_profile_image_url, u.created_at AS u_created_at`;

const TWEET_COLUMNS = Prisma.sql`${TWEET_FIELDS}, ${AUTHOR_FIELDS}`;

/** Rows of a user joined with their tweets (LEFT JOIN LATERAL): none = no such user, id null = no tweet. */
type UserTweetRow = Omit<TweetRow, 'id'> & { id: string | null };

function tweetsOf<T extends UserTweetRow>(rows: T[]): (T & TweetRow)[] {
  return rows.filter((r): r is T & TweetRow => r.id !== null);
}

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
    referencedTweets: referencesOf(row.reply_to_id, row.quote_of_id, row.repost_of_id),
  };
}

/** The store's reference columns as X's referenced_tweets (X's order: replied_to, quoted, retweeted). */
type RefId = string | bigint | null;
function referencesOf(replyTo: RefId, quoteOf: RefId, repostOf: RefId): ReferencedTweet[] {
  const out: ReferencedTweet[] = [];
  if (replyTo !== null) out.push({ type: 'replied_to', id: String(replyTo) });
  if (quoteOf !== null) out.push({ type: 'quoted', id: String(quoteOf) });
  if (repostOf !== null) out.push({ type: 'retweeted', id: String(repostOf) });
  return out;
}

function isTweetId(id: string): boolean {
  return TWEET_ID.test(id) && BigInt(id) <= BIGINT_MAX;
}

interface Keyset {
  at: Date;
  id: string;
}

function decodePosition(cursor: string | undefined, kind: string): Keyset | null {
  if (cursor === undefined) return null;
  const k = decodeKeyset(cursor, kind, TWEET_ID);
  if (!isTweetId(k.id)) throw new InvalidCursorError('cursor is not valid');
  return k;
}

/** `AND (created_at, id) < cursor` in newest-first order, on the native columns the indexes cover. */
function keysetBefore(
  k: Keyset | null,
  alias: Prisma.Sql = Prisma.sql`t`,
  id: Prisma.Sql = Prisma.sql`id`,
): Prisma.Sql {
  if (k === null) return Prisma.empty;
  return Prisma.sql`AND (${alias}.created_at, ${alias}.${id}) < (${k.at}::timestamptz, ${k.id}::bigint)`;
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

/** A local poll position: "l.<xid>.<tweet id>"; null for none or another provider's position. */
function decodePollPosition(position: string | null): { xid: bigint; id: bigint } | null {
  if (position === null || !position.startsWith('l.')) return null;
  const [xid, id, ...rest] = position.slice(2).split('.');
  if (
    rest.length > 0 ||
    xid === undefined ||
    id === undefined ||
    !XID8.test(xid) ||
    !/^(0|[1-9][0-9]{0,18})$/.test(id)
  ) {
    throw new InvalidCursorError('poll position is not valid');
  }
  const p = { xid: BigInt(xid), id: BigInt(id) };
  if (p.id > BIGINT_MAX) throw new InvalidCursorError('poll position is not valid');
  return p;
}

function encodePollPosition(xid: bigint, id: bigint): string {
  return `l.${xid}.${id}`;
}

interface SearchShape {
  tsq: Prisma.Sql;
  k: Keyset | null;
  limit: number;
  walkRows: number;
}

/** The page's tweets with their authors, newest first, from a CTE list ending in `top(id, created_at)`. */
function searchStatement(ctes: Prisma.Sql): Prisma.Sql {
  return Prisma.sql`WITH ${ctes}
    SELECT ${TWEET_COLUMNS}
    FROM top JOIN social_tweets t ON t.id = top.id JOIN social_users u ON u.id = t.author_id
    ORDER BY t.created_at DESC, t.id DESC`;
}

/**
 * One term, or terms joined by `or`: the postings are exactly the matches, so the page is the
 * newest limit + 1 postings of each term after the cursor (a backward walk of the primary key,
 * limit + 1 rows per term), merged.
 */
function exactSearch(terms: string[], { k, limit }: SearchShape): Prisma.Sql {
  return searchStatement(Prisma.sql`top AS (
      SELECT DISTINCT m.tweet_id AS id, m.created_at
      FROM unnest(${terms}::text[]) AS d(term)
      CROSS JOIN LATERAL (
        SELECT p.tweet_id, p.created_at FROM social_tweet_terms p
        WHERE p.term = d.term ${keysetBefore(k, Prisma.sql`p`, Prisma.sql`tweet_id`)}
        ORDER BY p.created_at DESC, p.tweet_id DESC LIMIT ${limit + 1}) m
      ORDER BY m.created_at DESC, id DESC LIMIT ${limit + 1})`);
}

/**
 * A walk that may come up short, and the GIN index when it does: `walk` (CTE `b(id, created_at)`,
 * at most limit + 1 matches per walk) is the answer unless `incomplete` (its walk stopped at
 * walkRows rows without a full page); then every match after the cursor from the GIN index
 * (a bitmap scan), sorted. One-Time Filters skip whichever side is not needed; `slow` is
 * MATERIALIZED so the planner keeps it on the GIN index.
 */
function walkOrIndex(walk: Prisma.Sql, incomplete: Prisma.Sql, { tsq, k, limit }: SearchShape): Prisma.Sql {
  return searchStatement(Prisma.sql`${walk},
    done AS MATERIALIZED (SELECT NOT (${incomplete}) AS ok),
    slow AS MATERIALIZED (SELECT t.id, t.created_at FROM social_tweets t WHERE t.search @@ ${tsq} ${keysetBefore(k)}),
    top AS MATERIALIZED (
      (SELECT DISTINCT id, created_at FROM b WHERE (SELECT ok FROM done)
       ORDER BY created_at DESC, id DESC LIMIT ${limit + 1})
      UNION ALL
      (SELECT id, created_at FROM slow WHERE NOT (SELECT ok FROM done)
       ORDER BY created_at DESC, id DESC LIMIT ${limit + 1}))`);
}

/**
 * Any other query with driver terms (`a b`, phrases, `a -b`): walk each driver term's postings
 * after the cursor, newest first, checking each tweet against the whole query. First a probe of
 * `probe` postings (4 pages' worth): with k matches there, a page needs about (limit + 1) * probe / k
 * postings; the walk goes on (twice that, at most walkRows) only when that fits, else (k = 0, or a
 * match rate too low) the GIN index answers at once instead of after a long walk. A term whose walk
 * stopped short of a page with postings left means the GIN index.
 */
function postingWalkSearch(terms: string[], s: SearchShape): Prisma.Sql {
  const after = keysetBefore(s.k, Prisma.sql`p`, Prisma.sql`tweet_id`);
  const probe = Math.min(s.walkRows, 4 * (s.limit + 1));
  const walk = (term: Prisma.Sql, rows: Prisma.Sql) => Prisma.sql`
        SELECT w.tweet_id AS id, w.created_at FROM (
          SELECT p.tweet_id, p.created_at FROM social_tweet_terms p WHERE p.term = ${term} ${after}
          ORDER BY p.created_at DESC, p.tweet_id DESC LIMIT ${rows}) w
        CROSS JOIN LATERAL (
          SELECT 1 FROM social_tweets t WHERE t.id = w.tweet_id AND t.search @@ ${s.tsq} OFFSET 0) ok
        ORDER BY w.created_at DESC, w.tweet_id DESC LIMIT ${s.limit + 1}`;
  const ctes = Prisma.sql`d AS MATERIALIZED (SELECT unnest(${terms}::text[]) AS term),
    probe AS MATERIALIZED (
      SELECT d.term, (SELECT count(*) FROM (${walk(Prisma.sql`d.term`, Prisma.sql`${probe}`)}) m)::int AS k FROM d),
    plan AS MATERIALIZED (
      SELECT term, CASE WHEN k = 0 OR k > ${s.limit} THEN ${probe}
                        ELSE least(${s.walkRows}, greatest(${probe}, ceil(2.0 * ${(s.limit + 1) * probe} / k)))::int
                   END AS rows
      FROM probe),
    b AS MATERIALIZED (
      SELECT plan.term, m.id, m.created_at FROM plan
      CROSS JOIN LATERAL (${walk(Prisma.sql`plan.term`, Prisma.sql`plan.rows`)}) m)`;
  const incomplete = Prisma.sql`EXISTS (
      SELECT 1 FROM plan
      WHERE (SELECT count(*) FROM b WHERE b.term = plan.term) <= ${s.limit}
        AND (SELECT count(*) FROM (
          SELECT 1 FROM social_tweet_terms p WHERE p.term = plan.term ${after} LIMIT plan.rows) c) >= plan.rows)`;
  return walkOrIndex(ctes, incomplete, s);
}

/**
 * No term every match contains (`-word` alone, `a or -b`): such queries match on an absence, so
 * most tweets match. Walk the time index after the cursor, checking each tweet, until limit + 1
 * matches (no GIN fallback: the index cannot serve an absence, and a page is near). The outer
 * level has no ORDER BY, so the planner plans the walk for the first rows (the time index), and
 * the Limit takes them in the walk's order.
 */
function timeWalkSearch({ tsq, k, limit }: SearchShape): Prisma.Sql {
  return searchStatement(Prisma.sql`top AS MATERIALIZED (
      SELECT x.id, x.created_at FROM (
        SELECT t.id, t.created_at, t.search FROM social_tweets t WHERE true ${keysetBefore(k)}
        ORDER BY t.created_at DESC, t.id DESC) x
      WHERE x.search @@ ${tsq}
      LIMIT ${limit + 1})`);
}

/** Parsed tsquery trees by query text; 'unparsed' when the printed tsquery was not understood. */
type ParseCache = Map<string, TsNode | null | 'unparsed'>;

/** The query's tsquery tree as PostgreSQL reads it (websearch syntax), cached by query text. */
async function parseQuery(db: Db, cache: ParseCache, q: string): Promise<TsNode | null | 'unparsed'> {
  const known = cache.get(q);
  if (known !== undefined) return known;
  const [row] = await db.$queryRaw<{ q: string }[]>`SELECT websearch_to_tsquery('simple', ${q})::text AS q`;
  let tree: TsNode | null | 'unparsed';
  try {
    tree = parseTsQuery(row?.q ?? '');
  } catch (err) {
    if (!(err instanceof TsQueryParseError)) throw err;
    tree = 'unparsed'; // searched by the time walk, which needs no tree
  }
  if (cache.size >= PARSE_CACHE_SIZE) cache.delete(cache.keys().next().value!);
  cache.set(q, tree);
  return tree;
}

/**
 * Each term's weight for choosing drivers: its number of postings when under TERM_SAMPLE, else
 * an estimate from the time its newest TERM_SAMPLE postings span (TERM_SAMPLE per span, over a
 * year; at least TERM_SAMPLE), so that of two common terms the one spread thinner drives. One
 * backward index-only scan of at most TERM_SAMPLE rows per term.
 */
async function termWeights(db: Db, terms: string[]): Promise<Map<string, number>> {
  const rows = await db.$queryRaw<{ term: string; n: number; span_s: number | null }[]>`
    SELECT x.term, s.n, s.span_s FROM unnest(${terms}::text[]) AS x(term)
    CROSS JOIN LATERAL (
      SELECT count(*)::int AS n, extract(epoch FROM max(w.created_at) - min(w.created_at))::float8 AS span_s
      FROM (SELECT p.created_at FROM social_tweet_terms p WHERE p.term = x.term
            ORDER BY p.created_at DESC, p.tweet_id DESC LIMIT ${TERM_SAMPLE}) w) s`;
  const year = 365 * 86_400;
  return new Map(
    rows.map((r) => [
      r.term,
      r.n < TERM_SAMPLE ? r.n : Math.max(TERM_SAMPLE, (TERM_SAMPLE * year) / Math.max(1, r.span_s ?? 0)),
    ]),
  );
}

/**
 * Every author's tweets after the position in (xid, id) order below the horizon: SocialSource
 * pollAllTweets (the query monitors' intake), over social_tweets (xid, id).
 */
async function pollAllTweets(db: Db, request: PollRequest): Promise<PollPage> {
  const n = checkLimit(request.limit);
  let from = decodePollPosition(request.position);
  if (from === null) {
    // no position: just before the oldest transaction that wrote a tweet created since
    // notBefore (the time index finds those rows), or at the horizon when there is none
    const [first] = await db.$queryRaw<{ xid: string }[]>`
      SELECT least(
        (SELECT min(t.xid::text::numeric) FROM social_tweets t WHERE t.created_at >= ${request.notBefore}),
        ${COMMIT_HORIZON}::text::numeric)::text AS xid`;
    const start = BigInt(first!.xid) - 1n;
    from = { xid: start < 0n ? 0n : start, id: BIGINT_MAX };
  }
  // every author's tweets in (xid, id) order below the horizon, over social_tweets (xid, id)
  const rows = await db.$queryRaw<(UserTweetRow & { horizon: string; xid: string | null })[]>`
    WITH h AS MATERIALIZED (SELECT ${COMMIT_HORIZON} AS horizon)
    SELECT h.horizon::text AS horizon, r.*
    FROM h LEFT JOIN LATERAL (
      SELECT ${TWEET_FIELDS}, ${AUTHOR_FIELDS}, t.xid::text AS xid
      FROM social_tweets t JOIN social_users u ON u.id = t.author_id
      WHERE (t.xid, t.id) > (${String(from.xid)}::xid8, ${String(from.id)}::bigint)
        AND t.xid < h.horizon
        AND t.created_at >= ${request.notBefore}
      ORDER BY t.xid, t.id
      LIMIT ${n}
    ) r ON true`;
  return xidPage(rows, n, from);
}

/**
 * A page of rows read in (xid, id) order below the snapshot horizon: a full page continues after
 * its last row; a short one has read everything below the horizon, so the next call starts there.
 */
function xidPage(
  rows: (UserTweetRow & { horizon: string; xid: string | null })[],
  n: number,
  from: { xid: bigint; id: bigint },
): PollPage {
  const found = tweetsOf(rows) as (TweetRow & { xid: string })[];
  const last = found[found.length - 1];
  if (found.length >= n && last) {
    return {
      tweets: found.map(toTweet),
      position: encodePollPosition(BigInt(last.xid), BigInt(last.id)),
      more: true,
    };
  }
  const horizon = BigInt(rows[0]!.horizon);
  const position =
    horizon - 1n >= from.xid ? encodePollPosition(horizon - 1n, BIGINT_MAX) : encodePollPosition(from.xid, from.id);
  return { tweets: found.map(toTweet), position, more: false };
}

export interface LocalSourceOptions {
  db: Db;
  /** rows a search walks before the GIN index; default SEARCH_WALK_ROWS (tests set it small to mix the paths) */
  searchWalkRows?: number;
}

export function createLocalSource({ db, searchWalkRows }: LocalSourceOptions): SocialSource {
  const walkRows = searchWalkRows ?? SEARCH_WALK_ROWS;
  const parsed: ParseCache = new Map();

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
      const k = decodePosition(page.cursor, 'tl');
      if (!isValidUsername(username)) return null;
      // one round trip: the user (no row: unknown) and their page of tweets
      const rows = await db.$queryRaw<UserTweetRow[]>`
        SELECT ${AUTHOR_FIELDS}, r.* FROM social_users u
        LEFT JOIN LATERAL (
          SELECT ${TWEET_FIELDS} FROM social_tweets t
          WHERE t.author_id = u.id ${keysetBefore(k)}
          ORDER BY t.created_at DESC, t.id DESC
          LIMIT ${limit + 1}
        ) r ON true
        WHERE u.username_key = ${username.toLowerCase()}`;
      if (rows.length === 0) return null;
      return pageOf(tweetsOf(rows), limit, 'tl');
    },

    async getTweet(id: string): Promise<SocialTweet | null> {
      if (!isValidTweetId(id)) return null;
      const rows = await db.$queryRaw<TweetRow[]>`
        SELECT ${TWEET_COLUMNS}
        FROM social_tweets t JOIN social_users u ON u.id = t.author_id
        WHERE t.id = ${id}::bigint`;
      return rows[0] ? toTweet(rows[0]) : null;
    },

    async search(query: string, page: PageRequest): Promise<Page<SocialTweet>> {
      const limit = checkLimit(page.limit);
      const k = decodePosition(page.cursor, 'sr');
      // NUL cannot be sent to PostgreSQL; it carries no search meaning anyway
      const q = query.replace(/\0/g, ' ').trim();
      if (!q) return { items: [], nextCursor: null };
      const tree = await parseQuery(db, parsed, q);
      if (tree === null) return { items: [], nextCursor: null }; // no lexemes: matches nothing
      const s = { tsq: Prisma.sql`websearch_to_tsquery('simple', ${q})`, k, limit, walkRows };
      let chosen: { terms: string[] } | null = null;
      if (tree !== 'unparsed') {
        const counts = needsChoice(tree) ? await termWeights(db, positiveLexemes(tree)) : new Map<string, number>();
        chosen = drivers(tree, (lexeme) => counts.get(lexeme) ?? 0);
      }
      const statement =
        chosen === null
          ? timeWalkSearch(s)
          : tree !== 'unparsed' && isExact(tree)
            ? exactSearch(chosen.terms, s)
            : postingWalkSearch(chosen.terms, s);
      return pageOf(await db.$queryRaw<TweetRow[]>(statement), limit, 'sr');
    },

    async pollTweets(username: string, request: PollRequest): Promise<PollPage | null> {
      const n = checkLimit(request.limit);
      let from = decodePollPosition(request.position);
      if (!isValidUsername(username)) return null;
      const key = username.toLowerCase();
      if (from === null) {
        // no position: start just before the oldest transaction that wrote a tweet created since
        // notBefore (the timeline index finds those rows; the poll order is (xid, id)), or at the
        // horizon when there is none: rows of transactions still open are all at or above it
        const [first] = await db.$queryRaw<{ xid: string }[]>`
          SELECT least(
            (SELECT min(t.xid::text::numeric) FROM social_tweets t
             WHERE t.author_id = u.id AND t.created_at >= ${request.notBefore}),
            ${COMMIT_HORIZON}::text::numeric)::text AS xid
          FROM social_users u WHERE u.username_key = ${key}`;
        if (!first) return null;
        const start = BigInt(first.xid) - 1n;
        from = { xid: start < 0n ? 0n : start, id: BIGINT_MAX };
      }
      // Only rows of transactions below the snapshot horizon are read: every transaction older
      // than it has ended, so no row can still appear behind the returned position. Horizon, user
      // and rows come from one statement (one snapshot, one round trip).
      const rows = await db.$queryRaw<(UserTweetRow & { horizon: string; xid: string | null })[]>`
        WITH h AS MATERIALIZED (SELECT ${COMMIT_HORIZON} AS horizon)
        SELECT h.horizon::text AS horizon, ${AUTHOR_FIELDS}, r.*
        FROM h JOIN social_users u ON u.username_key = ${key}
        LEFT JOIN LATERAL (
          SELECT ${TWEET_FIELDS}, t.xid::text AS xid
          FROM social_tweets t
          WHERE t.author_id = u.id
            AND (t.xid, t.id) > (${String(from.xid)}::xid8, ${String(from.id)}::bigint)
            AND t.xid < h.horizon
            AND t.created_at >= ${request.notBefore}
          ORDER BY t.xid, t.id
          LIMIT ${n}
        ) r ON true`;
      if (rows.length === 0) return null;
      return xidPage(rows, n, from);
    },

    pollAllTweets: (request: PollRequest) => pollAllTweets(db, request),
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
    create: {
      ...fields,
      id: BigInt(input.id ?? snowflakeId(createdAt)),
      usernameKey: input.username.toLowerCase(),
      createdAt,
    },
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
  /** the post this one replies to, quotes or reposts (numeric ids; a repost references nothing else) */
  replyToId?: string;
  quoteOfId?: string;
  repostOfId?: string;
}

function checkReferences(input: SocialTweetInput): void {
  for (const [name, id] of [
    ['reply-to', input.replyToId],
    ['quote', input.quoteOfId],
    ['repost', input.repostOfId],
  ] as const) {
    if (id !== undefined && !isValidTweetId(id)) throw new SocialInputError(`${name} must be a numeric tweet id`);
  }
  if (input.repostOfId !== undefined && (input.replyToId !== undefined || input.quoteOfId !== undefined)) {
    throw new SocialInputError('a repost cannot also reply or quote');
  }
}

/**
 * Stores a tweet by an existing user of the local store and counts it on the author.
 *
 * `createdAt` (when the input has none) is stamped one statement before the commit: the author is
 * looked up first, which on a cold client (a CLI process) also opens the connection and loads the
 * query engine — hundreds of milliseconds that would otherwise sit between the stamp and the
 * commit and show as delivery latency — then the tweet and its author's count are written by one
 * statement in its own transaction, committed as it returns.
 */
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
  checkReferences(input);
  if (input.createdAt && Number.isNaN(input.createdAt.getTime())) {
    throw new SocialInputError('createdAt is not a valid date');
  }
  const m = input.metrics ?? {};
  const likeCount = countNonNegative(m.likeCount, 'like_count') ?? 0;
  const retweetCount = countNonNegative(m.retweetCount, 'retweet_count') ?? 0;
  const replyCount = countNonNegative(m.replyCount, 'reply_count') ?? 0;
  const quoteCount = countNonNegative(m.quoteCount, 'quote_count') ?? 0;
  const unknown = () => new SocialInputError(`unknown author "${input.authorUsername}"`);
  const author = await db.socialUser.findUnique({
    where: { usernameKey: input.authorUsername.toLowerCase() },
    select: { id: true },
  });
  if (!author) throw unknown();
  const createdAt = input.createdAt ?? new Date();
  const ref = (id: string | undefined) => (id !== undefined ? BigInt(id) : null);
  // the author's row is locked by the UPDATE; an author deleted since the look-up leaves no row
  const [row] = await db.$queryRaw<TweetRow[]>`
    WITH u AS (
      UPDATE social_users SET tweet_count = tweet_count + 1 WHERE id = ${author.id} RETURNING *
    ), t AS (
      INSERT INTO social_tweets (id, author_id, text, lang, like_count, retweet_count, reply_count, quote_count,
                                 reply_to_id, quote_of_id, repost_of_id, created_at)
      SELECT ${BigInt(input.id ?? snowflakeId(createdAt))}, u.id, ${input.text}, ${input.lang ?? null}::text,
             ${likeCount}::int, ${retweetCount}::int, ${replyCount}::int, ${quoteCount}::int,
             ${ref(input.replyToId)}::bigint, ${ref(input.quoteOfId)}::bigint, ${ref(input.repostOfId)}::bigint,
             ${createdAt}::timestamptz
      FROM u
      RETURNING *
    )
    SELECT ${TWEET_COLUMNS} FROM t JOIN u ON u.id = t.author_id`;
  if (!row) throw unknown();
  return toTweet(row);
}

/**
 * Deletes a tweet of the local store, as its author deleting a post on X: the tweet goes (the
 * terms trigger removes its search terms) and its author's count drops, in one transaction; the
 * delete trigger notifies the pollers (the tweets' channel, "d <target key> <tweet id>") when a
 * monitor of the author asks for deletions. Returns the deleted tweet's id and author; an unknown
 * id: SocialInputError.
 */
export async function deleteSocialTweet(db: Db, id: string): Promise<{ id: string; authorUsername: string }> {
  if (!isValidTweetId(id)) throw new SocialInputError('id must be a numeric tweet id');
  return db.$transaction(async (tx) => {
    const [row] = await tx.$queryRaw<{ author_id: bigint }[]>`
      DELETE FROM social_tweets WHERE id = ${BigInt(id)} RETURNING author_id`;
    if (!row) throw new SocialInputError(`unknown tweet ${id}`);
    const [author] = await tx.$queryRaw<{ username: string }[]>`
      UPDATE social_users SET tweet_count = greatest(tweet_count - 1, 0) WHERE id = ${row.author_id}
      RETURNING username`;
    return { id, authorUsername: author?.username ?? '' };
  });
}
