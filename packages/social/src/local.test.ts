import { createDbClient, type Db } from '@sts/db';
import { createTestDatabase } from '@sts/testing';
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
    await db.socialTweet.delete({ where: { id: emoji.id } });
    await db.socialUser.update({ where: { id: emoji.authorId }, data: { tweetCount: { decrement: 1 } } });
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

  it('getTweetsSince returns newer tweets oldest first, comparing ids as numbers', async () => {
    const byId = [...bobTweets].sort((a, b) => Number(BigInt(a.id) - BigInt(b.id)));
    const since = byId[39]!.id;
    const newer = await source.getTweetsSince('bob', since, 100);
    expect(newer!.map((t) => t.id)).toEqual(byId.slice(40).map((t) => t.id));
    const two = await source.getTweetsSince('bob', since, 2);
    expect(two!.map((t) => t.id)).toEqual(byId.slice(40, 42).map((t) => t.id));
    // no starting point: the newest `limit`, oldest first
    const latest = await source.getTweetsSince('bob', null, 3);
    expect(latest!.map((t) => t.id)).toEqual(byId.slice(-3).map((t) => t.id));
    expect(await source.getTweetsSince('bob', byId[44]!.id, 10)).toEqual([]);
    expect(await source.getTweetsSince('ghost', null, 10)).toBeNull();
    await expect(source.getTweetsSince('bob', 'abc', 10)).rejects.toBeInstanceOf(InvalidCursorError);

    // a shorter id is a smaller number even though "9" > "10…" as text
    await createSocialUser(db, { username: 'numeric', name: 'N' });
    await createSocialTweet(db, { authorUsername: 'numeric', text: 'nine', id: '9' });
    await createSocialTweet(db, { authorUsername: 'numeric', text: 'ten', id: '10' });
    await createSocialTweet(db, { authorUsername: 'numeric', text: 'hundred', id: '100' });
    expect((await source.getTweetsSince('numeric', '9', 10))!.map((t) => t.text)).toEqual(['ten', 'hundred']);
  });

  it('createSocialSource picks local by default and x on request', () => {
    expect(createSocialSource({}, { db }).name).toBe('local');
    expect(createSocialSource({ SOCIAL_SOURCE: 'x', X_BEARER_TOKEN: 't' }, { db }).name).toBe('x');
    expect(() => createSocialSource({ SOCIAL_SOURCE: 'x' }, { db })).toThrow(/X_BEARER_TOKEN/);
  });
});
