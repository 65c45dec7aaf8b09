/**
 * `monitor create --query` on real PostgreSQL: a query monitor saved with its query and no
 * username; --username (another name of --target) and --query are mutually exclusive (exit 2,
 * a clear message, nothing saved); a refused query names the part; list shows the query.
 */
import { randomBytes } from 'node:crypto';
import { createDbClient, type Db } from '@sts/db';
import { createTestDatabase } from '@sts/testing';
import { runCli } from '../main';
import { allCommands } from './index';

describe('monitor create --query', () => {
  let testDb: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;
  let env: NodeJS.ProcessEnv;
  let accountId: string;

  const cli = (...argv: string[]) => runCli(argv, env, allCommands);

  beforeAll(async () => {
    testDb = await createTestDatabase();
    db = createDbClient({ url: testDb.url, poolSize: 2 });
    env = { DATABASE_URL: testDb.url, SECRETS_ENCRYPTION_KEY: randomBytes(32).toString('hex') };
    accountId = (await db.account.create({ data: { email: 'cli-query@example.test', plan: 'starter' } })).id;
  });

  afterAll(async () => {
    await db.$disconnect();
    await testDb.drop();
  });

  it('creates a query monitor and lists it with its query', async () => {
    const query = '"new release" OR launch -giveaway lang:en';
    const r = await cli('monitor', 'create', '--account', accountId, '--query', query, '--json');
    expect(r.code).toBe(0);
    const { id } = JSON.parse(r.stdout) as { id: string };
    expect(await db.monitor.findUniqueOrThrow({ where: { id } })).toMatchObject({
      query,
      targetUsername: null,
      targetKey: null,
    });
    const text = await cli('monitor', 'create', '--account', accountId, '--query', 'rocket OR moon');
    expect(text.stdout).toContain('watching query: rocket OR moon');
    const list = await cli('monitor', 'list', '--account', accountId, '--json');
    const rows = (
      JSON.parse(list.stdout) as { data: { id: string; query: string | null; target_username: string | null }[] }
    ).data;
    expect(rows.find((m) => m.id === id)).toMatchObject({ query, target_username: null });
    // --username is --target
    const user = await cli('monitor', 'create', '--account', accountId, '--username', 'alice', '--json');
    expect(user.code).toBe(0);
    const userId = (JSON.parse(user.stdout) as { id: string }).id;
    expect(await db.monitor.findUniqueOrThrow({ where: { id: userId } })).toMatchObject({
      targetUsername: 'alice',
      query: null,
    });
  });

  it.each([
    [['--username', 'alice', '--query', 'launch'], /--username \(--target\) and --query are mutually exclusive/],
    [['--target', 'alice', '--query', 'launch'], /--username \(--target\) and --query are mutually exclusive/],
    [['--target', 'alice', '--username', 'bob'], /--target and --username are the same flag/],
    [[], /--target USERNAME \(or --username\) or --query QUERY is required/],
    [['--query', ''], /--query: the query is empty/],
    [['--query', 'x'.repeat(1000)], /--query: the query is 1000 characters; at most 512/],
    [['--query', 'launch has:links'], /--query: unknown operator "has:" in "has:links"/],
    [['--query=-giveaway lang:en'], /--query: the query would match every post/],
    [['--query', 'launch', '--keywords', 'rocket'], /--keywords: a query monitor takes no keywords/],
  ])('refuses %j with exit 2 and a clear message, nothing saved', async (flags, message) => {
    const before = await db.monitor.count();
    const r = await cli('monitor', 'create', '--account', accountId, ...flags);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(message);
    expect(await db.monitor.count()).toBe(before);
  });
});
