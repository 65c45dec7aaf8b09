import { Client } from 'pg';
import { createTestDatabase, createTestRedis, startFakeX } from '@sts/testing';
import { runCli } from '../main';

interface Report {
  since: string;
  resources: { resource: string; count: number; priceUsd: number; costUsd: number }[];
  accounts: { account: string | null; post_read: number; user_read: number; activity_event: number; costUsd: number }[];
  count: number;
  totalUsd: number;
}

describe('x cost (real PostgreSQL)', () => {
  let t: Awaited<ReturnType<typeof createTestDatabase>>;
  let pg: Client;
  let env: NodeJS.ProcessEnv;
  const now = new Date();
  const today = now.toISOString().slice(0, 10);
  const monthStart = `${today.slice(0, 8)}01`;

  beforeAll(async () => {
    t = await createTestDatabase();
    pg = new Client({ connectionString: t.url });
    await pg.connect();
    env = { DATABASE_URL: t.url };
    const { rows } = await pg.query<{ id: string }>(
      `INSERT INTO accounts (email) VALUES ('c@example.com') RETURNING id`,
    );
    for (const u of ['alice', 'bob'])
      await pg.query(`INSERT INTO monitors (account_id, target_username, target_key) VALUES ($1, $2, $2)`, [
        rows[0]!.id,
        u,
      ]);
    // alice: 3 posts, 1 user, 2 events; bob: 1 post, 1 user; an author no monitor watches: 2 posts;
    // and a read of the previous month that the default period leaves out
    const reads: [string, string, string | null][] = [
      ['post_read', '1', 'alice'],
      ['post_read', '2', 'alice'],
      ['post_read', '3', 'alice'],
      ['user_read', '10', 'alice'],
      ['activity_event', 'e1', 'alice'],
      ['activity_event', 'e2', 'alice'],
      ['post_read', '4', 'bob'],
      ['user_read', '11', 'bob'],
      ['post_read', '5', 'zed'],
      ['post_read', '6', null],
    ];
    for (const [resource, id, account] of reads)
      await pg.query(
        `INSERT INTO x_billable_reads (day, resource, resource_id, account, read_at) VALUES ($1, $2, $3, $4, $5)`,
        [today, resource, id, account, now],
      );
    const before = new Date(Date.parse(`${monthStart}T00:00:00Z`) - 3_600_000);
    await pg.query(
      `INSERT INTO x_billable_reads (day, resource, resource_id, account, read_at) VALUES ($1, 'post_read', '1', 'alice', $2)`,
      [before.toISOString().slice(0, 10), before],
    );
  });
  afterAll(async () => {
    await pg.end();
    await t.drop();
  });

  it('prices the month so far per resource and per watched account, and the lines add up to the total', async () => {
    const r = await runCli(['x', 'cost', '--json'], env);
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout) as Report;
    expect(report.since).toBe(`${monthStart}T00:00:00.000Z`);
    expect(report.resources).toEqual([
      { resource: 'post_read', count: 6, priceUsd: 0.005, costUsd: 0.03 },
      { resource: 'user_read', count: 2, priceUsd: 0.01, costUsd: 0.02 },
      { resource: 'activity_event', count: 2, priceUsd: 0.005, costUsd: 0.01 },
    ]);
    expect(report.count).toBe(10);
    expect(report.totalUsd).toBe(0.06);
    expect(report.accounts).toEqual([
      { account: 'alice', post_read: 3, user_read: 1, activity_event: 2, costUsd: 0.035 },
      { account: 'bob', post_read: 1, user_read: 1, activity_event: 0, costUsd: 0.015 },
      { account: null, post_read: 2, user_read: 0, activity_event: 0, costUsd: 0.01 },
    ]);
    const sum = (xs: { costUsd: number }[]) => Math.round(xs.reduce((s, x) => s + x.costUsd, 0) * 1e9) / 1e9;
    expect(sum(report.resources)).toBe(report.totalUsd);
    expect(sum(report.accounts)).toBe(report.totalUsd);

    const text = await runCli(['x', 'cost'], env);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/post_read\s+6\s+0\.005\s+0\.0300/);
    expect(text.stdout).toMatch(/total\s+10\s+0\.0600/);
    expect(text.stdout).toMatch(/alice\s+3\s+1\s+2\s+0\.0350/);
    expect(text.stdout).toMatch(/\(no watched account\)\s+2\s+0\s+0\s+0\.0100/);
  });

  it('--since reaches back and the prices come from X_PRICE_*', async () => {
    const r = await runCli(['x', 'cost', '--since', '2000-01-01', '--json'], {
      ...env,
      X_PRICE_POST_READ: '0.01',
      X_PRICE_USER_READ: '0',
      X_PRICE_EVENT: '0.1',
    });
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout) as Report;
    expect(report.resources.map((x) => [x.resource, x.count, x.costUsd])).toEqual([
      ['post_read', 7, 0.07],
      ['user_read', 2, 0],
      ['activity_event', 2, 0.2],
    ]);
    expect(report.totalUsd).toBe(0.27);
    // a time after the reads: nothing in the period
    const later = await runCli(['x', 'cost', '--since', new Date(Date.now() - 1).toISOString()], env);
    expect(later.code).toBe(0);
    expect(later.stdout).toContain('no X reads recorded in the period');
  });

  it("the CLI's own X reads (a monitor preview on X) are billed and show in the estimate", async () => {
    const fake = await startFakeX({ bearerToken: 'cli-token' });
    const redis = createTestRedis();
    fake.state.addUser({ username: 'Bob', id: '2002' });
    const post = fake.state.post({ author: 'Bob', text: 'previewed on X' });
    try {
      const { rows } = await pg.query<{ id: string }>(`SELECT id FROM accounts LIMIT 1`);
      const preview = await runCli(['monitor', 'preview', '--account', rows[0]!.id, '--target', 'bob', '--json'], {
        ...env,
        SOCIAL_SOURCE: 'x',
        X_BEARER_TOKEN: 'cli-token',
        X_API_BASE_URL: fake.url,
        REDIS_URL: redis.url,
        REDIS_KEY_PREFIX: redis.prefix,
      });
      expect(preview.code).toBe(0);
      const billed = await pg.query<{ resource: string; resource_id: string; account: string }>(
        `SELECT resource, resource_id, account FROM x_billable_reads WHERE resource_id IN ($1, '2002') ORDER BY resource`,
        [post.id],
      );
      expect(billed.rows).toEqual([
        { resource: 'post_read', resource_id: post.id, account: 'bob' },
        { resource: 'user_read', resource_id: '2002', account: 'bob' },
      ]);
      const report = JSON.parse((await runCli(['x', 'cost', '--json'], env)).stdout) as Report;
      expect(report.accounts.find((a) => a.account === 'bob')).toEqual({
        account: 'bob',
        post_read: 2,
        user_read: 2,
        activity_event: 0,
        costUsd: 0.03,
      });
    } finally {
      await pg.query(`DELETE FROM x_billable_reads WHERE resource_id IN ($1, '2002')`, [post.id]);
      await fake.stop();
      await redis.cleanup();
    }
  });

  it.each([['yesterday'], ['2026-02-30'], ['2026-12-01T08:00'], ['2999-01-01']])(
    '--since %s is refused with exit 2, naming the flag',
    async (since) => {
      const r = await runCli(['x', 'cost', '--since', since], env);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/^--since /);
      expect(r.stdout).toBe('');
    },
  );

  it.each([['X_PRICE_POST_READ'], ['X_PRICE_USER_READ'], ['X_PRICE_EVENT']])(
    'a price that is not a number (%s) is refused with exit 2, naming the variable',
    async (name) => {
      const r = await runCli(['x', 'cost'], { ...env, [name]: 'five cents' });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(name);
      const negative = await runCli(['x', 'cost'], { ...env, [name]: '-1' });
      expect(negative.code).toBe(2);
      expect(negative.stderr).toContain(name);
    },
  );
});
