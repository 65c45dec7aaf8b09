/**
 * X API v2 answer shapes: objects cut to the requested `user.fields` / `tweet.fields`, the
 * problem documents (`errors` arrays of partial errors, invalid-request 400s, 401) and token paging.
 */
import type { ServerResponse } from 'node:http';
import type { FakeXTweet, FakeXUser } from './state';

const PROBLEM_NOT_FOUND = 'https://api.twitter.com/2/problems/resource-not-found';
const PROBLEM_INVALID_REQUEST = 'https://api.twitter.com/2/problems/invalid-request';

export function send(res: ServerResponse, status: number, body: unknown): true {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify(body));
  return true;
}

function fields(params: URLSearchParams, name: string): Set<string> {
  return new Set((params.get(name) ?? '').split(',').filter(Boolean));
}

/**
 * A user object with the asked `user.fields`; `most_recent_tweet_id` is the account's newest post
 * (`mostRecent`), left out, as X does, when the account has none.
 */
export function userObject(
  u: FakeXUser,
  params: URLSearchParams,
  mostRecent?: (userId: string) => string | undefined,
): Record<string, unknown> {
  const want = fields(params, 'user.fields');
  const out: Record<string, unknown> = { id: u.id, name: u.name, username: u.username };
  for (const f of [
    'created_at',
    'description',
    'profile_image_url',
    'protected',
    'public_metrics',
    'verified',
  ] as const) {
    if (want.has(f)) out[f] = u[f];
  }
  const latest = want.has('most_recent_tweet_id') ? mostRecent?.(u.id) : undefined;
  if (latest !== undefined) out.most_recent_tweet_id = latest;
  return out;
}

/**
 * `includes.tweets` of a user lookup with `expansions=most_recent_tweet_id`: each found account's
 * newest post (the tweet object with the asked `tweet.fields`); undefined when not asked or none.
 */
export function userIncludes(
  users: readonly FakeXUser[],
  params: URLSearchParams,
  mostRecent: (userId: string) => FakeXTweet | undefined,
): Record<string, unknown> | undefined {
  if (!fields(params, 'expansions').has('most_recent_tweet_id')) return undefined;
  const tweets = users.map((u) => mostRecent(u.id)).filter((t): t is FakeXTweet => t !== undefined);
  return tweets.length ? { tweets: tweets.map((t) => tweetObject(t, params)) } : undefined;
}

export function tweetObject(t: FakeXTweet, params: URLSearchParams): Record<string, unknown> {
  const want = fields(params, 'tweet.fields');
  const out: Record<string, unknown> = { id: t.id, text: t.text, edit_history_tweet_ids: t.edit_history_tweet_ids };
  for (const f of ['author_id', 'created_at', 'lang', 'public_metrics', 'referenced_tweets'] as const) {
    if (want.has(f) && t[f] !== undefined) out[f] = t[f];
  }
  return out;
}

/** `includes.users` for expansions=author_id. */
export function includes(
  tweets: FakeXTweet[],
  params: URLSearchParams,
  user: (id: string) => FakeXUser | undefined,
): Record<string, unknown> | undefined {
  if (!fields(params, 'expansions').has('author_id')) return undefined;
  const ids = [...new Set(tweets.map((t) => t.author_id))];
  const users = ids.map(user).filter((u): u is FakeXUser => u !== undefined);
  return { users: users.map((u) => userObject(u, params)) };
}

/** A partial error for one missing (or suspended) resource, as X lists them in `errors`. */
export function resourceProblem(
  kind: 'not_found' | 'suspended',
  resource: 'user' | 'tweet',
  parameter: string,
  value: string,
): Record<string, unknown> {
  return kind === 'suspended'
    ? {
        value,
        detail: `User has been suspended: [${value}].`,
        title: 'Forbidden',
        resource_type: resource,
        parameter,
        resource_id: value,
        type: PROBLEM_NOT_FOUND,
      }
    : {
        value,
        detail: `Could not find ${resource} with ${parameter}: [${value}].`,
        title: 'Not Found Error',
        resource_type: resource,
        parameter,
        resource_id: value,
        type: PROBLEM_NOT_FOUND,
      };
}

export function invalidRequest(res: ServerResponse, parameter: string, value: string, message?: string): true {
  return send(res, 400, {
    errors: [
      {
        parameters: { [parameter]: [value] },
        message: message ?? `The \`${parameter}\` query parameter value [${value}] is not valid`,
      },
    ],
    title: 'Invalid Request',
    detail: 'One or more parameters to your request was invalid.',
    type: PROBLEM_INVALID_REQUEST,
  });
}

export function unauthorized(res: ServerResponse): true {
  return send(res, 401, { title: 'Unauthorized', type: 'about:blank', status: 401, detail: 'Unauthorized' });
}

function encodeToken(oldestId: string): string {
  return Buffer.from(`p1:${oldestId}`).toString('base64url');
}

function decodeToken(token: string): string | null {
  const m = /^p1:([0-9]{1,19})$/.exec(Buffer.from(token, 'base64url').toString('utf8'));
  return m ? m[1]! : null;
}

/**
 * One page of a newest-first list, X style: `max_results` within [min, 100] (default 10),
 * `since_id` / `until_id`, and an opaque token (here: the page's oldest id) in `meta.next_token`.
 */
export function pageOf(
  res: ServerResponse,
  list: FakeXTweet[],
  params: URLSearchParams,
  tokenParam: 'pagination_token' | 'next_token',
  min: number,
  user: (id: string) => FakeXUser | undefined,
): true {
  const maxRaw = params.get('max_results') ?? '10';
  const max = Number(maxRaw);
  if (!/^[0-9]+$/.test(maxRaw) || max < min || max > 100) return invalidRequest(res, 'max_results', maxRaw);
  for (const p of ['since_id', 'until_id']) {
    const v = params.get(p);
    if (v !== null && !/^[0-9]{1,19}$/.test(v)) return invalidRequest(res, p, v);
  }
  const token = params.get(tokenParam);
  let before: string | null = params.get('until_id');
  if (token !== null) {
    before = decodeToken(token);
    if (before === null) return invalidRequest(res, tokenParam, token);
  }
  const since = params.get('since_id');
  const after = list.filter(
    (t) => (since === null || BigInt(t.id) > BigInt(since)) && (before === null || BigInt(t.id) < BigInt(before)),
  );
  const data = after.slice(0, max);
  const meta: Record<string, unknown> = { result_count: data.length };
  if (data.length) {
    meta.newest_id = data[0]!.id;
    meta.oldest_id = data[data.length - 1]!.id;
  }
  if (after.length > max) meta.next_token = encodeToken(data[data.length - 1]!.id);
  if (!data.length) return send(res, 200, { meta });
  const body: Record<string, unknown> = { data: data.map((t) => tweetObject(t, params)) };
  const inc = includes(data, params, user);
  if (inc) body.includes = inc;
  body.meta = meta;
  return send(res, 200, body);
}
