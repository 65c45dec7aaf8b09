import { Client } from 'pg';
import { createTestDatabase } from '@sts/testing';
import { runCli } from '../main';

describe('maintenance run (real PostgreSQL)', () => {
  let t: Awaited<ReturnType<typeof createTestDatabase>>;
  let pg: Client;

  beforeAll(async () => {
    t = await createTestDatabase();
    pg = new Client({ connectionString: t.url });
    await pg.connect();
  });
  afterAll(async () => {
    await pg.end();
    await t.drop();
  });

  it('drops a week past the longest plan retention, keeps one within it, and is idempotent', async () => {
    // a week 40 days back: past Free's 30 days but within Starter's 90, so storage keeps it;
    // a week 120 days back is past every plan
    const weeks = await pg.query<{ keep: string; drop: string }>(
      `SELECT date_trunc('week', (now() - interval '40 days') AT TIME ZONE 'UTC')::date::text AS keep,
              date_trunc('week', (now() - interval '120 days') AT TIME ZONE 'UTC')::date::text AS drop`,
    );
    const { keep, drop } = weeks.rows[0]!;
    await pg.query(`SELECT create_week_partition('hits', $1::date), create_week_partition('hits', $2::date)`, [
      keep,
      drop,
    ]);
    const name = (w: string) => `hits_p${w.replaceAll('-', '')}`;
    const env = { DATABASE_URL: t.url };
    const first = await runCli(['maintenance', 'run', '--json'], env);
    expect(first.code).toBe(0);
    const report = JSON.parse(first.stdout) as { dropped: string[]; policy: { hitsDays: number } };
    expect(report.policy.hitsDays).toBe(90);
    expect(report.dropped).toContain(name(drop));
    expect(report.dropped).not.toContain(name(keep));
    const again = await runCli(['maintenance', 'run'], env);
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/partitions created: none\n\s+partitions dropped: none/);

    // a shorter Starter retention (and Free's) makes storage keep less: the 40-day week goes
    const shorter = await runCli(['maintenance', 'run', '--json'], {
      ...env,
      PLAN_STARTER_HIT_RETENTION_DAYS: '14',
      PLAN_FREE_HIT_RETENTION_DAYS: '7',
    });
    expect(JSON.parse(shorter.stdout).dropped).toContain(name(keep));
  });

  it('bad settings: exit 2 naming the variable, nothing done', async () => {
    const before = await pg.query(`SELECT count(*) FROM pg_inherits WHERE inhparent = 'hits'::regclass`);
    const r = await runCli(['maintenance', 'run'], { DATABASE_URL: t.url, PLAN_FREE_HIT_RETENTION_DAYS: 'abc' });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('PLAN_FREE_HIT_RETENTION_DAYS');
    const zero = await runCli(['maintenance', 'run'], { DATABASE_URL: t.url, MAINTENANCE_BATCH_SIZE: '0' });
    expect(zero.code).toBe(2);
    expect(zero.stderr).toContain('MAINTENANCE_BATCH_SIZE');
    const after = await pg.query(`SELECT count(*) FROM pg_inherits WHERE inhparent = 'hits'::regclass`);
    expect(after.rows).toEqual(before.rows);
  });
});
