import { createDbClient, type Db } from '@sts/db';
import { createTestDatabase } from '@sts/testing';
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
});
