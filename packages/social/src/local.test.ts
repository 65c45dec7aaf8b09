import net from 'node:net';
import { createDbClient, type Db } from '@sts/db';
import { Client } from 'pg';
import { snowflakeId } from '@sts/core';
import { createTestDatabase, waitFor } from '@sts/testing';
import { encodeCursor } from './cursor';
import { createSocialSource } from './factory';
import { createLocalSource, createSocialTweet, createSocialUser, SocialInputError } from './local';
import { InvalidCursorError, type SocialSource, type SocialTweet } from './types';

describe('local social source', () => {
  let testDb: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;
  let source: SocialSource;
  const base = Date.UTC(2025, 0, 10, 12, 0, 0);
  const bobTweets: SocialTweet[] = [];

  beforeAll(async () => {
    testDb = await createTestDatabase();
    db = createDbClient({ url: testDb.url, poolSize: 3 });
    source = createLocalSource({ db });
    await createSocialUser(db, {
      username: 'Alice_1',
      name: 'Alice',
      followersCount: 10,
      verified: true,
      description: 'hello',
    });
    await createSocialUser(db, { username: 'bob', name: 'Bob' });
    // 45 tweets; groups of 5 share one created_at, so the id breaks ties
    for (let i = 0; i < 45; i++) {
      bobTweets.push(
        await createSocialTweet(db, {
          authorUsername: 'bob',
          text: `bob tweet number ${i} ${i % 3 === 0 ? 'launch day' : 'ordinary'}`,
          createdAt: new Date(base + Math.floor(i / 5) * 60_000),
          lang: 'en',
        }),
      );
    }
    await createSocialTweet(db, { authorUsername: 'alice_1', text: 'Alice says Launch too', lang: 'en' });
  });

  afterAll(async () => {
    await db.$disconnect();
    await testDb.drop();
  });

  const newestFirst = (a: SocialTweet, b: SocialTweet) =>
    b.createdAt.getTime() - a.createdAt.getTime() || Number(BigInt(b.id) - BigInt(a.id));

  it('finds users case-insensitively and returns every field', async () => {
    const u = await source.getUser('ALICE_1');
    expect(u).toEqual({
      id: expect.stringMatching(/^[1-9][0-9]+$/),
      username: 'Alice_1',
      name: 'Alice',
      description: 'hello',
      followersCount: 10,
      followingCount: 0,
      tweetCount: 1,
      verified: true,
      profileImageUrl: null,
      createdAt: expect.any(Date),
    });
    expect(await source.getUser('nobody')).toBeNull();
    expect(await source.getUser('not valid!')).toBeNull();
  });

  it('createSocialUser upserts by username and createSocialTweet counts tweets', async () => {
    const before = await source.getUser('bob');
    expect(before!.tweetCount).toBe(45);
    const again = await createSocialUser(db, { username: 'BOB', name: 'Bobby', followersCount: 7 });
    expect(again.id).toBe(before!.id);
    expect(again.name).toBe('Bobby');
    expect(again.username).toBe('BOB');
    expect(again.followersCount).toBe(7);
    expect(again.tweetCount).toBe(45);
    await createSocialUser(db, { username: 'bob', name: 'Bob' });
  });

  it('createSocialTweet stamps createdAt after the connection is open, not before it (a cold CLI process)', async () => {
    // a fresh client whose connection reaches PostgreSQL only after a delay
    let through = 0;
    const pgPort = Number(new URL(testDb.url).port || 5432);
    const slow = net.createServer((client) => {
      client.pause();
      setTimeout(() => {
        const upstream = net.connect(pgPort, '127.0.0.1', () => {
          through = Date.now();
          client.pipe(upstream).pipe(client);
          client.resume();
        });
        for (const s of [client, upstream]) s.on('error', () => undefined);
        client.on('close', () => upstream.destroy());
      }, 300);
    });
    await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
    const url = new URL(testDb.url);
    url.hostname = '127.0.0.1';
    url.port = String((slow.address() as net.AddressInfo).port);
    const cold = createDbClient({ url: url.toString(), poolSize: 1 });
    try {
      const tweet = await createSocialTweet(cold, { authorUsername: 'alice_1', text: 'stamped at the commit' });
      expect(through).toBeGreaterThan(0);
      expect(tweet.createdAt.getTime()).toBeGreaterThanOrEqual(through);
      const stored = await db.socialTweet.findUniqueOrThrow({ where: { id: BigInt(tweet.id) } });
      expect(stored.createdAt).toEqual(tweet.createdAt);
      expect(tweet.author.tweetCount).toBe((await source.getUser('alice_1'))!.tweetCount);
      await db.socialTweet.delete({ where: { id: BigInt(tweet.id) } });
      await db.socialUser.update({ where: { id: BigInt(tweet.authorId) }, data: { tweetCount: { decrement: 1 } } });
    } finally {
      await cold.$disconnect();
      slow.close();
    }
  });

  it('writers refuse bad input', async () => {
    await expect(createSocialTweet(db, { authorUsername: 'ghost', text: 'hi' })).rejects.toThrow(
      new SocialInputError('unknown author "ghost"'),
    );
    await expect(createSocialTweet(db, { authorUsername: 'bob', text: '   ' })).rejects.toBeInstanceOf(
      SocialInputError,
    );
    await expect(createSocialTweet(db, { authorUsername: 'bob', text: 'x'.repeat(281) })).rejects.toThrow(/280/);
    // 280 emoji are 280 characters, though 560 UTF-16 units
    const emoji = await createSocialTweet(db, { authorUsername: 'alice_1', text: '🚀'.repeat(280) });
    expect(emoji.text).toHaveLength(560);
    await db.socialTweet.delete({ where: { id: BigInt(emoji.id) } });
    await db.socialUser.update({ where: { id: BigInt(emoji.authorId) }, data: { tweetCount: { decrement: 1 } } });
    await expect(createSocialUser(db, { username: 'bad-name', name: 'x' })).rejects.toThrow(/username/);
    await expect(createSocialUser(db, { username: 'okname', name: ' ' })).rejects.toThrow(/name/);
  });

  it('gets one tweet with its author', async () => {
    const t = bobTweets[7]!;
    const got = await source.getTweet(t.id);
    expect(got).toEqual({
      id: t.id,
      text: t.text,
      authorId: t.authorId,
      author: expect.objectContaining({ username: 'bob', name: 'Bob', tweetCount: 45 }),
      createdAt: t.createdAt,
      lang: 'en',
      metrics: { likeCount: 0, retweetCount: 0, replyCount: 0, quoteCount: 0 },
      referencedTweets: [],
    });
    expect(await source.getTweet('1')).toBeNull();
    expect(await source.getTweet('abc')).toBeNull();
  });

  it('pages a timeline newest first without gaps or repeats, ties broken by id', async () => {
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await source.getUserTimeline('Bob', { limit: 7, cursor });
      expect(page).not.toBeNull();
      expect(page!.items.length).toBeLessThanOrEqual(7);
      seen.push(...page!.items.map((t) => t.id));
      cursor = page!.nextCursor ?? undefined;
      pages++;
    } while (cursor);
    expect(pages).toBe(7);
    expect(seen).toEqual([...bobTweets].sort(newestFirst).map((t) => t.id));
    // an exact multiple of the page size ends with a null cursor, not an empty page
    const all = await source.getUserTimeline('bob', { limit: 45 });
    expect(all!.items).toHaveLength(45);
    expect(all!.nextCursor).toBeNull();
    expect(await source.getUserTimeline('ghost', { limit: 5 })).toBeNull();
  });

  it('refuses cursors it did not issue', async () => {
    const page = await source.getUserTimeline('bob', { limit: 5 });
    const good = page!.nextCursor!;
    const bad = [
      'garbage!',
      '',
      good.slice(0, -2),
      `${good}A`,
      encodeCursor('sr', ['1736510400000', '123']), // a search cursor on a timeline
      encodeCursor('tl', ['-5', '123']),
      encodeCursor('tl', ['1736510400000', 'abc']),
      encodeCursor('tl', ['1736510400000']),
      Buffer.from('tl.1736510400000.0123').toString('base64url'),
      Buffer.from('tl.1736510400000.123').toString('base64'), // base64 padding, not base64url
      'x'.repeat(2000),
    ];
    for (const cursor of bad) {
      await expect(source.getUserTimeline('bob', { limit: 5, cursor })).rejects.toBeInstanceOf(InvalidCursorError);
    }
    await expect(source.search('launch', { limit: 5, cursor: good })).rejects.toBeInstanceOf(InvalidCursorError);
  });

  it('searches full text newest first and pages without gaps or repeats', async () => {
    const expected = [...bobTweets.filter((t) => t.text.includes('launch day'))];
    const alice = (await source.search('alice', { limit: 10 })).items;
    expect(alice.map((t) => t.author.username)).toEqual(['Alice_1']);
    const seen: SocialTweet[] = [];
    let cursor: string | undefined;
    do {
      const page = await source.search('LAUNCH', { limit: 4, cursor });
      seen.push(...page.items);
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
    // Alice's tweet is the newest (created now); then bob's 15 "launch day" tweets
    expect(seen.map((t) => t.id)).toEqual([alice[0]!.id, ...expected.sort(newestFirst).map((t) => t.id)]);
    // websearch syntax: phrase and exclusion
    const phrase = await source.search('"launch day" -alice', { limit: 100 });
    expect(phrase.items).toHaveLength(15);
    expect((await source.search('nothingmatches', { limit: 5 })).items).toEqual([]);
    // punctuation-only and odd input never fail
    for (const q of ['!!!', '" -', 'a & b | c', "o'reilly", '\0x', '((']) {
      await expect(source.search(q, { limit: 5 })).resolves.toBeDefined();
    }
  });

  it('search answers the same whichever path serves a page (postings, walks with a recheck, GIN index)', async () => {
    // tweets of every frequency: "common" in every other tweet, "middling" in every 7th, "rare" in
    // two, over created_at ties (groups of 4 share a time, so ids break ties)
    await createSocialUser(db, { username: 'carol', name: 'Carol' });
    const t0 = Date.UTC(2025, 0, 5, 8);
    for (let i = 0; i < 60; i++) {
      const words = [
        `n${i}`,
        i % 2 === 0 ? 'common' : 'plain',
        i % 7 === 3 ? 'middling' : '',
        i % 29 === 5 ? 'rare' : '',
      ];
      if (i % 5 === 0) words.push('"quoted" text');
      await createSocialTweet(db, {
        authorUsername: 'carol',
        text: words.filter(Boolean).join(' '),
        createdAt: new Date(t0 + Math.floor(i / 4) * 1000),
      });
    }
    // one tweet deleted and one edited after writing: the postings follow
    const gone = await createSocialTweet(db, {
      authorUsername: 'carol',
      text: 'common rare deleted',
      createdAt: new Date(t0),
    });
    await db.socialTweet.delete({ where: { id: BigInt(gone.id) } });
    const edited = await createSocialTweet(db, {
      authorUsername: 'carol',
      text: 'middling edited',
      createdAt: new Date(t0),
    });
    await db.socialTweet.update({ where: { id: BigInt(edited.id) }, data: { text: 'common edited' } });

    // the reference: every match of the query, newest first, straight from the table
    const reference = async (q: string) =>
      (
        await db.$queryRaw<{ id: string }[]>`
          SELECT id::text AS id FROM social_tweets WHERE search @@ websearch_to_tsquery('simple', ${q})
          ORDER BY created_at DESC, id DESC`
      ).map((r) => r.id);
    const collect = async (src: SocialSource, q: string, limit: number) => {
      const seen: string[] = [];
      let cursor: string | undefined;
      for (let n = 0; n < 200; n++) {
        const page = await src.search(q, { limit, cursor });
        expect(page.items.length).toBeLessThanOrEqual(limit);
        seen.push(...page.items.map((t) => t.id));
        cursor = page.nextCursor ?? undefined;
        if (!cursor) return seen;
      }
      throw new Error('paging did not end');
    };
    const queries = [
      'common', // exact: one term
      'middling',
      'rare',
      'LAUNCH',
      'middling or rare', // exact: terms joined by or (a tweet with both counted once)
      'common or middling',
      'common middling', // and: the rarer term drives, each tweet rechecked
      'common rare',
      'plain -middling', // exclusion
      '"launch day"', // phrase
      '"quoted text" common',
      '-common', // no driver: the time walk
      'rare or -plain',
      'edited',
      'deleted',
      'nothingmatches',
    ];
    expect(await reference('edited')).toEqual([edited.id]);
    expect(await reference('deleted')).toEqual([]);
    expect((await reference('middling')).length).toBe(9);
    for (const walkRows of [1, 4, 2000]) {
      const src = createLocalSource({ db, searchWalkRows: walkRows });
      for (const q of queries) {
        const expected = await reference(q);
        for (const limit of [1, 4, 20]) {
          expect({ q, walkRows, limit, ids: await collect(src, q, limit) }).toEqual({
            q,
            walkRows,
            limit,
            ids: expected,
          });
        }
      }
    }
    // postings: exactly one row per (lexeme, tweet), after inserts, an update and a delete
    const [drift] = await db.$queryRaw<{ missing: number; extra: number }[]>`
      WITH want AS (SELECT x.term, t.created_at, t.id AS tweet_id FROM social_tweets t, unnest(tsvector_to_array(t.search)) x(term))
      SELECT (SELECT count(*) FROM (SELECT * FROM want EXCEPT SELECT * FROM social_tweet_terms) a)::int AS missing,
             (SELECT count(*) FROM (SELECT * FROM social_tweet_terms EXCEPT SELECT * FROM want) b)::int AS extra`;
    expect(drift).toEqual({ missing: 0, extra: 0 });
    await db.socialUser.delete({ where: { usernameKey: 'carol' } });
    const [left] = await db.$queryRaw<{ n: number }[]>`
      SELECT count(*)::int AS n FROM social_tweet_terms p WHERE NOT EXISTS (SELECT 1 FROM social_tweets t WHERE t.id = p.tweet_id)`;
    expect(left!.n).toBe(0);
    // TRUNCATE (no row triggers) empties them too; in a transaction rolled back, so the tweets stay
    const inside = await db
      .$transaction(async (tx) => {
        await tx.$executeRawUnsafe('TRUNCATE social_tweets CASCADE');
        const [n] = await tx.$queryRaw<{ n: number }[]>`SELECT count(*)::int AS n FROM social_tweet_terms`;
        throw Object.assign(new Error('rollback'), { n: n!.n });
      })
      .catch((err: Error & { n?: number }) => err.n);
    expect(inside).toBe(0);
    const [kept] = await db.$queryRaw<{ n: number }[]>`SELECT count(*)::int AS n FROM social_tweet_terms`;
    expect(kept!.n).toBeGreaterThan(0);
  });

  it('pollTweets reads a target in write order in pages, resumes at its position, and honours notBefore', async () => {
    const poll = (position: string | null, limit: number, notBefore = new Date(0)) =>
      source.pollTweets('bob', { position, notBefore, limit, firstPage: position === null });
    // bob's tweets were written one transaction each, in array order
    const all = await poll(null, 100);
    expect(all!.tweets.map((t) => t.id)).toEqual(bobTweets.map((t) => t.id));
    expect(all!.more).toBe(false);
    expect(all!.position).toMatch(/^l\.[0-9]+\.[0-9]+$/);
    expect((await poll(all!.position, 100))!.tweets).toEqual([]);
    // pages of 7: the same tweets, none twice; `more` until a short page
    const paged: string[] = [];
    let position: string | null = null;
    for (let i = 0; i < 20; i++) {
      const page = await poll(position, 7);
      paged.push(...page!.tweets.map((t) => t.id));
      position = page!.position;
      if (!page!.more) break;
    }
    expect(paged).toEqual(bobTweets.map((t) => t.id));
    // notBefore drops older tweets (the oldest monitor's creation)
    const since = new Date(base + 8 * 60_000);
    expect((await poll(null, 100, since))!.tweets.map((t) => t.id)).toEqual(bobTweets.slice(40).map((t) => t.id));
    expect(
      await source.pollTweets('ghost', { position: null, notBefore: new Date(0), limit: 5, firstPage: true }),
    ).toBeNull();
    for (const bad of ['l.abc.1', 'l.1', 'l.1.2.3', 'l.01.2', 'l.1.99999999999999999999']) {
      await expect(poll(bad, 5)).rejects.toBeInstanceOf(InvalidCursorError);
    }
    // another provider's position counts as none
    expect((await poll('x.123', 100))!.tweets).toHaveLength(45);

    // ids compare as numbers (as bigint), not as text: 9 < 10 < 100
    await createSocialUser(db, { username: 'numeric', name: 'N' });
    await createSocialTweet(db, { authorUsername: 'numeric', text: 'nine', id: '9' });
    await createSocialTweet(db, { authorUsername: 'numeric', text: 'ten', id: '10' });
    await createSocialTweet(db, { authorUsername: 'numeric', text: 'hundred', id: '100' });
    const numeric = await source.pollTweets('numeric', {
      position: null,
      notBefore: new Date(0),
      limit: 10,
      firstPage: true,
    });
    expect(numeric!.tweets.map((t) => t.text)).toEqual(['nine', 'ten', 'hundred']);
    expect(await source.getTweet('100')).toMatchObject({ text: 'hundred' });
    expect(await source.getTweet('9223372036854775807')).toBeNull();
  });

  it('pollTweets never moves past a tweet whose transaction is still open', async () => {
    await createSocialUser(db, { username: 'latecomer', name: 'L' });
    const start = await source.pollTweets('latecomer', {
      position: null,
      notBefore: new Date(0),
      limit: 10,
      firstPage: true,
    });
    expect(start!.tweets).toEqual([]);
    // a slow writer takes its transaction id first, a fast one commits meanwhile
    const slow = new Client({ connectionString: testDb.url });
    await slow.connect();
    try {
      await slow.query('BEGIN');
      const author = await slow.query<{ id: string }>(
        `SELECT id::text AS id FROM social_users WHERE username_key = 'latecomer'`,
      );
      await slow.query(`INSERT INTO social_tweets (id, author_id, text) VALUES ($1, $2, 'slow writer')`, [
        snowflakeId(),
        author.rows[0]!.id,
      ]);
      const fast = await createSocialTweet(db, { authorUsername: 'latecomer', text: 'fast writer' });
      const during = await source.pollTweets('latecomer', {
        position: start!.position,
        notBefore: new Date(0),
        limit: 10,
        firstPage: true,
      });
      // the fast tweet is committed and visible, but behind the open transaction: not read yet
      expect(during!.tweets).toEqual([]);
      expect(await source.getTweet(fast.id)).not.toBeNull();
      await slow.query('COMMIT');
      // once the slow writer committed (and any other open transaction of the cluster ended), both come
      let position = during!.position;
      const got: string[] = [];
      await waitFor(async () => {
        const page = await source.pollTweets('latecomer', {
          position,
          notBefore: new Date(0),
          limit: 10,
          firstPage: false,
        });
        got.push(...page!.tweets.map((t) => t.text));
        position = page!.position;
        return got.length >= 2;
      }, 30_000);
      expect(got).toEqual(['slow writer', 'fast writer']);
    } finally {
      await slow.end();
    }
  });

  it('pollTweets is not held back by a transaction open in another database of the cluster', async () => {
    await createSocialUser(db, { username: 'neighbour', name: 'N' });
    const other = await createTestDatabase();
    const c = new Client({ connectionString: other.url });
    await c.connect();
    try {
      await c.query('BEGIN');
      await c.query('SELECT pg_current_xact_id()'); // holds a transaction id, in the other database
      const t = await createSocialTweet(db, { authorUsername: 'neighbour', text: 'not held back' });
      const page = await source.pollTweets('neighbour', {
        position: null,
        notBefore: new Date(0),
        limit: 10,
        firstPage: true,
      });
      expect(page!.tweets.map((x) => x.id)).toEqual([t.id]);
      await c.query('ROLLBACK');
    } finally {
      await c.end();
      await other.drop();
    }
  });

  it('createSocialSource picks local by default and x on request', () => {
    expect(createSocialSource({}, { db }).name).toBe('local');
    expect(createSocialSource({ SOCIAL_SOURCE: 'x', X_BEARER_TOKEN: 't' }, { db }).name).toBe('x');
    expect(() => createSocialSource({ SOCIAL_SOURCE: 'x' }, { db })).toThrow(/X_BEARER_TOKEN/);
  });
});
