/* eslint-disable @typescript-eslint/no-explicit-any, @typescript-eslint/no-unsafe-return */
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { createLogger, createMetricsRegistry } from '@sts/common';
import { createDbClient, type Db } from '@sts/db';
import { createLocalSource, createSocialTweet, createSocialUser, createXSource, type SocialTweet } from '@sts/social';
import { createTestDatabase, rawRequest, waitFor } from '@sts/testing';
import { createReadApi, type ReadApi } from './app';

const TOKEN = 'internal-token-for-tests-0123456789';
const logger = createLogger({ service: 'read-api-test', level: 'error' });

const USER_KEYS = [
  'created_at',
  'description',
  'followers_count',
  'following_count',
  'id',
  'name',
  'profile_image_url',
  'tweet_count',
  'username',
  'verified',
];
const TWEET_KEYS = ['author', 'author_id', 'created_at', 'id', 'lang', 'public_metrics', 'referenced_tweets', 'text'];
const MONITOR_KEYS = [
  'check_interval_sec',
  'created_at',
  'events',
  'filters',
  'has_webhook',
  'held_events',
  'id',
  'is_active',
  'keywords',
  'last_check_at',
  'last_error',
  'query',
  'status',
  'target_status',
  'target_status_at',
  'target_username',
  'updated_at',
];
const HIT_KEYS = ['author_username', 'detected_at', 'id', 'text', 'tweet_created_at', 'tweet_id', 'url'];
const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

type Json = Record<string, any>;

describe('read-api', () => {
  let testDb: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;
  let app: ReadApi;
  let port: number;
  const registry = createMetricsRegistry('read-api-test');
  const bobTweets: SocialTweet[] = [];
  let accountA: string;
  let accountB: string;
  const monitorsA: Record<string, string> = {};
  let monitorB: string;
  const hitIds: string[] = [];

  const get = (path: string, headers: Record<string, string> = {}, account: string | null = accountA) =>
    rawRequest(port, 'GET', path, {
      headers: {
        'x-internal-token': TOKEN,
        ...(account ? { 'x-account-id': account, 'x-account-plan': 'free' } : {}),
        ...headers,
      },
    });

  beforeAll(async () => {
    testDb = await createTestDatabase();
    db = createDbClient({ url: testDb.url, poolSize: 4 });
    await createSocialUser(db, {
      username: 'Alice',
      name: 'Alice A.',
      followersCount: 1200,
      verified: true,
      description: 'writes about launches',
      profileImageUrl: 'https://img.example/alice.png',
    });
    await createSocialUser(db, { username: 'bob', name: 'Bob' });
    // a day ago, on a whole second: within every plan's hit window (older posts' hits are not listed)
    const base = Math.floor(Date.now() / 1000) * 1000 - 86_400_000;
    for (let i = 0; i < 45; i++) {
      bobTweets.push(
        await createSocialTweet(db, {
          authorUsername: 'bob',
          text: `update ${i}${i % 2 === 0 ? ' rocket launch' : ''}`,
          createdAt: new Date(base + Math.floor(i / 4) * 1000), // 4 tweets per timestamp
          lang: 'en',
        }),
      );
    }
    accountA = (await db.account.create({ data: { email: 'a@example.com' } })).id;
    accountB = (await db.account.create({ data: { email: 'b@example.com', plan: 'starter' } })).id;
    const t0 = new Date(Date.UTC(2025, 0, 1));
    const mk = (accountId: string, extra: Json, at: number) =>
      db.monitor.create({
        data: {
          accountId,
          targetUsername: 'bob',
          targetKey: 'bob',
          createdAt: new Date(t0.getTime() + at),
          ...extra,
        },
      });
    monitorsA.keywords = (
      await mk(
        accountA,
        { keywords: ['launch', 'big news', '-spam'], excludeTypes: ['reposts'], langs: ['en'], checkIntervalSec: 30 },
        1000,
      )
    ).id;
    monitorsA.paused = (await mk(accountA, { isActive: false, lastError: 'was failing' }, 2000)).id;
    // a monitor's last check and error are its target's (the poller writes the target's cursor)
    monitorsA.failing = (await mk(accountA, { targetUsername: 'ghost', targetKey: 'ghost' }, 3000)).id;
    await db.pollCursor.create({
      data: { targetKey: 'ghost', lastError: 'user not found', lastPolledAt: new Date(t0.getTime() + 5000) },
    });
    monitorB = (await mk(accountB, {}, 4000)).id;
    await db.webhookEndpoint.create({
      data: { monitorId: monitorsA.keywords, url: 'https://hooks.example/x', secretCiphertext: 'v1.a.b.c' },
    });
    // 25 hits on the keyword monitor, in groups of 3 sharing detected_at
    for (let i = 0; i < 25; i++) {
      const t = bobTweets[i]!;
      const hit = await db.hit.create({
        data: {
          monitorId: monitorsA.keywords,
          tweetId: t.id,
          tweetText: t.text,
          tweetAuthorId: t.authorId,
          tweetAuthorUsername: 'bob',
          tweetCreatedAt: t.createdAt,
          detectedAt: new Date(base + 60_000 + Math.floor(i / 3) * 1000),
        },
      });
      hitIds.push(hit.id);
    }
    await db.hit.create({
      data: {
        monitorId: monitorB,
        tweetId: bobTweets[0]!.id,
        tweetText: 'x',
        tweetAuthorId: bobTweets[0]!.authorId,
        tweetAuthorUsername: 'bob',
        tweetCreatedAt: bobTweets[0]!.createdAt,
      },
    });
    app = createReadApi({
      db,
      source: createLocalSource({ db }),
      internalToken: TOKEN,
      logger,
      registry,
      userCacheTtlMs: 0,
    });
    port = await app.listen(0, '127.0.0.1');
  });

  afterAll(async () => {
    await app.close();
    await db.$disconnect();
    await testDb.drop();
  });

  const newestFirst = (a: SocialTweet, b: SocialTweet) =>
    b.createdAt.getTime() - a.createdAt.getTime() || Number(BigInt(b.id) - BigInt(a.id));

  describe('internal token and request ids', () => {
    it('refuses requests without the right internal token', async () => {
      const attempts: Record<string, string>[] = [
        {},
        { 'x-internal-token': 'wrong' },
        { 'x-internal-token': `${TOKEN}x` },
        { 'x-internal-token': TOKEN.toUpperCase() },
      ];
      for (const headers of attempts) {
        const r = await rawRequest(port, 'GET', '/api/v1/users/alice', { headers });
        expect(r.status).toBe(401);
        expect(r.json).toMatchObject({ code: 'UNAUTHORIZED', error: expect.stringContaining('internal token') });
      }
      // even unknown routes: nothing is revealed without the token
      expect((await rawRequest(port, 'GET', '/nope')).status).toBe(401);
    });

    it('echoes x-request-id in the header and error body, or makes one', async () => {
      const r = await get('/api/v1/users/nobody', { 'x-request-id': 'req-123' });
      expect(r.status).toBe(404);
      expect(r.headers['x-request-id']).toBe('req-123');
      expect(r.json).toEqual({ error: 'user "nobody" not found', code: 'USER_NOT_FOUND', request_id: 'req-123' });
      const made = await get('/api/v1/users/nobody', { 'x-request-id': 'bad id with spaces' });
      expect(made.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
      expect(made.json!.request_id).toBe(made.headers['x-request-id']);
      const ok = await get('/api/v1/users/alice');
      expect(ok.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    });

    it('does not serve the ops paths (they live on OPS_PORT) and counts requests in its registry', async () => {
      for (const ops of ['/healthz', '/readyz', '/metrics']) {
        expect((await rawRequest(port, 'GET', ops)).status).toBe(401);
        expect((await rawRequest(port, 'GET', ops, { headers: { 'x-internal-token': TOKEN } })).status).toBe(404);
      }
      expect(await registry.metrics()).toMatch(
        /read_api_http_request_duration_seconds_count\{[^}]*method="GET",route="\/api\/v1\/users\/:username",status="200"\} [1-9]/,
      );
    });
  });

  describe('users', () => {
    it('returns the user profile, case-insensitively', async () => {
      const r = await get('/api/v1/users/ALICE');
      expect(r.status).toBe(200);
      expect(r.headers['content-type']).toBe('application/json; charset=utf-8');
      expect(Object.keys(r.json!)).toEqual(['data']);
      const u = r.json!.data as Json;
      expect(Object.keys(u).sort()).toEqual(USER_KEYS);
      expect(u).toEqual({
        id: expect.stringMatching(/^[1-9][0-9]*$/),
        username: 'Alice',
        name: 'Alice A.',
        followers_count: 1200,
        verified: true,
        description: 'writes about launches',
        following_count: 0,
        tweet_count: 0,
        profile_image_url: 'https://img.example/alice.png',
        created_at: expect.stringMatching(ISO_MS),
      });
      const bob = (await get('/api/v1/users/bob')).json!.data as Json;
      expect(bob).toMatchObject({ username: 'bob', tweet_count: 45, verified: false, description: null });
    });

    it('404s an unknown user', async () => {
      const r = await get('/api/v1/users/ghost_user');
      expect(r.status).toBe(404);
      expect(r.json).toMatchObject({ code: 'USER_NOT_FOUND' });
    });
  });

  describe('timeline', () => {
    it('returns tweet records with the author', async () => {
      const r = await get('/api/v1/users/bob/tweets?limit=2');
      expect(r.status).toBe(200);
      expect(Object.keys(r.json!).sort()).toEqual(['data', 'meta']);
      const [t] = r.json!.data as Json[];
      const newest = [...bobTweets].sort(newestFirst)[0]!;
      expect(Object.keys(t!).sort()).toEqual(TWEET_KEYS);
      expect(t).toEqual({
        id: newest.id,
        text: newest.text,
        author_id: newest.authorId,
        created_at: newest.createdAt.toISOString(),
        lang: 'en',
        public_metrics: { like_count: 0, retweet_count: 0, reply_count: 0, quote_count: 0 },
        referenced_tweets: [],
        author: expect.objectContaining({ id: newest.authorId, username: 'bob', name: 'Bob' }),
      });
      expect(Object.keys(t!.author as Json).sort()).toEqual(USER_KEYS);
      expect(t!.created_at).toMatch(ISO_MS);
      expect(r.json!.meta).toEqual({ count: 2, next_cursor: expect.any(String) });
    });

    it('defaults to 20 and pages newest first without gaps or repeats', async () => {
      const first = await get('/api/v1/users/bob/tweets');
      expect((first.json!.data as Json[]).length).toBe(20);
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const r = await get(`/api/v1/users/bob/tweets?limit=10${cursor ? `&cursor=${cursor}` : ''}`);
        expect(r.status).toBe(200);
        const data = r.json!.data as Json[];
        expect((r.json!.meta as Json).count).toBe(data.length);
        seen.push(...data.map((t) => t.id as string));
        cursor = (r.json!.meta as Json).next_cursor as string | null;
        pages++;
      } while (cursor);
      expect(pages).toBe(5);
      expect(seen).toEqual([...bobTweets].sort(newestFirst).map((t) => t.id));
    });

    it('404s the timeline of an unknown user', async () => {
      expect((await get('/api/v1/users/ghost/tweets')).json).toMatchObject({ code: 'USER_NOT_FOUND' });
    });
  });

  describe('tweets', () => {
    it('returns one tweet', async () => {
      const t = bobTweets[3]!;
      const r = await get(`/api/v1/tweets/${t.id}`);
      expect(r.status).toBe(200);
      expect(r.json!.data).toMatchObject({ id: t.id, text: t.text, author: { username: 'bob' } });
      expect(Object.keys(r.json!.data as Json).sort()).toEqual(TWEET_KEYS);
    });

    it('404s an unknown tweet', async () => {
      const r = await get('/api/v1/tweets/123456789');
      expect(r.status).toBe(404);
      expect(r.json).toMatchObject({ code: 'TWEET_NOT_FOUND', error: 'tweet 123456789 not found' });
    });
  });

  describe('search', () => {
    it('finds tweets newest first and pages without gaps or repeats', async () => {
      const expected = bobTweets
        .filter((t) => t.text.includes('rocket launch'))
        .sort(newestFirst)
        .map((t) => t.id);
      expect(expected).toHaveLength(23);
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const r = await get(
          `/api/v1/search?q=${encodeURIComponent('Rocket Launch')}&limit=6${cursor ? `&cursor=${cursor}` : ''}`,
        );
        expect(r.status).toBe(200);
        const data = r.json!.data as Json[];
        for (const t of data) expect(Object.keys(t).sort()).toEqual(TWEET_KEYS);
        seen.push(...data.map((t) => t.id as string));
        cursor = (r.json!.meta as Json).next_cursor as string | null;
      } while (cursor);
      expect(seen).toEqual(expected);
      const none = await get('/api/v1/search?q=nothing+matches+this');
      expect(none.json).toEqual({ data: [], meta: { count: 0, next_cursor: null } });
    });

    it('tolerates a trailing slash', async () => {
      expect((await get('/api/v1/users/bob/')).status).toBe(200);
      expect((await get('/api/v1/search/?q=rocket')).status).toBe(200);
    });

    it('ignores unknown query parameters', async () => {
      const r = await get('/api/v1/search?q=rocket&limit=1&foo=bar&foo=baz');
      expect(r.status).toBe(200);
      expect((r.json!.data as Json[]).length).toBe(1);
    });
  });

  describe('monitors', () => {
    it("lists only hits within the caller's plan window (Free 30 days, Starter 90), whatever storage still holds", async () => {
      const made = await Promise.all(
        [40, 100].map((days) =>
          db.hit.create({
            data: {
              monitorId: monitorB,
              tweetId: `old-${days}`,
              tweetText: 'an older post',
              tweetAuthorId: '1',
              tweetAuthorUsername: 'bob',
              tweetCreatedAt: new Date(Date.now() - days * 86_400_000),
            },
          }),
        ),
      );
      try {
        const ids = async (plan: string, path: string) => {
          const r = await get(path, { 'x-account-plan': plan }, accountB);
          expect(r.status).toBe(200);
          return r.json!.data as Json[];
        };
        const listed = (await ids('starter', `/api/v1/monitors/${monitorB}/hits`)).map((h) => h.tweet_id);
        expect(listed).toContain('old-40');
        expect(listed).not.toContain('old-100');
        const asFree = (await ids('free', `/api/v1/monitors/${monitorB}/hits`)).map((h) => h.tweet_id);
        expect(asFree).not.toContain('old-40');
        expect(asFree).toContain(bobTweets[0]!.id);
        const recent = await ids('free', '/api/v1/monitors?include_hits=1');
        const hits = (recent[0]!.recent_hits as Json[]).map((h) => h.tweet_id);
        expect(hits).toEqual([bobTweets[0]!.id]);
      } finally {
        await db.hit.deleteMany({ where: { id: { in: made.map((h) => h.id) } } });
      }
    });

    it("lists only the caller's monitors, newest first, with derived status", async () => {
      const r = await get('/api/v1/monitors');
      expect(r.status).toBe(200);
      const data = r.json!.data as Json[];
      expect(data.map((m) => m.id)).toEqual([monitorsA.failing, monitorsA.paused, monitorsA.keywords]);
      expect(r.json!.meta).toEqual({ count: 3, next_cursor: null });
      for (const m of data) expect(Object.keys(m).sort()).toEqual(MONITOR_KEYS);
      const byId = Object.fromEntries(data.map((m) => [m.id, m]));
      expect(byId[monitorsA.keywords!]).toEqual({
        id: monitorsA.keywords,
        target_username: 'bob',
        query: null,
        keywords: ['launch', 'big news', '-spam'],
        filters: { exclude: ['reposts'], lang: ['en'], excluded_keywords: ['spam'] },
        is_active: true,
        status: 'active',
        check_interval_sec: 30,
        last_check_at: null,
        last_error: null,
        has_webhook: true,
        held_events: 0,
        events: ['posts'],
        target_status: 'ok',
        target_status_at: null,
        created_at: '2025-01-01T00:00:01.000Z',
        updated_at: expect.stringMatching(ISO_MS),
      });
      expect(byId[monitorsA.paused!]).toMatchObject({
        keywords: null,
        status: 'paused',
        is_active: false,
        has_webhook: false,
      });
      expect(byId[monitorsA.failing!]).toMatchObject({
        status: 'error',
        last_error: 'user not found',
        last_check_at: '2025-01-01T00:00:05.000Z',
      });
      const b = await get('/api/v1/monitors', {}, accountB);
      expect((b.json!.data as Json[]).map((m) => m.id)).toEqual([monitorB]);
      const none = await get('/api/v1/monitors', {}, '00000000-0000-4000-8000-000000000000');
      expect(none.json).toEqual({ data: [], meta: { count: 0, next_cursor: null } });
    });

    it('adds recent_hits with include_hits=1, hit_limit per monitor (default 3)', async () => {
      const r = await get('/api/v1/monitors?include_hits=1');
      const data = r.json!.data as Json[];
      const kw = data.find((m) => m.id === monitorsA.keywords)!;
      const hits = kw.recent_hits as Json[];
      expect(hits).toHaveLength(3);
      for (const h of hits) expect(Object.keys(h).sort()).toEqual(HIT_KEYS);
      const all = ((await get(`/api/v1/monitors/${monitorsA.keywords}/hits?limit=100`)).json!.data as Json[]).map(
        (h) => h.id,
      );
      expect(hits.map((h) => h.id)).toEqual(all.slice(0, 3));
      expect(data.find((m) => m.id === monitorsA.paused)!.recent_hits).toEqual([]);
      const ten = await get('/api/v1/monitors?include_hits=1&hit_limit=10');
      expect(
        ((ten.json!.data as Json[]).find((m) => m.id === monitorsA.keywords)!.recent_hits as Json[]).map((h) => h.id),
      ).toEqual(all.slice(0, 10));
      for (const q of ['', '?include_hits=0', '?hit_limit=5']) {
        const plain = await get(`/api/v1/monitors${q}`);
        for (const m of plain.json!.data as Json[]) expect(m).not.toHaveProperty('recent_hits');
      }
    });

    it('pages hits newest first without gaps or repeats', async () => {
      const seen: string[] = [];
      let cursor: string | null = null;
      let first: Json | undefined;
      do {
        const r = await get(`/api/v1/monitors/${monitorsA.keywords}/hits?limit=7${cursor ? `&cursor=${cursor}` : ''}`);
        expect(r.status).toBe(200);
        const data = r.json!.data as Json[];
        first ??= data[0];
        seen.push(...data.map((h) => h.id as string));
        cursor = (r.json!.meta as Json).next_cursor as string | null;
      } while (cursor);
      expect(seen).toHaveLength(25);
      expect(new Set(seen).size).toBe(25);
      const rows = await db.hit.findMany({
        where: { monitorId: monitorsA.keywords },
        orderBy: [{ detectedAt: 'desc' }, { id: 'desc' }],
      });
      expect(seen).toEqual(rows.map((h) => h.id));
      const newest = rows[0]!;
      expect(first).toEqual({
        id: newest.id,
        tweet_id: newest.tweetId,
        text: newest.tweetText,
        author_username: 'bob',
        tweet_created_at: newest.tweetCreatedAt.toISOString(),
        detected_at: newest.detectedAt.toISOString(),
        url: `https://x.com/bob/status/${newest.tweetId}`,
      });
    });

    it("404s another account's monitor and non-UUID ids; 401 without an account", async () => {
      for (const path of [
        `/api/v1/monitors/${monitorB}/hits`,
        '/api/v1/monitors/not-a-uuid/hits',
        '/api/v1/monitors/123/hits',
      ]) {
        const r = await get(path);
        expect(r.status).toBe(404);
        expect(r.json).toMatchObject({ code: 'NOT_FOUND', error: 'monitor not found' });
      }
      expect((await get(`/api/v1/monitors/${monitorB}/hits`, {}, accountB)).status).toBe(200);
      // upper-case UUIDs are the same monitor
      expect((await get(`/api/v1/monitors/${monitorsA.keywords!.toUpperCase()}/hits`)).status).toBe(200);
      for (const account of [null, 'not-a-uuid']) {
        const r = await rawRequest(port, 'GET', '/api/v1/monitors', {
          headers: { 'x-internal-token': TOKEN, ...(account ? { 'x-account-id': account } : {}) },
        });
        expect(r.status).toBe(401);
        expect(r.json).toMatchObject({ code: 'UNAUTHORIZED', error: expect.stringContaining('x-account-id') });
      }
    });
  });

  describe('POST /api/v1/tweets', () => {
    const post = (body: string | undefined, contentType: string | null = 'application/json') =>
      rawRequest(port, 'POST', '/api/v1/tweets', {
        headers: { 'x-internal-token': TOKEN, ...(contentType ? { 'content-type': contentType } : {}) },
        body,
      });

    it('answers 501 coming soon for a valid tweet', async () => {
      for (const text of ['hello world', '🚀'.repeat(280), 'x'.repeat(280)]) {
        const r = await post(JSON.stringify({ text }));
        expect(r.status).toBe(501);
        expect(r.json).toMatchObject({ code: 'NOT_IMPLEMENTED', error: expect.stringContaining('coming soon') });
      }
      expect((await post(JSON.stringify({ text: 'hi' }), 'application/json; charset=UTF-8')).status).toBe(501);
    });

    it('400s a missing or malformed body and bad text, 415s other content types', async () => {
      const cases: [string | undefined, string | null, number, RegExp, string][] = [
        [undefined, 'application/json', 400, /body is required/, 'body'],
        [undefined, null, 400, /body is required/, 'body'],
        ['', 'application/json', 400, /body is required/, 'body'],
        ['{"text": "hi"', 'application/json', 400, /not valid JSON/, 'body'],
        ['[1,2]', 'application/json', 400, /JSON object/, 'body'],
        ['"text"', 'application/json', 400, /JSON object/, 'body'],
        ['null', 'application/json', 400, /JSON object/, 'body'],
        ['{}', 'application/json', 400, /text is required/, 'text'],
        ['{"text": null}', 'application/json', 400, /text is required/, 'text'],
        ['{"text": 5}', 'application/json', 400, /text must be a string/, 'text'],
        ['{"text": ""}', 'application/json', 400, /text must not be empty/, 'text'],
        ['{"text": "   "}', 'application/json', 400, /text must not be empty/, 'text'],
        [JSON.stringify({ text: 'x'.repeat(281) }), 'application/json', 400, /at most 280/, 'text'],
      ];
      for (const [body, type, status, message, param] of cases) {
        const r = await post(body, type);
        expect({ body, status: r.status }).toEqual({ body, status });
        expect(r.json).toMatchObject({ code: 'INVALID_REQUEST', error: expect.stringMatching(message), param });
      }
      for (const type of [
        'text/plain',
        'application/x-www-form-urlencoded',
        'application/json; charset=latin1',
        null,
      ]) {
        const r = await post('{"text":"hi"}', type);
        expect(r.status).toBe(415);
        expect(r.json).toMatchObject({
          code: 'UNSUPPORTED_MEDIA_TYPE',
          error: expect.stringContaining('application/json'),
        });
      }
      const big = await post(JSON.stringify({ text: 'x'.repeat(20_000) }));
      expect(big.status).toBe(413);
      expect(big.json).toMatchObject({ code: 'PAYLOAD_TOO_LARGE' });
    });
  });

  it('405s a known path with another method and says what is allowed', async () => {
    const cases: [string, string, string][] = [
      ['DELETE', '/api/v1/users/bob', 'GET, HEAD'],
      ['POST', '/api/v1/search', 'GET, HEAD'],
      ['GET', '/api/v1/tweets', 'POST'],
      ['PUT', `/api/v1/monitors/${monitorsA.keywords}/hits`, 'GET, HEAD'],
    ];
    for (const [method, path, allow] of cases) {
      const r = await rawRequest(port, method, path, { headers: { 'x-internal-token': TOKEN } });
      expect(r.status).toBe(405);
      expect(r.headers.allow).toBe(allow);
      expect(r.json).toMatchObject({ code: 'METHOD_NOT_ALLOWED', error: expect.stringContaining(method) });
    }
    const head = await rawRequest(port, 'HEAD', '/api/v1/users/bob', { headers: { 'x-internal-token': TOKEN } });
    expect(head.status).toBe(200);
    expect(head.text).toBe('');
  });

  it('caches user lookups for the TTL when enabled', async () => {
    const cached = createReadApi({
      db,
      source: createLocalSource({ db }),
      internalToken: TOKEN,
      logger,
      userCacheTtlMs: 60_000,
    });
    const p = await cached.listen(0, '127.0.0.1');
    try {
      const read = async () =>
        (
          (await rawRequest(p, 'GET', '/api/v1/users/alice', { headers: { 'x-internal-token': TOKEN } })).json!
            .data as Json
        ).name;
      expect(await read()).toBe('Alice A.');
      await createSocialUser(db, { username: 'alice', name: 'Alice Renamed' });
      expect(await read()).toBe('Alice A.'); // served from the cache
      expect(((await get('/api/v1/users/alice')).json!.data as Json).name).toBe('Alice Renamed'); // no cache
      await createSocialUser(db, { username: 'Alice', name: 'Alice A.' });
    } finally {
      await cached.close();
    }
  });

  it('answers 503 when the database is down', async () => {
    const deadDb = createDbClient({ url: 'postgresql://postgres@127.0.0.1:1/nothing', poolSize: 1 });
    const down = createReadApi({ db: deadDb, source: createLocalSource({ db: deadDb }), internalToken: TOKEN, logger });
    const p = await down.listen(0, '127.0.0.1');
    try {
      for (const path of ['/api/v1/users/alice', '/api/v1/search?q=x', `/api/v1/monitors`]) {
        const r = await rawRequest(p, 'GET', path, {
          headers: { 'x-internal-token': TOKEN, 'x-account-id': accountA },
        });
        expect(r.status).toBe(503);
        expect(r.json).toMatchObject({ code: 'SERVICE_UNAVAILABLE', request_id: expect.any(String) });
        expect(r.text).not.toMatch(/127\.0\.0\.1|prisma|at /i);
      }
    } finally {
      await down.close();
      await deadDb.$disconnect();
    }
  });

  describe('with the X source', () => {
    let fake: http.Server;
    let fakeUrl: string;
    let behaviour: 'fail' | 'slow' | 'hold' | 'ok' = 'ok';
    const gate: { release?: (() => void) | undefined } = {};
    /** with 'hold': every call's answer, to send later */
    const held: Array<() => void> = [];

    beforeAll(async () => {
      fake = http.createServer((req, res) => {
        const respond = () =>
          res.writeHead(200, { 'content-type': 'application/json' }).end(
            JSON.stringify({
              data: {
                id: '2244994945',
                username: 'XDevelopers',
                name: 'X Developers',
                verified: true,
                public_metrics: { followers_count: 5, following_count: 1, tweet_count: 9, listed_count: 0 },
              },
            }),
          );
        if (behaviour === 'fail')
          res.writeHead(503, { 'content-type': 'application/json' }).end('{"title":"Service Unavailable"}');
        else if (behaviour === 'slow') gate.release = respond;
        else if (behaviour === 'hold') held.push(respond);
        else respond();
      });
      await new Promise<void>((r) => fake.listen(0, '127.0.0.1', r));
      fakeUrl = `http://127.0.0.1:${(fake.address() as AddressInfo).port}`;
    });

    afterAll(async () => {
      fake.closeAllConnections();
      await new Promise((r) => fake.close(r));
    });

    /** a read-api on the fake X API, without the user cache */
    const xReadApi = (timeoutMs: number) =>
      createReadApi({
        db,
        source: createXSource({ baseUrl: fakeUrl, bearerToken: 't', timeoutMs }),
        internalToken: TOKEN,
        logger,
        userCacheTtlMs: 0,
      });

    it('maps source failures to 502 and time-outs to 504 UPSTREAM_ERROR', async () => {
      const x = xReadApi(200);
      const p = await x.listen(0, '127.0.0.1');
      try {
        behaviour = 'ok';
        const ok = await rawRequest(p, 'GET', '/api/v1/users/XDevelopers', { headers: { 'x-internal-token': TOKEN } });
        expect(ok.json!.data).toMatchObject({
          id: '2244994945',
          followers_count: 5,
          verified: true,
          description: null,
        });
        behaviour = 'fail';
        const failed = await rawRequest(p, 'GET', '/api/v1/users/XDevelopers', {
          headers: { 'x-internal-token': TOKEN },
        });
        expect(failed.status).toBe(502);
        expect(failed.json).toMatchObject({ code: 'UPSTREAM_ERROR' });
        behaviour = 'slow';
        const slow = await rawRequest(p, 'GET', '/api/v1/users/XDevelopers', {
          headers: { 'x-internal-token': TOKEN },
        });
        expect(slow.status).toBe(504);
        expect(slow.json).toMatchObject({ code: 'UPSTREAM_ERROR', error: expect.stringContaining('in time') });
        gate.release?.();
      } finally {
        await x.close();
      }
    });

    it('close() lets in-flight requests finish, then refuses new ones', async () => {
      const x = xReadApi(10_000);
      const p = await x.listen(0, '127.0.0.1');
      behaviour = 'slow';
      delete gate.release;
      const inflight = rawRequest(p, 'GET', '/api/v1/users/XDevelopers', { headers: { 'x-internal-token': TOKEN } });
      const finish = await waitFor(() => gate.release);
      const closed = x.close();
      finish();
      const r = await inflight;
      expect(r.status).toBe(200);
      expect(r.headers.connection).toBe('close');
      await closed;
      await expect(rawRequest(p, 'GET', '/api/v1/users/XDevelopers')).rejects.toThrow(/ECONNREFUSED/);
      behaviour = 'ok';
    });

    it('close() answers every request pipelined on a connection; only the last answer says Connection: close', async () => {
      const x = xReadApi(10_000);
      const p = await x.listen(0, '127.0.0.1');
      behaviour = 'hold';
      held.length = 0;
      const socket = net.connect(p, '127.0.0.1');
      let received = '';
      socket.on('data', (c: Buffer) => (received += c.toString('latin1')));
      const ended = new Promise<void>((r) => socket.on('close', () => r()));
      const call = (n: number) =>
        `GET /api/v1/users/XDevelopers${n} HTTP/1.1\r\nhost: r\r\nx-internal-token: ${TOKEN}\r\n\r\n`;
      socket.write([1, 2, 3, 4].map(call).join('')); // pipelined, as the gateway sends them
      await waitFor(() => held.length === 4 || undefined);
      const closed = x.close();
      for (const respond of held) respond();
      await ended;
      await closed;
      const answers = received.split(/(?=HTTP\/1\.1 )/);
      expect(answers).toHaveLength(4);
      expect(answers.every((a) => a.startsWith('HTTP/1.1 200'))).toBe(true);
      expect(answers.map((a) => /\r\nconnection: close\r\n/i.test(a))).toEqual([false, false, false, true]);
      behaviour = 'ok';
    });
  });
});
