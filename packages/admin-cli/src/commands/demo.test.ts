import { spawn } from 'node:child_process';
import { createDbClient, type Db } from '@sts/db';
import { createSocialUser } from '@sts/social';
import { createTestDatabase, REPO_ROOT, waitFor } from '@sts/testing';
import { runCli } from '../main';
import { postDemoTweet } from './demo';

describe('demo generator', () => {
  let dbHandle: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;

  beforeAll(async () => {
    dbHandle = await createTestDatabase();
    db = createDbClient({ url: dbHandle.url, poolSize: 2 });
  });

  afterAll(async () => {
    await db.$disconnect();
    await dbHandle.drop();
  });

  it('does nothing without users, and `demo tweet` says why', async () => {
    expect(await postDemoTweet(db)).toBeNull();
    const r = await runCli(['demo', 'tweet'], { DATABASE_URL: dbHandle.url });
    expect(r).toMatchObject({ code: 1, stderr: expect.stringContaining('has no users yet') as unknown });
  });

  it('posts tweets for existing users, some with the active monitors’ keywords, so the monitors fire', async () => {
    const account = await db.account.create({ data: { email: 'demo@example.com', plan: 'starter' } });
    for (const u of ['demo_alice', 'demo_bob', 'demo_carol']) await createSocialUser(db, { username: u, name: u });
    await db.monitor.create({
      data: { accountId: account.id, targetUsername: 'demo_alice', targetKey: 'demo_alice', keywords: ['launch day'] },
    });
    const posted = [];
    for (let i = 0; i < 40; i++) posted.push((await postDemoTweet(db))!);
    const users = ['demo_alice', 'demo_bob', 'demo_carol'];
    expect(posted.every((p) => users.includes(p.author))).toBe(true);
    expect(await db.socialTweet.count()).toBe(40);
    // the watched user is preferred and the keyword used: a poll of that monitor records hits
    expect(posted.filter((p) => p.author === 'demo_alice').length).toBeGreaterThan(posted.length / 3);
    expect(posted.some((p) => p.author === 'demo_alice' && /\blaunch day\b/.test(p.text))).toBe(true);

    const one = await runCli(['demo', 'tweet', '--json'], { DATABASE_URL: dbHandle.url });
    expect(one.code).toBe(0);
    expect(users).toContain((JSON.parse(one.stdout) as { author: string }).author);
  });

  it('`demo run` posts every --interval until SIGTERM, then exits 0 with the count', async () => {
    const before = await db.socialTweet.count();
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', 'packages/admin-cli/src/main.ts', 'demo', 'run', '--interval', '0.2', '--json'],
      { cwd: REPO_ROOT, env: { ...process.env, DATABASE_URL: dbHandle.url }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    try {
      await waitFor(() => out.split('demo tweet posted').length > 2, 30_000);
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(err).toBe('');
      const { posted } = JSON.parse(out.trim().split('\n').pop()!) as { posted: number };
      expect(posted).toBeGreaterThanOrEqual(2);
      expect(await db.socialTweet.count()).toBe(before + posted);
      expect(await runCli(['demo', 'run', '--interval', '0'], {})).toMatchObject({ code: 2 });
    } finally {
      child.kill('SIGKILL');
    }
  });
});
