/**
 * The X provider against the fake X of @sts/testing (X's response format: `data`,
 * `includes.users` (expansions=author_id), `meta` {result_count, newest_id, oldest_id,
 * next_token}, and "not found" as HTTP 200 with an `errors` array of resource-not-found problems).
 */
import { startFakeX, type FakeX, type FakeXTweet } from '@sts/testing';
import { createXSource } from './source';
import { InvalidCursorError, SocialSourceError, type SocialTweet } from '../types';

const TOKEN = 'test-bearer-token';
type Mode = 'ok' | '429' | '503' | 'html';

describe('X API v2 source', () => {
  let fake: FakeX;
  let baseUrl: string;
  let mode: Mode = 'ok';
  let tweets: FakeXTweet[];
  let newestFirst: FakeXTweet[];
  const requests = () => fake.requests.log.map((r) => ({ pathname: r.path, searchParams: r.params }));

  beforeAll(async () => {
    fake = await startFakeX({
      bearerToken: TOKEN,
      routes: [
        (_req, res) => {
          if (mode === 'ok') return false;
          if (mode === '429') {
            res
              .writeHead(429, {
                'content-type': 'application/json',
                'x-rate-limit-limit': '900',
                'x-rate-limit-remaining': '0',
                'x-rate-limit-reset': '1705420800',
              })
              .end(
                JSON.stringify({
                  title: 'Too Many Requests',
                  detail: 'Too Many Requests',
                  type: 'about:blank',
                  status: 429,
                }),
              );
          } else if (mode === '503') {
            res
              .writeHead(503, { 'content-type': 'application/json' })
              .end(JSON.stringify({ title: 'Service Unavailable', status: 503 }));
          } else res.writeHead(502, { 'content-type': 'text/html' }).end('<html>bad gateway</html>');
          return true;
        },
      ],
    });
    baseUrl = fake.url;
    fake.state.addUser({
      id: '2244994945',
      username: 'XDevelopers',
      name: 'X Developers',
      description: 'The voice of the X developer community',
      verified: true,
      createdAt: new Date('2013-12-14T04:35:55.000Z'),
      followers: 583423,
    });
    fake.state.addUser({ id: '99887766', username: 'LateWriter', name: 'Late Writer' });
    // 23 tweets, ids increasing with time; X lists them newest first
    tweets = Array.from({ length: 23 }, (_, i) =>
      fake.state.post({
        author: 'XDevelopers',
        id: String(1800000000000000000n + BigInt(i) * 1000n),
        text: `post ${i}${i % 2 ? ' about the api' : ''}`,
        createdAt: new Date(Date.UTC(2024, 0, 15, 12, i)),
        likes: 2 * i,
      }),
    );
    tweets.forEach((t, i) => Object.assign(t.public_metrics, { retweet_count: i, reply_count: 1 }));
    // X's referenced_tweets: post 5 replies to post 1 and quotes post 2, post 6 reposts post 3
    tweets[5]!.referenced_tweets = [
      { type: 'replied_to', id: tweets[1]!.id },
      { type: 'quoted', id: tweets[2]!.id },
    ];
    tweets[6]!.referenced_tweets = [{ type: 'retweeted', id: tweets[3]!.id }];
    newestFirst = [...tweets].reverse();
  });

  afterAll(() => fake.stop());

  beforeEach(() => {
    mode = 'ok';
    fake.latencyMs = 0;
    fake.requests.clear();
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
      followingCount: 10,
      tweetCount: 23,
      verified: true,
      profileImageUrl: 'https://pbs.twimg.com/profile_images/2244994945/photo_normal.jpg',
      createdAt: new Date('2013-12-14T04:35:55.000Z'),
    });
    expect(requests()[0]!.pathname).toBe('/2/users/by/username/xdevelopers');
    expect(requests()[0]!.searchParams.get('user.fields')!.split(',')).toEqual(
      expect.arrayContaining(['created_at', 'description', 'profile_image_url', 'public_metrics', 'verified']),
    );
    expect(await source().getUser('nobody_here')).toBeNull();
    // an invalid username never reaches X
    fake.requests.clear();
    expect(await source().getUser('no such user')).toBeNull();
    expect(requests()).toHaveLength(0);
  });

  it('remembers a username X did not find: asking again and again costs X one call', async () => {
    const one = source();
    for (let i = 0; i < 5; i++) expect(await one.getUser('ghost_user_29')).toBeNull();
    expect(requests().map((r) => r.pathname)).toEqual(['/2/users/by/username/ghost_user_29']);
    // a name it found is still read fresh each time
    fake.requests.clear();
    await one.getUser('XDevelopers');
    await one.getUser('XDevelopers');
    expect(requests()).toHaveLength(2);
  });

  it('reads a timeline at the priority asked (the monitor preview: low), its user lookup included', async () => {
    const asked: string[] = [];
    const governor = {
      tryAcquire: (family: string, priority = 'high') => {
        asked.push(`${family}:${priority}`);
        return Promise.resolve({ ok: true as const });
      },
      observe: () => Promise.resolve(),
      budget: () => Promise.resolve({ limit: 1, remaining: 1, resetAt: 0, blockedUntil: null }),
    };
    const s = createXSource({ baseUrl, bearerToken: TOKEN, timeoutMs: 300, governor });
    expect((await s.getUserTimeline('XDevelopers', { limit: 5, priority: 'low' }))?.items).toHaveLength(5);
    expect(asked).toEqual(['users:low', 'timeline:low']);
    asked.length = 0;
    await s.getUserTimeline('LateWriter', { limit: 5 });
    expect(asked).toEqual(['users:high', 'timeline:high']);
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
    const q = requests()[0]!.searchParams;
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
    const maxes = requests()
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
    const r = requests().find((x) => x.pathname === '/2/tweets/search/recent')!;
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
    expect(requests().some((r) => r.searchParams.get('since_id') === tweets[2]!.id)).toBe(true);
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

  it('readAccountSince reads one account by id through its timeline back to since_id, oldest first, no user lookup', async () => {
    const read = await source().readAccountSince('2244994945', { sinceId: tweets[9]!.id });
    expect(read.tweets.map((t) => t.id)).toEqual(tweets.slice(10).map((t) => t.id));
    expect(read.tweets[0]!.author.username).toBe('XDevelopers');
    expect(read).toMatchObject({ truncated: false, unreadable: null });
    const log = requests();
    expect(log.map((r) => r.pathname)).toEqual(['/2/users/2244994945/tweets']);
    expect(log[0]!.searchParams.get('since_id')).toBe(tweets[9]!.id);
    expect(fake.requests.count({ family: 'timeline' })).toBe(1);
    // an account X does not serve: unreadable, nothing read
    const gone = await source().readAccountSince('12345', { sinceId: '0' });
    expect(gone.tweets).toEqual([]);
    expect(gone.unreadable).toMatchObject({ suspended: false });
    await expect(source().readAccountSince('not-an-id', { sinceId: '0' })).rejects.toBeInstanceOf(RangeError);
    await expect(source().readAccountSince('12345', { sinceId: 'x' })).rejects.toBeInstanceOf(RangeError);
  });

  it("pollTweets re-reads an overlap window behind its position on a poll's first call: a tweet X shows late is read", async () => {
    const now = Date.now();
    fake.state.post({ author: 'LateWriter', createdAt: new Date(now - 2_000), text: 'newer, visible at once' });
    const notBefore = new Date(now - 3600_000);
    const src = createXSource({ baseUrl, bearerToken: TOKEN, timeoutMs: 2000, overlapMs: 30_000 });
    const one = await src.pollTweets('LateWriter', { position: null, notBefore, limit: 100, firstPage: true });
    expect(one!.tweets.map((t) => t.text)).toEqual(['newer, visible at once']);
    // X now shows an older tweet, behind the position
    fake.state.post({ author: 'LateWriter', createdAt: new Date(now - 10_000), text: 'older, visible late' });
    // without the window (a later page of the same poll) it stays unseen
    const later = await src.pollTweets('LateWriter', {
      position: one!.position,
      notBefore,
      limit: 100,
      firstPage: false,
    });
    expect(later!.tweets).toEqual([]);
    // a poll's first call re-reads the window: the late tweet comes, the newer one again (one call)
    fake.requests.clear();
    const two = await src.pollTweets('LateWriter', { position: one!.position, notBefore, limit: 100, firstPage: true });
    expect(two!.tweets.map((t) => t.text)).toEqual(['older, visible late', 'newer, visible at once']);
    expect(two!.position).toBe(one!.position);
    expect(requests().filter((r) => r.pathname.endsWith('/tweets'))).toHaveLength(1);
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
    const limited = source().getUser('XDevelopers');
    await expect(limited).rejects.toBeInstanceOf(SocialSourceError);
    await expect(limited).rejects.toMatchObject({
      name: 'SourceBusyError',
      family: 'users',
      timeout: false,
      message: expect.stringContaining('rate limit'),
    });
    mode = '503';
    await expect(source().getTweet('123')).rejects.toBeInstanceOf(SocialSourceError);
    mode = 'html';
    await expect(source().search('a', { limit: 5 })).rejects.toBeInstanceOf(SocialSourceError);
    fake.latencyMs = 1000;
    await expect(source().getUser('XDevelopers')).rejects.toMatchObject({ name: 'SocialSourceError', timeout: true });
    fake.latencyMs = 0;
    const wrongToken = createXSource({ baseUrl, bearerToken: 'wrong', timeoutMs: 300 });
    await expect(wrongToken.getUser('XDevelopers')).rejects.toThrow(/credentials/);
    const unreachable = createXSource({ baseUrl: 'http://127.0.0.1:1', bearerToken: TOKEN, timeoutMs: 300 });
    await expect(unreachable.getUser('XDevelopers')).rejects.toMatchObject({
      name: 'SocialSourceError',
      timeout: false,
    });
  });
});
