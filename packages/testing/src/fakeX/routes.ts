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
import type { FakeXState, FakeXUser } from './state';

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

const USERNAME = /^[A-Za-z0-9_]{1,15}$/;

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

function lookupUsers(res: ServerResponse, url: URL, { state, limits }: FakeXContext): boolean {
  const raw = url.searchParams.get('usernames');
  if (raw === null || raw === '')
    return invalidRequest(res, 'usernames', '', 'The `usernames` query parameter can not be empty');
  const names = raw.split(',');
  if (names.length > 100) {
    return invalidRequest(
      res,
      'usernames',
      raw,
      `The number of values in the \`usernames\` query parameter list [${names.length}] is not between 1 and 100`,
    );
  }
  const bad = names.find((n) => !USERNAME.test(n));
  if (bad !== undefined) {
    return invalidRequest(
      res,
      'usernames',
      bad,
      `The \`usernames\` query parameter value [${bad}] does not match ^[A-Za-z0-9_]{1,15}$`,
    );
  }
  if (!limits.take('users', res)) return true;
  const found: FakeXUser[] = [];
  const errors: unknown[] = [];
  for (const name of names) {
    const u = state.user(name);
    if (!u || u.username.toLowerCase() !== name.toLowerCase())
      errors.push(resourceProblem('not_found', 'user', 'usernames', name));
    else if (u.suspended) errors.push(resourceProblem('suspended', 'user', 'usernames', name));
    else found.push(u);
  }
  return send(res, 200, usersBody(found, errors, url.searchParams, state));
}

function lookupUser(res: ServerResponse, url: URL, name: string, { state, limits }: FakeXContext): boolean {
  if (!USERNAME.test(name)) {
    return invalidRequest(
      res,
      'username',
      name,
      `The \`username\` query parameter value [${name}] does not match ^[A-Za-z0-9_]{1,15}$`,
    );
  }
  if (!limits.take('users', res)) return true;
  const u = state.user(name);
  if (!u || u.username.toLowerCase() !== name.toLowerCase()) {
    return send(res, 200, { errors: [resourceProblem('not_found', 'user', 'username', name)] });
  }
  if (u.suspended) return send(res, 200, { errors: [resourceProblem('suspended', 'user', 'username', name)] });
  const body = usersBody([u], [], url.searchParams, state);
  return send(res, 200, { ...body, data: (body.data as unknown[])[0] });
}

function lookupIds(res: ServerResponse, url: URL, { state, limits }: FakeXContext): boolean {
  const raw = url.searchParams.get('ids') ?? '';
  const ids = raw.split(',');
  if (raw === '' || ids.length > 100 || ids.some((i) => !/^[0-9]{1,19}$/.test(i))) {
    return invalidRequest(res, 'ids', raw);
  }
  if (!limits.take('users', res)) return true;
  const found: FakeXUser[] = [];
  const errors: unknown[] = [];
  for (const id of ids) {
    const u = state.users.get(id);
    if (!u) errors.push(resourceProblem('not_found', 'user', 'ids', id));
    else if (u.suspended) errors.push(resourceProblem('suspended', 'user', 'ids', id));
    else found.push(u);
  }
  return send(res, 200, usersBody(found, errors, url.searchParams, state));
}

function timeline(res: ServerResponse, url: URL, id: string, { state, limits }: FakeXContext): boolean {
  if (!limits.take('timeline', res)) return true;
  const u = state.users.get(id);
  if (!u) return send(res, 200, { errors: [resourceProblem('not_found', 'user', 'id', id)] });
  if (u.suspended) return send(res, 200, { errors: [resourceProblem('suspended', 'user', 'id', id)] });
  const list = state.newestFirst((t) => t.author_id === id);
  return pageOf(res, list, url.searchParams, 'pagination_token', 5, (x) => state.users.get(x));
}

function oneTweet(res: ServerResponse, url: URL, id: string, { state, limits }: FakeXContext): boolean {
  if (!/^[0-9]{1,19}$/.test(id)) return invalidRequest(res, 'id', id);
  if (!limits.take('tweets', res)) return true;
  const t = state.tweet(id);
  const author = t && state.users.get(t.author_id);
  if (!t || !author || author.suspended)
    return send(res, 200, { errors: [resourceProblem('not_found', 'tweet', 'id', id)] });
  const body: Record<string, unknown> = { data: tweetObject(t, url.searchParams) };
  const inc = includes([t], url.searchParams, (x) => state.users.get(x));
  if (inc) body.includes = inc;
  return send(res, 200, body);
}

function lookupTweets(res: ServerResponse, url: URL, { state, limits }: FakeXContext): boolean {
  const raw = url.searchParams.get('ids');
  if (raw === null || raw === '') return invalidRequest(res, 'ids', '', 'The `ids` query parameter can not be empty');
  const ids = raw.split(',');
  if (ids.length > 100) {
    return invalidRequest(
      res,
      'ids',
      raw,
      `The number of values in the \`ids\` query parameter list [${ids.length}] is not between 1 and 100`,
    );
  }
  const bad = ids.find((i) => !/^[0-9]{1,19}$/.test(i));
  if (bad !== undefined)
    return invalidRequest(res, 'ids', bad, `The \`ids\` query parameter value [${bad}] does not match ^[0-9]{1,19}$`);
  if (!limits.take('tweets', res)) return true;
  const found = [];
  const errors: unknown[] = [];
  for (const id of new Set(ids)) {
    const t = state.tweet(id);
    const author = t && state.users.get(t.author_id);
    if (!t || !author || author.suspended) errors.push(resourceProblem('not_found', 'tweet', 'ids', id));
    else found.push(t);
  }
  const body: Record<string, unknown> = {};
  if (found.length) body.data = found.map((t) => tweetObject(t, url.searchParams));
  const inc = found.length ? includes(found, url.searchParams, (x) => state.users.get(x)) : undefined;
  if (inc) body.includes = inc;
  if (errors.length) body.errors = errors;
  return send(res, 200, body);
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
