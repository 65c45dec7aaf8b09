/**
 * The `x` provider: the X API v2 over HTTPS with an app-only bearer token (axios).
 *
 *   GET /2/users/by/username/:username   user lookup
 *   GET /2/users/:id/tweets              timeline (newest first, max_results 5..100, pagination_token, since_id)
 *   GET /2/tweets/:id                    one tweet
 *   GET /2/tweets/search/recent          search of the last 7 days (max_results 10..100, next_token)
 *
 * Every call asks for expansions=author_id plus the user and tweet fields the records need, and
 * maps the answer to the provider-neutral records. "Not found" (X answers 200 with an `errors`
 * array and no `data`) is null. 429, 5xx, other failures and time-outs are SocialSourceError.
 *
 * Cursors wrap X's pagination token together with an offset into that page, because X has a
 * minimum page size (5 or 10) larger than the smallest `limit` this service accepts.
 */
import axios, { type AxiosInstance } from 'axios';
import { compareIds, isValidTweetId, isValidUsername, snowflakeBefore, snowflakeTime } from '@sts/core';
import { decodeCursor, encodeCursor } from './cursor';
import {
  InvalidCursorError,
  SocialSourceError,
  type Page,
  type PageRequest,
  type PollPage,
  type PollRequest,
  type ReferencedTweet,
  type SocialSource,
  type SocialTweet,
  type SocialUser,
} from './types';

export interface XSourceOptions {
  /** default https://api.x.com */
  baseUrl?: string;
  bearerToken: string;
  /** per request; default 10 000 ms */
  timeoutMs?: number;
  /** at most this many pages are read by pollTweets to find the oldest new tweets; default 8 */
  maxSincePages?: number;
  /** pollTweets' first call of a poll re-reads this window behind the position; default 30 000 ms */
  overlapMs?: number;
}

export const X_USER_FIELDS = 'created_at,description,profile_image_url,public_metrics,verified';
export const X_TWEET_FIELDS = 'author_id,created_at,lang,public_metrics,referenced_tweets';

interface XUser {
  id: string;
  username: string;
  name: string;
  description?: string;
  verified?: boolean;
  profile_image_url?: string;
  created_at?: string;
  public_metrics?: { followers_count?: number; following_count?: number; tweet_count?: number };
}

interface XTweet {
  id: string;
  text: string;
  author_id?: string;
  created_at?: string;
  lang?: string;
  public_metrics?: { like_count?: number; retweet_count?: number; reply_count?: number; quote_count?: number };
  referenced_tweets?: { type?: string; id?: string }[];
}

interface XProblem {
  title?: string;
  detail?: string;
  type?: string;
  message?: string;
  parameter?: string;
  parameters?: Record<string, unknown>;
}

interface XResponse<T> {
  data?: T;
  includes?: { users?: XUser[] };
  meta?: { result_count?: number; next_token?: string; newest_id?: string; oldest_id?: string };
  errors?: XProblem[];
  title?: string;
  detail?: string;
  type?: string;
}

const PAGE_TOKEN = /^[A-Za-z0-9_=-]{1,256}$/;
const OFFSET = /^(0|[1-9][0-9]?)$/;

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

function unknownAuthor(id: string): SocialUser {
  return {
    id,
    username: '',
    name: '',
    description: null,
    followersCount: 0,
    followingCount: 0,
    tweetCount: 0,
    verified: false,
    profileImageUrl: null,
    createdAt: null,
  };
}

export function mapXTweet(t: XTweet, users: readonly XUser[], fallbackAuthor?: SocialUser): SocialTweet {
  const authorId = t.author_id ?? fallbackAuthor?.id ?? '';
  const u = users.find((x) => x.id === authorId);
  const author = u
    ? mapXUser(u)
    : fallbackAuthor && fallbackAuthor.id === authorId
      ? fallbackAuthor
      : unknownAuthor(authorId);
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

function isNotFound(body: XResponse<unknown>): boolean {
  return (
    body.data === undefined &&
    Array.isArray(body.errors) &&
    body.errors.length > 0 &&
    body.errors.every(
      (e) =>
        e.type === 'https://api.twitter.com/2/problems/resource-not-found' ||
        e.title === 'Not Found Error' ||
        e.title === 'Forbidden' ||
        e.type === 'https://api.twitter.com/2/problems/not-authorized-for-resource',
    )
  );
}

interface XCursor {
  token: string | null;
  offset: number;
}

/** An X poll position "x.<tweet id>"; null for none or another provider's position. */
function decodeXPosition(position: string | null): string | null {
  if (position === null || !position.startsWith('x.')) return null;
  const id = position.slice(2);
  if (id !== '0' && !isValidTweetId(id)) throw new InvalidCursorError('poll position is not valid');
  return id;
}

function decodeXCursor(cursor: string | undefined, kind: string): XCursor {
  if (cursor === undefined) return { token: null, offset: 0 };
  const [token, offset] = decodeCursor(cursor, kind, 2) as [string, string];
  if ((token !== '' && !PAGE_TOKEN.test(token)) || !OFFSET.test(offset)) {
    throw new InvalidCursorError('cursor is not valid');
  }
  if (token === '' && offset === '0') throw new InvalidCursorError('cursor is not valid');
  return { token: token || null, offset: Number(offset) };
}

// eslint-disable-next-line max-lines-per-function -- a factory of small closures (the X API call with its error mapping, paging, one per SocialSource method, each under 50 lines) sharing the token and rate-limit state
export function createXSource(options: XSourceOptions): SocialSource {
  if (!options.bearerToken) throw new Error('the x social source needs a bearer token (X_BEARER_TOKEN)');
  const http: AxiosInstance = axios.create({
    baseURL: (options.baseUrl ?? 'https://api.x.com').replace(/\/+$/, ''),
    timeout: options.timeoutMs ?? 10_000,
    headers: { Authorization: `Bearer ${options.bearerToken}`, 'User-Agent': 'sts-social/1.0' },
    // statuses are mapped below; never throw on them
    validateStatus: () => true,
    maxRedirects: 0,
    responseType: 'json',
  });
  const maxSincePages = options.maxSincePages ?? 8;
  const overlapMs = options.overlapMs ?? 30_000;

  async function call<T>(
    path: string,
    params: Record<string, string | number | undefined>,
  ): Promise<{ status: number; body: XResponse<T> }> {
    const clean: Record<string, string | number> = {};
    for (const [k, v] of Object.entries(params)) if (v !== undefined) clean[k] = v;
    let res;
    try {
      res = await http.get<XResponse<T>>(path, { params: clean });
    } catch (err) {
      const e = err as { code?: string; message?: string };
      const timeout = e.code === 'ECONNABORTED' || e.code === 'ETIMEDOUT' || /timeout/i.test(e.message ?? '');
      throw new SocialSourceError(
        timeout ? 'the X API did not answer in time' : `the X API could not be reached (${e.code ?? 'network error'})`,
        timeout,
      );
    }
    const raw: unknown = res.data;
    const body: XResponse<T> = raw && typeof raw === 'object' ? raw : {};
    if (res.status === 429) {
      const reset = res.headers['x-rate-limit-reset'] as string | undefined;
      throw new SocialSourceError(`the X API rate limit is exhausted${reset ? ` until ${reset}` : ''}`);
    }
    if (res.status === 401 || res.status === 403) {
      throw new SocialSourceError(`the X API refused the credentials (HTTP ${res.status})`);
    }
    if (res.status >= 500) throw new SocialSourceError(`the X API failed (HTTP ${res.status})`);
    return { status: res.status, body };
  }

  function failed(status: number, body: XResponse<unknown>): SocialSourceError {
    const detail = body.detail ?? body.errors?.[0]?.detail ?? body.errors?.[0]?.message ?? body.title;
    return new SocialSourceError(`the X API answered HTTP ${status}${detail ? `: ${detail}` : ''}`);
  }

  function rejectsToken(status: number, body: XResponse<unknown>): boolean {
    if (status !== 400) return false;
    return (body.errors ?? []).some(
      (e) =>
        (e.parameters && ('pagination_token' in e.parameters || 'next_token' in e.parameters)) ||
        /pagination_token|next_token/.test(e.message ?? ''),
    );
  }

  async function getUser(username: string): Promise<SocialUser | null> {
    if (!isValidUsername(username)) return null;
    const { status, body } = await call<XUser>(`/2/users/by/username/${encodeURIComponent(username)}`, {
      'user.fields': X_USER_FIELDS,
    });
    if (status === 404 || (status === 200 && isNotFound(body))) return null;
    if (status !== 200 || !body.data) throw failed(status, body);
    return mapXUser(body.data);
  }

  /** One page of a token-paged list, re-cut to `limit` items with the offset cursor. */
  async function paged(
    kind: string,
    path: string,
    page: PageRequest,
    minPage: number,
    extra: Record<string, string>,
    fallbackAuthor?: SocialUser,
  ): Promise<Page<SocialTweet>> {
    const { token, offset } = decodeXCursor(page.cursor, kind);
    const want = Math.min(Math.max(offset + page.limit, minPage), 100);
    const tokenParam = kind === 'xs' ? 'next_token' : 'pagination_token';
    const { status, body } = await call<XTweet[]>(path, {
      ...extra,
      max_results: want,
      [tokenParam]: token ?? undefined,
      expansions: 'author_id',
      'tweet.fields': X_TWEET_FIELDS,
      'user.fields': X_USER_FIELDS,
    });
    if (token && rejectsToken(status, body)) throw new InvalidCursorError('cursor is not valid');
    if (status !== 200) throw failed(status, body);
    const all = body.data ?? [];
    const users = body.includes?.users ?? [];
    const items = all.slice(offset, offset + page.limit).map((t) => mapXTweet(t, users, fallbackAuthor));
    const end = offset + items.length;
    let nextCursor: string | null = null;
    if (end < all.length) nextCursor = encodeCursor(kind, [token ?? '', String(end)]);
    else if (body.meta?.next_token) nextCursor = encodeCursor(kind, [body.meta.next_token, '0']);
    return { items, nextCursor };
  }

  return {
    name: 'x',

    getUser,

    async getUserTimeline(username: string, page: PageRequest): Promise<Page<SocialTweet> | null> {
      decodeXCursor(page.cursor, 'xt');
      const user = await getUser(username);
      if (!user) return null;
      return paged('xt', `/2/users/${encodeURIComponent(user.id)}/tweets`, page, 5, {}, user);
    },

    async getTweet(id: string): Promise<SocialTweet | null> {
      if (!isValidTweetId(id)) return null;
      const { status, body } = await call<XTweet>(`/2/tweets/${encodeURIComponent(id)}`, {
        expansions: 'author_id',
        'tweet.fields': X_TWEET_FIELDS,
        'user.fields': X_USER_FIELDS,
      });
      if (status === 404 || (status === 200 && isNotFound(body))) return null;
      if (status !== 200 || !body.data) throw failed(status, body);
      return mapXTweet(body.data, body.includes?.users ?? []);
    },

    search(query: string, page: PageRequest): Promise<Page<SocialTweet>> {
      return paged('xs', '/2/tweets/search/recent', page, 10, { query });
    },

    async pollTweets(username: string, request: PollRequest): Promise<PollPage | null> {
      const limit = request.limit;
      if (!Number.isInteger(limit) || limit < 1) throw new RangeError('limit must be a positive integer');
      const position = decodeXPosition(request.position);
      const user = await getUser(username);
      if (!user) return null;
      // since_id: the position, or on a poll's first call the overlap window behind it (X makes
      // tweets visible late; those already recorded are dropped by the hit key); never before
      // notBefore. Ids are snowflakes, so a time is an id.
      const floor = snowflakeBefore(request.notBefore);
      let since = floor;
      if (position !== null) {
        const behind = request.firstPage
          ? snowflakeBefore(new Date(snowflakeTime(position).getTime() - overlapMs))
          : position;
        if (compareIds(behind, since) > 0) since = behind;
      }
      // X pages newest first; read pages back to since_id so the oldest new tweets come first.
      const path = `/2/users/${encodeURIComponent(user.id)}/tweets`;
      const collected: SocialTweet[] = [];
      let token: string | undefined;
      for (let pageNo = 0; pageNo < maxSincePages; pageNo++) {
        const { status, body } = await call<XTweet[]>(path, {
          expansions: 'author_id',
          'tweet.fields': X_TWEET_FIELDS,
          'user.fields': X_USER_FIELDS,
          since_id: since === '0' ? undefined : since,
          max_results: 100,
          pagination_token: token,
        });
        if (status !== 200) throw failed(status, body);
        const users = body.includes?.users ?? [];
        for (const t of body.data ?? []) collected.push(mapXTweet(t, users, user));
        token = body.meta?.next_token;
        if (!token) break;
      }
      collected.sort((a, b) => compareIds(a.id, b.id));
      const tweets = collected.slice(0, limit);
      let next = position;
      for (const t of tweets) if (next === null || compareIds(t.id, next) > 0) next = t.id;
      // no tweet and no position: start at the floor next time
      return { tweets, position: `x.${next ?? floor}`, more: collected.length > limit || token !== undefined };
    },
  };
}
