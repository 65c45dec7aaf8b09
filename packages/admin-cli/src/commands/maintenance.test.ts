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

  it('prunes monitor events past the delivery log (the longest plan), keeping recent ones', async () => {
    const { rows: a } = await pg.query<{ id: string }>(
      `INSERT INTO accounts (email) VALUES ('ev@example.com') RETURNING id`,
    );
    const { rows: m } = await pg.query<{ id: string }>(
      `INSERT INTO monitors (account_id, target_username, target_key) VALUES ($1, 'ev', 'ev') RETURNING id`,
      [a[0]!.id],
    );
    await pg.query(
      `INSERT INTO monitor_events (monitor_id, kind, payload, created_at)
       VALUES ($1, 'monitor.profile_changed', '{"n":"old"}', now() - interval '31 days'),
              ($1, 'monitor.profile_changed', '{"n":"mid"}', now() - interval '20 days'),
              ($1, 'monitor.target_unavailable', '{"n":"new"}', now() - interval '1 day')`,
      [m[0]!.id],
    );
    const left = async () =>
      (await pg.query<{ n: string }>(`SELECT payload->>'n' AS n FROM monitor_events ORDER BY created_at`)).rows.map(
        (r) => r.n,
      );
    const r = await runCli(['maintenance', 'run', '--json'], { DATABASE_URL: t.url });
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout) as { pruned: Record<string, number>; policy: { monitorEventsDays: number } };
    expect(report.policy.monitorEventsDays).toBe(30);
    expect(report.pruned.monitor_events).toBe(1);
    expect(await left()).toEqual(['mid', 'new']);
    // a shorter delivery log on every plan keeps fewer events
    const shorter = await runCli(['maintenance', 'run'], {
      DATABASE_URL: t.url,
      PLAN_STARTER_DELIVERY_LOG_RETENTION_DAYS: '14',
      PLAN_FREE_DELIVERY_LOG_RETENTION_DAYS: '7',
    });
    expect(shorter.stdout).toMatch(/monitor_events 1/);
    expect(await left()).toEqual(['new']);
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
