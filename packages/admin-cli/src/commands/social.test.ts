import { createDbClient, type Db } from '@sts/db';
import { createTestDatabase } from '@sts/testing';
import { createLocalSource } from '@sts/social';
import { runCli } from '../main';

describe('social commands', () => {
  let testDb: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;
  let env: NodeJS.ProcessEnv;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    db = createDbClient({ url: testDb.url, poolSize: 2 });
    env = { DATABASE_URL: testDb.url };
  });

  afterAll(async () => {
    await db.$disconnect();
    await testDb.drop();
  });

  it('social user creates, then updates by username', async () => {
    const r = await runCli(
      [
        'social',
        'user',
        '--username',
        'Dana',
        '--name',
        'Dana D',
        '--followers',
        '42',
        '--verified',
        '--description',
        'hi',
        '--json',
      ],
      env,
    );
    expect(r).toMatchObject({ code: 0, stderr: '' });
    const out = JSON.parse(r.stdout) as { id: string; username: string };
    expect(out).toEqual({ id: expect.stringMatching(/^[1-9][0-9]*$/), username: 'Dana' });
    const row = await db.socialUser.findUnique({ where: { id: BigInt(out.id) } });
    expect(row).toMatchObject({
      username: 'Dana',
      usernameKey: 'dana',
      name: 'Dana D',
      followersCount: 42,
      verified: true,
      description: 'hi',
    });

    const again = await runCli(['social', 'user', '--username', 'dana', '--name', 'Dana Two', '--json'], env);
    expect(JSON.parse(again.stdout)).toEqual({ id: out.id, username: 'dana' });
    const updated = await db.socialUser.findUnique({ where: { id: BigInt(out.id) } });
    expect(updated).toMatchObject({ name: 'Dana Two', followersCount: 42, verified: true });
    expect(await db.socialUser.count()).toBe(1);

    const text = await runCli(['social', 'user', '--username', 'eve', '--name', 'Eve'], env);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^user @eve id [0-9]+ \(0 followers\)\n$/);
  });

  it('social tweet stores a tweet and counts it on the author', async () => {
    const r = await runCli(['social', 'tweet', '--author', 'DANA', '--text', 'big news today', '--json'], env);
    expect(r.code).toBe(0);
    const { id } = JSON.parse(r.stdout) as { id: string };
    const row = await db.socialTweet.findUnique({ where: { id: BigInt(id) }, include: { author: true } });
    expect(row).toMatchObject({ text: 'big news today', author: { username: 'dana', tweetCount: 1 } });
    const emoji = await runCli(
      ['social', 'tweet', '--author', 'dana', '--text', '🚀'.repeat(280), '--lang', 'en'],
      env,
    );
    expect(emoji.code).toBe(0);
    expect(emoji.stdout).toMatch(/^tweet [0-9]+ by @dana at /);
  });

  it('refuses bad input as usage errors, writing nothing', async () => {
    const before = await db.socialTweet.count();
    const cases: [string[], RegExp][] = [
      [['social', 'tweet', '--author', 'ghost', '--text', 'hi'], /unknown author "ghost"/],
      [['social', 'tweet', '--author', 'dana', '--text', ''], /text must not be empty/],
      [['social', 'tweet', '--author', 'dana', '--text', '   '], /text must not be empty/],
      [['social', 'tweet', '--author', 'dana', '--text', 'x'.repeat(281)], /at most 280/],
      [['social', 'tweet', '--author', 'dana'], /--text is required/],
      [['social', 'tweet', '--text', 'hi'], /--author is required/],
      [['social', 'tweet', '--author', 'bad-name', '--text', 'hi'], /author must be a valid username/],
      [['social', 'tweet', '--author', 'dana', '--text', 'hi', '--lang', 'english!'], /--lang/],
      [['social', 'user', '--username', 'bad name', '--name', 'x'], /username must be 1 to 15/],
      [['social', 'user', '--username', 'a'.repeat(16), '--name', 'x'], /username must be 1 to 15/],
      [['social', 'user', '--username', 'ok'], /--name is required/],
      [['social', 'user', '--username', 'ok', '--name', 'x', '--followers=-1'], /--followers must be a whole number/],
      [
        ['social', 'user', '--username', 'ok', '--name', 'x', '--followers', '1.5'],
        /--followers must be a whole number/,
      ],
    ];
    for (const [argv, message] of cases) {
      const r = await runCli([...argv, '--json'], env);
      expect({ argv, code: r.code }).toEqual({ argv, code: 2 });
      expect(r.stderr).toMatch(message);
      expect(JSON.parse(r.stdout)).toEqual({ error: expect.stringMatching(message) });
    }
    const unknown = await runCli(['social', 'user', '--username', 'ok', '--name', 'x', '--bogus'], env);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/Unknown option '--bogus'/);
    expect(await db.socialTweet.count()).toBe(before);
    expect(await db.socialUser.findUnique({ where: { usernameKey: 'ok' } })).toBeNull();
  });

  it('social tweet --reply-to, --quote and --repost record the references the local source reads back', async () => {
    const post = async (...extra: string[]) => {
      const r = await runCli(['social', 'tweet', '--author', 'dana', '--text', 'ref test', ...extra, '--json'], env);
      expect(r).toMatchObject({ code: 0, stderr: '' });
      return (JSON.parse(r.stdout) as { id: string }).id;
    };
    const original = await post();
    const reply = await post('--reply-to', original);
    const quote = await post('--quote', original, '--reply-to', original);
    const repost = await post('--repost', original);
    const source = createLocalSource({ db });
    expect((await source.getTweet(original))?.referencedTweets).toEqual([]);
    expect((await source.getTweet(reply))?.referencedTweets).toEqual([{ type: 'replied_to', id: original }]);
    expect((await source.getTweet(quote))?.referencedTweets).toEqual([
      { type: 'replied_to', id: original },
      { type: 'quoted', id: original },
    ]);
    expect((await source.getTweet(repost))?.referencedTweets).toEqual([{ type: 'retweeted', id: original }]);

    const before = await db.socialTweet.count();
    const bad = await runCli(['social', 'tweet', '--author', 'dana', '--text', 'x', '--quote', 'abc'], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/quote must be a numeric tweet id/);
    const both = await runCli(
      ['social', 'tweet', '--author', 'dana', '--text', 'x', '--repost', '1', '--quote', '2'],
      env,
    );
    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/a repost cannot also reply or quote/);
    expect(await db.socialTweet.count()).toBe(before);
  });

  it('social delete ID deletes a tweet (its id as a bare word or --id); an unknown or bad id is exit 2', async () => {
    await runCli(['social', 'user', '--username', 'Eraser', '--name', 'E'], env);
    const posted = await runCli(['social', 'tweet', '--author', 'Eraser', '--text', 'gone soon', '--json'], env);
    const { id } = JSON.parse(posted.stdout) as { id: string };
    const deleted = await runCli(['social', 'delete', id, '--json'], env);
    expect(deleted).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(deleted.stdout)).toEqual({ id, author: 'Eraser' });
    expect(await db.socialTweet.count({ where: { id: BigInt(id) } })).toBe(0);
    expect((await db.socialUser.findFirstOrThrow({ where: { username: 'Eraser' } })).tweetCount).toBe(0);
    const again = await runCli(['social', 'delete', '--id', id], env);
    expect(again).toMatchObject({ code: 2, stderr: expect.stringContaining(`unknown tweet ${id}`) });
    expect(await runCli(['social', 'delete', 'abc'], env)).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('id must be a numeric tweet id'),
    });
  });
});
