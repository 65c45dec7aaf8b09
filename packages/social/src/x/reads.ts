/**
 * read-api's X reads: profile, timeline page, one tweet, search page. Cursors wrap X's pagination
 * token together with an offset into that page, because X has a minimum page size (5 or 10)
 * larger than the smallest `limit` this service accepts.
 */
import { isValidTweetId, isValidUsername } from '@sts/core';
import { decodeCursor, encodeCursor } from '../cursor';
import { InvalidCursorError, type Page, type PageRequest, type SocialTweet, type SocialUser } from '../types';
import type { XClient } from './client';
import type { XUserDirectory } from './users';
import {
  failed,
  isNotFound,
  mapXTweet,
  mapXUser,
  X_TWEET_PARAMS,
  X_USER_FIELDS,
  type XResponse,
  type XTweet,
  type XUser,
} from './wire';

export interface XReadContext {
  client: XClient;
  users: XUserDirectory;
}

const PAGE_TOKEN = /^[A-Za-z0-9_=-]{1,256}$/;
const OFFSET = /^(0|[1-9][0-9]?)$/;

interface XCursor {
  token: string | null;
  offset: number;
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

function rejectsToken(status: number, body: XResponse<unknown>): boolean {
  if (status !== 400) return false;
  return (body.errors ?? []).some(
    (e) =>
      (e.parameters && ('pagination_token' in e.parameters || 'next_token' in e.parameters)) ||
      /pagination_token|next_token/.test(e.message ?? ''),
  );
}

/**
 * A profile, read fresh from X (and refreshing the id cache). A name X did not find is
 * remembered (users.ts, up to 10 minutes): asking again costs X nothing.
 */
export async function getUser(ctx: XReadContext, username: string): Promise<SocialUser | null> {
  if (!isValidUsername(username)) return null;
  if (await ctx.users.knownMissing(username)) return null;
  const { status, body } = await ctx.client.request<XUser>({
    family: 'users',
    path: `/2/users/by/username/${encodeURIComponent(username)}`,
    params: { 'user.fields': X_USER_FIELDS },
  });
  if (status === 404 || (status === 200 && isNotFound(body))) {
    await ctx.users.rememberMissing(username);
    return null;
  }
  if (status !== 200 || !body.data) throw failed(status, body);
  const user = mapXUser(body.data);
  await ctx.users.remember(user);
  return user;
}

/** One page of a token-paged list, re-cut to `limit` items with the offset cursor. */
async function paged(
  ctx: XReadContext,
  call: {
    kind: 'xt' | 'xs';
    family: 'timeline' | 'search';
    path: string;
    minPage: number;
    extra: Record<string, string>;
  },
  page: PageRequest,
  fallbackAuthor?: SocialUser,
): Promise<Page<SocialTweet> | null> {
  const { token, offset } = decodeXCursor(page.cursor, call.kind);
  const want = Math.min(Math.max(offset + page.limit, call.minPage), 100);
  const tokenParam = call.kind === 'xs' ? 'next_token' : 'pagination_token';
  const { status, body } = await ctx.client.request<XTweet[]>({
    family: call.family,
    path: call.path,
    params: { ...call.extra, ...X_TWEET_PARAMS, max_results: want, [tokenParam]: token ?? undefined },
    priority: page.priority ?? 'high',
  });
  if (token && rejectsToken(status, body)) throw new InvalidCursorError('cursor is not valid');
  if (status === 200 && isNotFound(body)) return null;
  if (status !== 200) throw failed(status, body);
  const all = body.data ?? [];
  const users = body.includes?.users ?? [];
  const items = all.slice(offset, offset + page.limit).map((t) => mapXTweet(t, users, fallbackAuthor));
  const end = offset + items.length;
  let nextCursor: string | null = null;
  if (end < all.length) nextCursor = encodeCursor(call.kind, [token ?? '', String(end)]);
  else if (body.meta?.next_token) nextCursor = encodeCursor(call.kind, [body.meta.next_token, '0']);
  return { items, nextCursor };
}

/** A timeline page: the account id from the shared cache (one batched lookup per TTL), then one call. */
export async function getUserTimeline(
  ctx: XReadContext,
  username: string,
  page: PageRequest,
): Promise<Page<SocialTweet> | null> {
  decodeXCursor(page.cursor, 'xt');
  if (!isValidUsername(username)) return null;
  const resolved = (await ctx.users.resolve([username], page.priority)).get(username.toLowerCase());
  if (resolved?.status !== 'ok') return null;
  const user = resolved.user;
  const path = `/2/users/${encodeURIComponent(user.id)}/tweets`;
  const result = await paged(ctx, { kind: 'xt', family: 'timeline', path, minPage: 5, extra: {} }, page, user);
  if (result === null) await ctx.users.forget(username);
  return result;
}

export async function getTweet(ctx: XReadContext, id: string): Promise<SocialTweet | null> {
  if (!isValidTweetId(id)) return null;
  const { status, body } = await ctx.client.request<XTweet>({
    family: 'tweets',
    path: `/2/tweets/${encodeURIComponent(id)}`,
    params: { ...X_TWEET_PARAMS },
  });
  if (status === 404 || (status === 200 && isNotFound(body))) return null;
  if (status !== 200 || !body.data) throw failed(status, body);
  return mapXTweet(body.data, body.includes?.users ?? []);
}

export async function search(ctx: XReadContext, query: string, page: PageRequest): Promise<Page<SocialTweet>> {
  const call = {
    kind: 'xs',
    family: 'search',
    path: '/2/tweets/search/recent',
    minPage: 10,
    extra: { query },
  } as const;
  return (await paged(ctx, call, page)) ?? { items: [], nextCursor: null };
}
