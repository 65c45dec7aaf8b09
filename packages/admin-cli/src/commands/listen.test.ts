/**
 * `listen` end to end on the real services: the seeded demo account, the poller as a child process
 * (local store, push), and the CLI spawned as `npm run cli` starts it (node with tsx, in its own
 * process group; Ctrl-C is SIGINT to the group). A tweet posted to the local store shows as one
 * line with its latency; SIGINT ends it with exit 0 and its connections closed. (Under `npm run`,
 * npm itself then reports the interrupt as it does for every script: the README test covers that
 * path.) Bad input is a usage error (exit 2) before anything listens.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createDbClient, type Db } from '@sts/db';
import { createSocialTweet } from '@sts/social';
import {
  createTestDatabase,
  createTestRedis,
  createTestVhost,
  pgbouncerAvailable,
  REPO_ROOT,
  spawnService,
  startPgBouncer,
  testServiceUrls,
  waitFor,
  type ServiceProcess,
} from '@sts/testing';
import { runCli } from '../main';
import { hitLine, parseNotification, type ListenedHit } from './listen';

interface Cli {
  child: ChildProcess;
  out: string[];
  err: string[];
  exited: Promise<number | null>;
}

/** the CLI as `npm run cli -- <args>` runs it, in its own process group as in a terminal */
function spawnCli(args: string[], env: NodeJS.ProcessEnv): Cli {
  const child = spawn(process.execPath, ['--import', 'tsx', 'packages/admin-cli/src/main.ts', ...args], {
    cwd: REPO_ROOT,
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const out: string[] = [];
  const err: string[] = [];
  child.stdout.on('data', (c: Buffer) => out.push(c.toString()));
  child.stderr.on('data', (c: Buffer) => err.push(c.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, out, err, exited };
}

/** Ctrl-C: SIGINT to the whole process group (npm, tsx, node) */
const ctrlC = (cli: Cli) => process.kill(-cli.child.pid!, 'SIGINT');

describe('listen', () => {
  let dbHandle: Awaited<ReturnType<typeof createTestDatabase>>;
  let redis: ReturnType<typeof createTestRedis>;
  let db: Db;
  let env: NodeJS.ProcessEnv;
  let poller: ServiceProcess;
  let accountId: string;
  const monitors: Record<string, string> = {};
  const started: Cli[] = [];

  beforeAll(async () => {
    dbHandle = await createTestDatabase();
    redis = createTestRedis();
    const vhost = await createTestVhost();
    db = createDbClient({ url: dbHandle.url, poolSize: 2 });
    env = { ...process.env, DATABASE_URL: dbHandle.url, LOG_LEVEL: 'warn' };
    delete env.JEST_WORKER_ID;
    const seeded = await runCli(['seed', '--json'], env);
    expect(seeded.code).toBe(0);
    accountId = (JSON.parse(seeded.stdout) as { account_id: string }).account_id;
    for (const m of await db.monitor.findMany({ where: { accountId } })) monitors[m.targetKey!] = m.id;
    poller = spawnService('services/poller/src/main.ts', {
      DATABASE_URL: dbHandle.url,
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: redis.prefix,
      AMQP_URL: vhost.url,
      SOCIAL_SOURCE: 'local',
      LOG_LEVEL: 'warn',
    });
    // the demo account is on Starter: once polled, its targets are pushed (a tweet wakes their poll)
    await waitFor(
      async () => (await db.pollTarget.count({ where: { pushed: true, activeMonitors: { gt: 0 } } })) === 2 || null,
      60_000,
      100,
    );
  }, 120_000);

  afterAll(async () => {
    for (const c of started) if (c.child.exitCode === null && c.child.signalCode === null) c.child.kill('SIGKILL');
    poller?.child.kill('SIGTERM');
    await poller?.exited;
    await db.$disconnect();
    await redis.cleanup();
    await dbHandle.drop();
  });

  const listenerConnections = async () =>
    Number(
      (
        await db.$queryRaw<{ n: bigint }[]>`
          SELECT count(*) AS n FROM pg_stat_activity
          WHERE datname = current_database() AND query ILIKE 'LISTEN sts_hits%'`
      )[0]!.n,
    );

  it('prints a line per hit of the demo account as it is recorded, with its latency; Ctrl-C ends it with exit 0', async () => {
    const cli = spawnCli(['listen'], env);
    started.push(cli);
    await waitFor(() => cli.err.join('').includes('listening for hits') || null, 60_000, 50);
    expect(cli.err.join('')).toContain(`account ${accountId}, every monitor`);
    expect(await listenerConnections()).toBe(1);

    const tweet = await createSocialTweet(db, { authorUsername: 'demo_news', text: 'Hello from the listen test' });
    const line = await waitFor(
      () =>
        cli.out
          .join('')
          .split('\n')
          .find((l) => l.includes(tweet.id)) ?? null,
      30_000,
      50,
    );
    expect(line).toMatch(
      new RegExp(
        `^\\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z  @demo_news: "Hello from the listen test"  \\(tweet ${tweet.id}, monitor ${monitors.demo_news!.slice(0, 8)}\\)  detected \\d+ ms, recorded \\d+ ms after the post$`,
      ),
    );
    const [, detected, recorded] = /detected (\d+) ms, recorded (\d+) ms/.exec(line)!;
    const hit = await db.hit.findFirstOrThrow({ where: { tweetId: tweet.id } });
    expect(Number(detected)).toBe(hit.detectedAt.getTime() - tweet.createdAt.getTime());
    expect(Number(recorded)).toBeGreaterThanOrEqual(Number(detected));

    ctrlC(cli);
    expect(await cli.exited).toBe(0);
    expect(cli.out.join('')).toMatch(/1 hit\(s\) shown\n$/);
    expect(cli.err.join('')).not.toMatch(/error|Error/);
    await waitFor(async () => (await listenerConnections()) === 0 || null, 10_000, 100);
  }, 90_000);

  (pgbouncerAvailable() ? it : it.skip)(
    'with DATABASE_URL through a transaction-mode PgBouncer it listens on DATABASE_DIRECT_URL, and hears the hits',
    async () => {
      const bouncer = await startPgBouncer({ upstream: testServiceUrls().postgres, poolSize: 2 });
      try {
        const cli = spawnCli(['listen', '--monitor', monitors.demo_news!], {
          ...env,
          DATABASE_URL: bouncer.pooled(dbHandle.directUrl),
          DATABASE_DIRECT_URL: dbHandle.directUrl,
        });
        started.push(cli);
        await waitFor(() => cli.err.join('').includes('listening for hits') || null, 60_000, 50);
        const tweet = await createSocialTweet(db, { authorUsername: 'demo_news', text: 'Heard past the pooler' });
        await waitFor(() => cli.out.join('').includes(tweet.id) || null, 30_000, 50);
        ctrlC(cli);
        expect(await cli.exited).toBe(0);
        expect(cli.out.join('')).toMatch(/1 hit\(s\) shown\n$/);
      } finally {
        await bouncer.stop();
      }
    },
    90_000,
  );

  it('--monitor shows only the monitors named, --json prints one object per hit', async () => {
    const cli = spawnCli(['listen', '--monitor', monitors.demo_dev!, '--json'], env);
    started.push(cli);
    await waitFor(() => cli.err.join('').includes('listening for hits') || null, 60_000, 50);
    expect(cli.err.join('')).toContain(`monitor ${monitors.demo_dev} (@demo_dev)`);
    const other = await createSocialTweet(db, { authorUsername: 'demo_news', text: 'not for this listener' });
    const mine = await createSocialTweet(db, { authorUsername: 'demo_dev', text: 'A new release is out' });
    const json = await waitFor(
      () =>
        cli.out
          .join('')
          .split('\n')
          .find((l) => l.includes(mine.id)) ?? null,
      30_000,
      50,
    );
    const shown = JSON.parse(json) as ListenedHit;
    expect(shown).toMatchObject({
      monitor_id: monitors.demo_dev,
      target: 'demo_dev',
      tweet_id: mine.id,
      author: 'demo_dev',
      text: 'A new release is out',
      tweet_created_at: mine.createdAt.toISOString(),
    });
    expect(shown.detected_ms).toBe(Date.parse(shown.detected_at) - mine.createdAt.getTime());
    // the other monitor's hit was recorded, and not shown
    await waitFor(() => db.hit.findFirst({ where: { tweetId: other.id } }), 30_000, 100);
    ctrlC(cli);
    expect(await cli.exited).toBe(0);
    expect(cli.out.join('')).not.toContain(other.id);
    expect(cli.out.join('').trim().split('\n').pop()).toBe('{"hits":1}');
  }, 90_000);

  it('bad input is a clear usage error (exit 2), and nothing listens', async () => {
    const other = await db.account.create({ data: { email: 'other@example.com', plan: 'starter' } });
    const foreign = await db.monitor.create({
      data: { accountId: other.id, targetUsername: 'demo_space', targetKey: 'demo_space', keywords: [] },
    });
    const cases: [string[], RegExp][] = [
      [
        ['listen', '--monitor', '00000000-0000-4000-8000-000000000000'],
        /no monitor 00000000-0000-4000-8000-000000000000/,
      ],
      [['listen', '--monitor', 'nope'], /--monitor must be a monitor id \(a UUID\): nope/],
      [['listen', '--account', accountId, '--monitor', foreign.id], /belongs to another account/],
      [['listen', '--account', '00000000-0000-4000-8000-000000000001'], /no account/],
      [['listen', '--account', 'x'], /--account must be an account id/],
      [['listen', '--bogus'], /Unknown option '--bogus'/],
    ];
    for (const [args, message] of cases) {
      const r = await runCli(args, env);
      expect({ args, code: r.code, stderr: r.stderr }).toMatchObject({
        code: 2,
        stderr: expect.stringMatching(message),
      });
      expect(r.stderr).toContain('usage: npm run cli -- listen');
    }
    // without --account and without a demo account
    const empty = await createTestDatabase();
    try {
      const r = await runCli(['listen'], { ...env, DATABASE_URL: empty.url });
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/no --account given and no demo account \(demo@example.com\); run npm run cli -- seed/);
    } finally {
      await empty.drop();
    }
    // as a process: the exit code is 2
    const cli = spawnCli(['listen', '--monitor', 'nope'], env);
    expect(await cli.exited).toBe(2);
    expect(await listenerConnections()).toBe(0);
  }, 90_000);

  it('reads notifications defensively and prints one clean line', () => {
    expect(parseNotification('not json')).toBeNull();
    expect(parseNotification('{"account":"a","monitor":"m"}')).toBeNull();
    const ids = Array.from({ length: 150 }, (_, i) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`);
    expect(
      parseNotification(JSON.stringify({ account: 'a', monitor: 'm', hits: [...ids, 'x', 3] }))!.hits,
    ).toHaveLength(100);
    const line = hitLine({
      hit_id: 'h',
      monitor_id: '12345678-aaaa-4000-8000-000000000000',
      target: 't',
      tweet_id: '42',
      author: 'someone',
      text: `two\nlines and "quotes" ${'x'.repeat(100)}`,
      tweet_created_at: '2026-11-25T10:00:00.000Z',
      detected_at: '2026-11-25T10:00:00.020Z',
      recorded_at: '2026-11-25T10:00:00.031Z',
      detected_ms: 20,
      recorded_ms: 31,
    });
    expect(line).not.toContain('\n');
    expect(line).toContain('@someone: "two lines and \\"quotes\\" xxx');
    expect(line).toContain('…"  (tweet 42, monitor 12345678)  detected 20 ms, recorded 31 ms after the post');
  });
});
