/**
 * The X provider against a local fake of the X API v2 that answers in X's response format:
 * `data`, `includes.users` (expansions=author_id), `meta` {result_count, newest_id, oldest_id,
 * next_token}, and "not found" as HTTP 200 with an `errors` array of resource-not-found problems.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { snowflakeId } from '@sts/core';
import { createXSource } from './x';
import { InvalidCursorError, SocialSourceError, type SocialTweet } from './types';

interface FakeUser {
  id: string;
  username: string;
  name: string;
  description: string;
  verified: boolean;
  profile_image_url: string;
  created_at: string;
  public_metrics: { followers_count: number; following_count: number; tweet_count: number; listed_count: number };
}

interface FakeTweet {
  id: string;
  text: string;
  author_id: string;
  created_at: string;
  lang: string;
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

const TOKEN = 'test-bearer-token';
const users: FakeUser[] = [
  {
    id: '2244994945',
    username: 'XDevelopers',
    name: 'X Developers',
    description: 'The voice of the X developer community',
    verified: true,
    profile_image_url: 'https://pbs.twimg.com/profile_images/1/x_normal.jpg',
    created_at: '2013-12-14T04:35:55.000Z',
    public_metrics: { followers_count: 583423, following_count: 2048, tweet_count: 14052, listed_count: 1672 },
  },
];
// 23 tweets, ids increasing with time; X lists them newest first
const tweets: FakeTweet[] = Array.from({ length: 23 }, (_, i) => ({
  id: String(1800000000000000000n + BigInt(i) * 1000n),
  text: `post ${i}${i % 2 ? ' about the api' : ''}`,
  author_id: '2244994945',
  created_at: new Date(Date.UTC(2024, 0, 15, 12, i)).toISOString(),
  lang: 'en',
  edit_history_tweet_ids: [String(1800000000000000000n + BigInt(i) * 1000n)],
  public_metrics: {
    retweet_count: i,
    reply_count: 1,
    like_count: 2 * i,
    quote_count: 0,
    bookmark_count: 3,
    impression_count: 1500,
  },
}));
// X's referenced_tweets: post 5 replies to post 1 and quotes post 2, post 6 reposts post 3
tweets[5]!.referenced_tweets = [
  { type: 'replied_to', id: tweets[1]!.id },
  { type: 'quoted', id: tweets[2]!.id },
];
tweets[6]!.referenced_tweets = [{ type: 'retweeted', id: tweets[3]!.id }];
const newestFirst = [...tweets].reverse();

// a second user whose timeline a test changes (newest first), with snowflake ids of real times
const LATE_USER: FakeUser = { ...users[0]!, id: '99887766', username: 'LateWriter', name: 'Late Writer' };
users.push(LATE_USER);
const lateTimeline: FakeTweet[] = [];
function lateTweet(at: number, text: string): FakeTweet {
  const id = snowflakeId(new Date(at));
  return {
    ...tweets[0]!,
    id,
    text,
    author_id: LATE_USER.id,
    created_at: new Date(at).toISOString(),
    edit_history_tweet_ids: [id],
  };
}

function notFound(resource: 'user' | 'tweet', parameter: string, value: string) {
  return {
    errors: [
      {
        value,
        detail: `Could not find ${resource} with ${parameter}: [${value}].`,
        title: 'Not Found Error',
        resource_type: resource,
        parameter,
        resource_id: value,
        type: 'https://api.twitter.com/2/problems/resource-not-found',
      },
    ],
  };
}

function invalidRequest(parameter: string, value: string) {
  return {
    errors: [
      {
        parameters: { [parameter]: [value] },
        message: `The \`${parameter}\` query parameter value [${value}] is not valid`,
      },
    ],
    title: 'Invalid Request',
    detail: 'One or more parameters to your request was invalid.',
    type: 'https://api.twitter.com/2/problems/invalid-request',
  };
}

/** X-style token paging over a newest-first list. */
function pageList(list: FakeTweet[], params: URLSearchParams, tokenParam: string, min: number) {
  const max = Number(params.get('max_results') ?? '10');
  if (!Number.isInteger(max) || max < min || max > 100)
    return { status: 400, body: invalidRequest('max_results', String(max)) };
  const token = params.get(tokenParam);
  let start = 0;
  if (token) {
    const m = /^tok([0-9]+)$/.exec(token);
    if (!m) return { status: 400, body: invalidRequest(tokenParam, token) };
    start = Number(m[1]);
  }
  const since = params.get('since_id');
  const filtered = since ? list.filter((t) => BigInt(t.id) > BigInt(since)) : list;
  const data = filtered.slice(start, start + max);
  const meta: Record<string, unknown> = { result_count: data.length };
  if (data.length) {
    meta.newest_id = data[0]!.id;
    meta.oldest_id = data[data.length - 1]!.id;
  }
  if (start + max < filtered.length) meta.next_token = `tok${start + max}`;
  if (!data.length) return { status: 200, body: { meta } };
  return { status: 200, body: { data, includes: { users }, meta } };
}

describe('X API v2 source', () => {
  let server: http.Server;
  let baseUrl: string;
  const requests: URL[] = [];
  let mode: 'ok' | '429' | '503' | 'slow' | 'html' = 'ok';

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://fake');
      requests.push(url);
      const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
        res
          .writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers })
          .end(JSON.stringify(body));
      };
      if (req.headers.authorization !== `Bearer ${TOKEN}`) {
        return send(401, { title: 'Unauthorized', type: 'about:blank', status: 401, detail: 'Unauthorized' });
      }
      if (mode === '429') {
        return send(
          429,
          { title: 'Too Many Requests', detail: 'Too Many Requests', type: 'about:blank', status: 429 },
          {
            'x-rate-limit-limit': '900',
            'x-rate-limit-remaining': '0',
            'x-rate-limit-reset': '1705420800',
          },
        );
      }
      if (mode === '503') return send(503, { title: 'Service Unavailable', status: 503 });
      if (mode === 'html') {
        res.writeHead(502, { 'content-type': 'text/html' }).end('<html>bad gateway</html>');
        return undefined;
      }
      if (mode === 'slow') {
        setTimeout(() => send(200, { data: users[0] }), 1000);
        return undefined;
      }
      const p = url.pathname;
      let m: RegExpExecArray | null;
      if ((m = /^\/2\/users\/by\/username\/([^/]+)$/.exec(p))) {
        const u = users.find((x) => x.username.toLowerCase() === decodeURIComponent(m![1]!).toLowerCase());
        return send(200, u ? { data: u } : notFound('user', 'username', decodeURIComponent(m[1]!)));
      }
      if ((m = /^\/2\/users\/([0-9]+)\/tweets$/.exec(p))) {
        const list = m[1] === LATE_USER.id ? lateTimeline : users.some((u) => u.id === m![1]) ? newestFirst : [];
        const r = pageList(list, url.searchParams, 'pagination_token', 5);
        return send(r.status, r.body);
      }
      if (p === '/2/tweets/search/recent') {
        const q = url.searchParams.get('query') ?? '';
        const words = q.toLowerCase().split(/\s+/).filter(Boolean);
        const list = newestFirst.filter((t) => words.every((w) => t.text.toLowerCase().includes(w)));
        const r = pageList(list, url.searchParams, 'next_token', 10);
        return send(r.status, r.body);
      }
      if ((m = /^\/2\/tweets\/([0-9]+)$/.exec(p))) {
        const t = tweets.find((x) => x.id === m![1]);
        return send(200, t ? { data: t, includes: { users } } : notFound('tweet', 'id', m[1]!));
      }
      return send(404, { title: 'Not Found', status: 404 });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  beforeEach(() => {
    mode = 'ok';
    requests.length = 0;
  });

  const source = () => createXSource({ baseUrl, bearerToken: TOKEN, timeoutMs: 300 });

  it('looks up a user with the user fields and maps public_metrics', async () => {
    const u = await source().getUser('xdevelopers');
    expect(u).toEqual({
      id: '2244994945',
      username: 'XDevelopers',
      name: 'X Developers',
      description: 'The voice of the X developer community',
      followersCount: 583423,
      followingCount: 2048,
      tweetCount: 14052,
      verified: true,
      profileImageUrl: 'https://pbs.twimg.com/profile_images/1/x_normal.jpg',
      createdAt: new Date('2013-12-14T04:35:55.000Z'),
    });
    expect(requests[0]!.pathname).toBe('/2/users/by/username/xdevelopers');
    expect(requests[0]!.searchParams.get('user.fields')!.split(',')).toEqual(
      expect.arrayContaining(['created_at', 'description', 'profile_image_url', 'public_metrics', 'verified']),
    );
    expect(await source().getUser('nobody_here')).toBeNull();
    // an invalid username never reaches X
    requests.length = 0;
    expect(await source().getUser('no such user')).toBeNull();
    expect(requests).toHaveLength(0);
  });

  it('gets one tweet with its expanded author, or null', async () => {
    const t = await source().getTweet(tweets[4]!.id);
    expect(t).toEqual({
      id: tweets[4]!.id,
      text: 'post 4',
      authorId: '2244994945',
      author: expect.objectContaining({ username: 'XDevelopers', followersCount: 583423 }),
      createdAt: new Date(tweets[4]!.created_at),
      lang: 'en',
      metrics: { likeCount: 8, retweetCount: 4, replyCount: 1, quoteCount: 0 },
      referencedTweets: [],
    });
    const q = requests[0]!.searchParams;
    expect(q.get('expansions')).toBe('author_id');
    expect(q.get('tweet.fields')!.split(',')).toEqual(
      expect.arrayContaining(['author_id', 'created_at', 'lang', 'public_metrics', 'referenced_tweets']),
    );
    // replies, quotes and reposts carry X's referenced_tweets
    expect((await source().getTweet(tweets[5]!.id))?.referencedTweets).toEqual([
      { type: 'replied_to', id: tweets[1]!.id },
      { type: 'quoted', id: tweets[2]!.id },
    ]);
    expect((await source().getTweet(tweets[6]!.id))?.referencedTweets).toEqual([
      { type: 'retweeted', id: tweets[3]!.id },
    ]);
    expect(await source().getTweet('1')).toBeNull();
  });

  async function walk(
    next: (cursor: string | undefined) => Promise<{ items: SocialTweet[]; nextCursor: string | null }>,
  ) {
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let i = 0; i < 50; i++) {
      const page = await next(cursor);
      seen.push(...page.items.map((t) => t.id));
      cursor = page.nextCursor ?? undefined;
      if (!cursor) break;
    }
    return seen;
  }

  it('pages a timeline with limits below and above X minimum, without gaps or repeats', async () => {
    for (const limit of [1, 3, 7, 100]) {
      const seen = await walk(async (cursor) => (await source().getUserTimeline('XDevelopers', { limit, cursor }))!);
      expect(seen).toEqual(newestFirst.map((t) => t.id));
    }
    const maxes = requests
      .filter((r) => r.pathname.endsWith('/tweets'))
      .map((r) => Number(r.searchParams.get('max_results')));
    expect(Math.min(...maxes)).toBeGreaterThanOrEqual(5);
    expect(await source().getUserTimeline('ghost', { limit: 5 })).toBeNull();
  });

  it('pages search results the same way, using next_token', async () => {
    const expected = newestFirst.filter((t) => t.text.includes('about the api')).map((t) => t.id);
    for (const limit of [2, 10, 25]) {
      expect(await walk((cursor) => source().search('the API', { limit, cursor }))).toEqual(expected);
    }
    const r = requests.find((x) => x.pathname === '/2/tweets/search/recent')!;
    expect(r.searchParams.get('query')).toBe('the API');
    expect(Number(r.searchParams.get('max_results'))).toBeGreaterThanOrEqual(10);
    expect((await source().search('zzz', { limit: 5 })).items).toEqual([]);
  });

  it('refuses cursors it did not issue, and tokens X refuses', async () => {
    await expect(source().search('api', { limit: 5, cursor: 'nonsense!' })).rejects.toBeInstanceOf(InvalidCursorError);
    await expect(source().getUserTimeline('XDevelopers', { limit: 5, cursor: 'AAAA' })).rejects.toBeInstanceOf(
      InvalidCursorError,
    );
    const forged = Buffer.from('xs.bogus.0').toString('base64url');
    await expect(source().search('api', { limit: 5, cursor: forged })).rejects.toBeInstanceOf(InvalidCursorError);
  });

  it('pollTweets reads back to since_id oldest first and resumes at its position', async () => {
    const notBefore = new Date(0);
    const all = await source().pollTweets('XDevelopers', {
      position: `x.${tweets[2]!.id}`,
      notBefore,
      limit: 100,
      firstPage: false,
    });
    expect(all!.tweets.map((t) => t.id)).toEqual(tweets.slice(3).map((t) => t.id));
    expect(all!.position).toBe(`x.${tweets[22]!.id}`);
    expect(all!.more).toBe(false);
    expect(requests.some((r) => r.searchParams.get('since_id') === tweets[2]!.id)).toBe(true);
    const first = await source().pollTweets('XDevelopers', {
      position: `x.${tweets[2]!.id}`,
      notBefore,
      limit: 4,
      firstPage: false,
    });
    expect(first!.tweets.map((t) => t.id)).toEqual(tweets.slice(3, 7).map((t) => t.id));
    expect(first!.position).toBe(`x.${tweets[6]!.id}`);
    expect(first!.more).toBe(true);
    // no position: from notBefore (a time is a snowflake id)
    const fromTime = await source().pollTweets('XDevelopers', {
      position: null,
      notBefore,
      limit: 100,
      firstPage: true,
    });
    expect(fromTime!.tweets).toHaveLength(23);
    expect(await source().pollTweets('ghost', { position: null, notBefore, limit: 2, firstPage: true })).toBeNull();
    await expect(
      source().pollTweets('XDevelopers', { position: 'x.abc', notBefore, limit: 2, firstPage: true }),
    ).rejects.toBeInstanceOf(InvalidCursorError);
  });

  it("pollTweets re-reads an overlap window behind its position on a poll's first call: a tweet X shows late is read", async () => {
    const now = Date.now();
    const newer = lateTweet(now - 2_000, 'newer, visible at once');
    const older = lateTweet(now - 10_000, 'older, visible late');
    lateTimeline.push(newer);
    const notBefore = new Date(now - 3600_000);
    const src = createXSource({ baseUrl, bearerToken: TOKEN, timeoutMs: 2000, overlapMs: 30_000 });
    const one = await src.pollTweets('LateWriter', { position: null, notBefore, limit: 100, firstPage: true });
    expect(one!.tweets.map((t) => t.text)).toEqual(['newer, visible at once']);
    lateTimeline.push(older); // X now shows an older tweet, behind the position
    lateTimeline.sort((a, b) => (BigInt(b.id) > BigInt(a.id) ? 1 : -1));
    // without the window (a later page of the same poll) it stays unseen
    const later = await src.pollTweets('LateWriter', {
      position: one!.position,
      notBefore,
      limit: 100,
      firstPage: false,
    });
    expect(later!.tweets).toEqual([]);
    // a poll's first call re-reads the window: the late tweet comes, the newer one again (one call)
    requests.length = 0;
    const two = await src.pollTweets('LateWriter', { position: one!.position, notBefore, limit: 100, firstPage: true });
    expect(two!.tweets.map((t) => t.text)).toEqual(['older, visible late', 'newer, visible at once']);
    expect(two!.position).toBe(one!.position);
    expect(requests.filter((r) => r.pathname.endsWith('/tweets'))).toHaveLength(1);
    // a window of 0 re-reads only the position's own millisecond: the late tweet stays unseen
    const none = createXSource({ baseUrl, bearerToken: TOKEN, timeoutMs: 2000, overlapMs: 0 });
    const blind = await none.pollTweets('LateWriter', {
      position: one!.position,
      notBefore,
      limit: 100,
      firstPage: true,
    });
    expect(blind!.tweets.map((t) => t.text)).toEqual(['newer, visible at once']);
  });

  it('maps 429, 5xx, HTML, bad credentials and time-outs to SocialSourceError', async () => {
    mode = '429';
    await expect(source().getUser('XDevelopers')).rejects.toMatchObject({
      name: 'SocialSourceError',
      timeout: false,
      message: expect.stringContaining('rate limit'),
    });
    mode = '503';
    await expect(source().getTweet('123')).rejects.toBeInstanceOf(SocialSourceError);
    mode = 'html';
    await expect(source().search('a', { limit: 5 })).rejects.toBeInstanceOf(SocialSourceError);
    mode = 'slow';
    await expect(source().getUser('XDevelopers')).rejects.toMatchObject({ name: 'SocialSourceError', timeout: true });
    mode = 'ok';
    const wrongToken = createXSource({ baseUrl, bearerToken: 'wrong', timeoutMs: 300 });
    await expect(wrongToken.getUser('XDevelopers')).rejects.toThrow(/credentials/);
    const unreachable = createXSource({ baseUrl: 'http://127.0.0.1:1', bearerToken: TOKEN, timeoutMs: 300 });
    await expect(unreachable.getUser('XDevelopers')).rejects.toMatchObject({
      name: 'SocialSourceError',
      timeout: false,
    });
  });
});
