/**
 * The fake X's REST routes (everything but the filtered stream): user lookups, timelines, one
 * tweet, the tweets lookup by ids (`GET /2/tweets?ids=`, 1–100 ids, found posts in `data`, one
 * partial error per other id) and recent search, each counted against its endpoint family's
 * window first (the tweets lookup and one tweet share the `tweets` family, as X's "Post lookup"). User lookups
 * serve `user.fields=most_recent_tweet_id` (absent for an account without posts) and its expansion
 * (`includes.tweets`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  invalidRequest,
  pageOf,
  resourceProblem,
  send,
  tweetObject,
  includes,
  userIncludes,
  userObject,
} from './format';
import type { FakeXLimits } from './limits';
import { compileQuery, FAKE_X_QUERY_MAX_LENGTH } from './query';
import type { FakeXState, FakeXTweet, FakeXUser } from './state';

export interface FakeXContext {
  state: FakeXState;
  limits: FakeXLimits;
}

/** A route: true when it answered the request. */
export type FakeXRoute = (
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  ctx: FakeXContext,
) => boolean | Promise<boolean>;

/** a request's whole body, as text */
export function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

const USERNAME = /^[A-Za-z0-9_]{1,15}$/;
const TWEET_ID = /^[0-9]{1,19}$/;

/** X's message for a query parameter value that does not match `pattern` */
const mismatch = (param: string, value: string, pattern: RegExp) =>
  `The \`${param}\` query parameter value [${value}] does not match ${pattern.source}`;

/**
 * The values of list parameter `param` (1–100, each matching `pattern`); null when the request
 * was refused with X's 400 for the first problem (empty, too many, a value that does not match).
 */
function listParam(res: ServerResponse, url: URL, param: string, pattern: RegExp): string[] | null {
  const raw = url.searchParams.get(param);
  if (raw === null || raw === '') {
    invalidRequest(res, param, '', `The \`${param}\` query parameter can not be empty`);
    return null;
  }
  const values = raw.split(',');
  if (values.length > 100) {
    const message = `The number of values in the \`${param}\` query parameter list [${values.length}] is not between 1 and 100`;
    invalidRequest(res, param, raw, message);
    return null;
  }
  const bad = values.find((v) => !pattern.test(v));
  if (bad !== undefined) {
    invalidRequest(res, param, bad, mismatch(param, bad, pattern));
    return null;
  }
  return values;
}

/** the account X serves as `name` (a renamed account is not found by its old name) */
function userNamed(state: FakeXState, name: string): FakeXUser | undefined {
  const u = state.user(name);
  return u && u.username.toLowerCase() === name.toLowerCase() ? u : undefined;
}

/** the problem X reports for account `u`, asked for by `param` = `value`; null when it is served */
function userProblem(u: FakeXUser | undefined, param: string, value: string): unknown {
  if (!u) return resourceProblem('not_found', 'user', param, value);
  if (u.suspended) return resourceProblem('suspended', 'user', param, value);
  return null;
}

/** the post X serves as `id`: none when it or its author is gone or suspended */
function servedTweet(state: FakeXState, id: string): FakeXTweet | undefined {
  const t = state.tweet(id);
  const author = t && state.users.get(t.author_id);
  return t && author && !author.suspended ? t : undefined;
}

/** the found accounts as user objects, with `includes.tweets` for `expansions=most_recent_tweet_id` */
function usersBody(found: FakeXUser[], errors: unknown[], params: URLSearchParams, state: FakeXState) {
  const body: Record<string, unknown> = {};
  if (found.length) body.data = found.map((u) => userObject(u, params, (id) => state.mostRecentTweetId(id)));
  const inc = userIncludes(found, params, (id) => {
    const latest = state.mostRecentTweetId(id);
    return latest === undefined ? undefined : state.tweet(latest);
  });
  if (inc) body.includes = inc;
  if (errors.length) body.errors = errors;
  return body;
}

/** a lookup's answer: the accounts found as user objects, a problem for each of the others */
function usersAnswer(
  res: ServerResponse,
  asked: readonly string[],
  find: (value: string) => FakeXUser | undefined,
  param: string,
  { url, state }: { url: URL; state: FakeXState },
): boolean {
  const found: FakeXUser[] = [];
  const errors: unknown[] = [];
  for (const value of asked) {
    const u = find(value);
    const problem = userProblem(u, param, value);
    if (problem) errors.push(problem);
    else found.push(u!);
  }
  return send(res, 200, usersBody(found, errors, url.searchParams, state));
}

/** the posts found as tweet objects (`data`, with their `includes`), and `errors` */
function tweetsBody(found: FakeXTweet[], errors: unknown[], params: URLSearchParams, state: FakeXState) {
  const body: Record<string, unknown> = {};
  if (found.length) body.data = found.map((t) => tweetObject(t, params));
  const inc = found.length ? includes(found, params, (x) => state.users.get(x)) : undefined;
  if (inc) body.includes = inc;
  if (errors.length) body.errors = errors;
  return body;
}

function lookupUsers(res: ServerResponse, url: URL, { state, limits }: FakeXContext): boolean {
  const names = listParam(res, url, 'usernames', USERNAME);
  if (!names || !limits.take('users', res)) return true;
  return usersAnswer(res, names, (name) => userNamed(state, name), 'usernames', { url, state });
}

function lookupUser(res: ServerResponse, url: URL, name: string, { state, limits }: FakeXContext): boolean {
  if (!USERNAME.test(name)) return invalidRequest(res, 'username', name, mismatch('username', name, USERNAME));
  if (!limits.take('users', res)) return true;
  const u = userNamed(state, name);
  const problem = userProblem(u, 'username', name);
  if (problem) return send(res, 200, { errors: [problem] });
  const body = usersBody([u!], [], url.searchParams, state);
  return send(res, 200, { ...body, data: (body.data as unknown[])[0] });
}

function lookupIds(res: ServerResponse, url: URL, { state, limits }: FakeXContext): boolean {
  const raw = url.searchParams.get('ids') ?? '';
  const ids = raw.split(',');
  if (raw === '' || ids.length > 100 || ids.some((i) => !TWEET_ID.test(i))) {
    return invalidRequest(res, 'ids', raw);
  }
  if (!limits.take('users', res)) return true;
  return usersAnswer(res, ids, (id) => state.users.get(id), 'ids', { url, state });
}

function timeline(res: ServerResponse, url: URL, id: string, { state, limits }: FakeXContext): boolean {
  if (!limits.take('timeline', res)) return true;
  const problem = userProblem(state.users.get(id), 'id', id);
  if (problem) return send(res, 200, { errors: [problem] });
  const list = state.newestFirst((t) => t.author_id === id);
  return pageOf(res, list, url.searchParams, 'pagination_token', 5, (x) => state.users.get(x));
}

function oneTweet(res: ServerResponse, url: URL, id: string, { state, limits }: FakeXContext): boolean {
  if (!TWEET_ID.test(id)) return invalidRequest(res, 'id', id);
  if (!limits.take('tweets', res)) return true;
  const t = servedTweet(state, id);
  if (!t) return send(res, 200, { errors: [resourceProblem('not_found', 'tweet', 'id', id)] });
  const body = tweetsBody([t], [], url.searchParams, state);
  return send(res, 200, { ...body, data: (body.data as unknown[])[0] });
}

function lookupTweets(res: ServerResponse, url: URL, { state, limits }: FakeXContext): boolean {
  const ids = listParam(res, url, 'ids', TWEET_ID);
  if (!ids || !limits.take('tweets', res)) return true;
  const found: FakeXTweet[] = [];
  const errors: unknown[] = [];
  for (const id of new Set(ids)) {
    const t = servedTweet(state, id);
    if (t) found.push(t);
    else errors.push(resourceProblem('not_found', 'tweet', 'ids', id));
  }
  return send(res, 200, tweetsBody(found, errors, url.searchParams, state));
}

function searchRecent(res: ServerResponse, url: URL, { state, limits }: FakeXContext): boolean {
  const query = url.searchParams.get('query');
  if (query === null || query.trim() === '')
    return invalidRequest(res, 'query', '', 'The `query` query parameter can not be empty');
  if (query.length > FAKE_X_QUERY_MAX_LENGTH) {
    return invalidRequest(
      res,
      'query',
      query,
      `There were errors processing your request: Query is too long (${query.length} characters, ${FAKE_X_QUERY_MAX_LENGTH} max)`,
    );
  }
  if (!limits.take('search', res)) return true;
  const match = compileQuery(query);
  const list = state.newestFirst((t) => match(t, state.users.get(t.author_id)));
  return pageOf(res, list, url.searchParams, 'next_token', 10, (x) => state.users.get(x));
}

/** GET routes of the REST API. */
export const restRoute: FakeXRoute = (req, res, url, ctx) => {
  if (req.method !== 'GET') return false;
  const p = url.pathname;
  let m: RegExpExecArray | null;
  if (p === '/2/users/by') return lookupUsers(res, url, ctx);
  if (p === '/2/users') return lookupIds(res, url, ctx);
  if ((m = /^\/2\/users\/by\/username\/([^/]+)$/.exec(p))) return lookupUser(res, url, decodeURIComponent(m[1]!), ctx);
  if ((m = /^\/2\/users\/([0-9]{1,19})\/tweets$/.exec(p))) return timeline(res, url, m[1]!, ctx);
  if (p === '/2/tweets/search/recent') return searchRecent(res, url, ctx);
  if (p === '/2/tweets') return lookupTweets(res, url, ctx);
  if ((m = /^\/2\/tweets\/([^/]+)$/.exec(p))) return oneTweet(res, url, decodeURIComponent(m[1]!), ctx);
  return false;
};
