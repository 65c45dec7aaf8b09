/**
 * The CLI's rule names: `monitor create|update --exclude ... --lang ...` with `-word` keywords,
 * and `monitor preview --account ID --target U [--keywords] [--exclude] [--lang] [--json]` over
 * the local store (SOCIAL_SOURCE=local), cached in the real Redis.
 */
import { createDbClient, type Db } from '@sts/db';
import { createSocialTweet, createSocialUser } from '@sts/social';
import { createTestDatabase, createTestRedis } from '@sts/testing';
import { runCli } from '../main';

describe('monitor rules and preview (CLI)', () => {
  let testDb: Awaited<ReturnType<typeof createTestDatabase>>;
  let redisHandle: ReturnType<typeof createTestRedis>;
  let db: Db;
  let env: NodeJS.ProcessEnv;
  let accountId: string;
  const ids: Record<string, string> = {};

  const cli = (...argv: string[]) => runCli(argv, env);

  beforeAll(async () => {
    testDb = await createTestDatabase();
    db = createDbClient({ url: testDb.url, poolSize: 2 });
    redisHandle = createTestRedis();
    env = {
      DATABASE_URL: testDb.url,
      REDIS_URL: redisHandle.url,
      REDIS_KEY_PREFIX: redisHandle.prefix,
      SOCIAL_SOURCE: 'local',
    };
    accountId = (await db.account.create({ data: { email: 'rules-cli@example.test', plan: 'starter' } })).id;
    await createSocialUser(db, { username: 'Nova', name: 'Nova' });
    const original = await createSocialTweet(db, { authorUsername: 'Nova', text: 'first post', lang: 'en' });
    ids.original = original.id;
    const post = async (key: string, text: string, extra: Record<string, string | null> = {}) => {
      const t = await createSocialTweet(db, { authorUsername: 'Nova', text, lang: 'en', ...extra });
      ids[key] = t.id;
    };
    await post('reply', 'launch reply', { replyToId: original.id });
    await post('quote', 'launch quote', { quoteOfId: original.id });
    await post('repost', 'RT launch', { repostOfId: original.id });
    await post('german', 'launch heute', { lang: 'de' });
    await post('spam', 'launch spam');
    await post('plain', 'launch plain');
  });

  afterAll(async () => {
    await db.$disconnect();
    await redisHandle.cleanup();
    await testDb.drop();
  });

  it('monitor create and update take --exclude, --lang and -word keywords', async () => {
    const r = await cli(
      'monitor',
      'create',
      '--account',
      accountId,
      '--target',
      'Nova',
      '--keywords',
      'launch,-spam,-"big sale"',
      '--exclude',
      'replies,reposts',
      '--lang',
      'en,de',
      '--json',
    );
    expect(r).toMatchObject({ code: 0, stderr: '' });
    const { id } = JSON.parse(r.stdout) as { id: string };
    expect(await db.monitor.findUniqueOrThrow({ where: { id } })).toMatchObject({
      keywords: ['launch', '-spam', '-"big sale"'],
      excludeTypes: ['replies', 'reposts'],
      langs: ['en', 'de'],
    });
    const up = await cli('monitor', 'update', '--monitor', id, '--exclude', 'quotes', '--json');
    expect(up.code).toBe(0);
    expect(JSON.parse(up.stdout)).toMatchObject({
      keywords: ['launch', '-spam', '-"big sale"'],
      filters: { exclude: ['quotes'], lang: ['en', 'de'] },
    });
    const text = await cli('monitor', 'update', '--monitor', id, '--lang', '');
    expect(text.stdout).toMatch(/excluding quotes/);
    expect(text.stdout).not.toMatch(/lang /);

    const bad = await cli('monitor', 'update', '--monitor', id, '--exclude', 'likes');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--exclude.*"likes" is not a post type/);
    const badLang = await cli('monitor', 'create', '--account', accountId, '--target', 'x', '--lang', 'english');
    expect(badLang.code).toBe(2);
    expect(badLang.stderr).toMatch(/--lang/);
    expect(await db.monitor.count()).toBe(1);
  });

  it('monitor preview --json: a list of posts, each matched true or false with the reason', async () => {
    const r = await cli(
      'monitor',
      'preview',
      '--account',
      accountId,
      '--target',
      'nova',
      '--keywords',
      'launch,-spam',
      '--exclude',
      'reposts,quotes',
      '--lang',
      'en',
      '--json',
    );
    expect(r).toMatchObject({ code: 0, stderr: '' });
    const posts = JSON.parse(r.stdout) as { id: string; matched: boolean; reason: string }[];
    expect(Array.isArray(posts)).toBe(true);
    const byId = Object.fromEntries(posts.map((p) => [p.id, { matched: p.matched, reason: p.reason }]));
    expect(byId[ids.plain!]).toEqual({ matched: true, reason: 'matched keyword "launch"' });
    expect(byId[ids.reply!]).toEqual({ matched: true, reason: 'matched keyword "launch"' });
    expect(byId[ids.quote!]).toEqual({ matched: false, reason: 'excluded: a quote' });
    expect(byId[ids.repost!]).toEqual({ matched: false, reason: 'excluded: a repost' });
    expect(byId[ids.german!]).toEqual({ matched: false, reason: 'language de is not in en' });
    expect(byId[ids.spam!]).toEqual({ matched: false, reason: 'excluded keyword "spam"' });
    expect(byId[ids.original!]).toEqual({ matched: false, reason: 'no keyword matched' });
    expect(posts).toHaveLength(7);
    // nothing saved
    expect(await db.monitor.count()).toBe(1);

    // the timeline is cached: a post written now is not seen until the cache expires
    await createSocialTweet(db, { authorUsername: 'Nova', text: 'launch again', lang: 'en' });
    const again = await cli('monitor', 'preview', '--account', accountId, '--target', 'Nova');
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/^of @Nova's last 7 posts, 7 would have fired:/);
    expect(again.stdout).toMatch(/MATCH .* launch plain {2}\(no keyword filter\)/);
  });

  it('monitor preview refuses bad input with exit 2 and the flag named', async () => {
    const bad = await cli('monitor', 'preview', '--account', accountId, '--target', 'no such');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--target/);
    const ghost = await cli('monitor', 'preview', '--account', accountId, '--target', 'ghost');
    expect(ghost.code).toBe(2);
    expect(ghost.stderr).toMatch(/@ghost does not exist/);
  });
});
