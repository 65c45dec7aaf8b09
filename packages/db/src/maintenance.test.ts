import { Client } from 'pg';
import { createTestDatabase } from '@sts/testing';
import { createDbClient, type Db } from './client';
import { DEFAULT_RETENTION, runMaintenance, weekStart, type RetentionPolicy } from './maintenance';

const DAY = 86_400_000;
const NOW = new Date('2027-06-16T12:00:00Z'); // a Wednesday; its week starts 2027-06-14
const policy: RetentionPolicy = { ...DEFAULT_RETENTION, batchSize: 100, maxBatches: 3 };

describe('maintenance step', () => {
  let t: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;
  let pg: Client;
  let monitorId: string;

  const partitions = async (table: string) =>
    (
      await pg.query<{ name: string }>(
        `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
         WHERE i.inhparent = $1::regclass ORDER BY 1`,
        [table],
      )
    ).rows.map((r) => r.name);
  const count = async (sql: string) =>
    (await pg.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${sql}`)).rows[0]!.n;

  beforeAll(async () => {
    t = await createTestDatabase();
    db = createDbClient({ url: t.url, poolSize: 4 });
    pg = new Client({ connectionString: t.url });
    await pg.connect();
    const { rows: a } = await pg.query<{ id: string }>(
      `INSERT INTO accounts (email) VALUES ('m@example.com') RETURNING id`,
    );
    const { rows: m } = await pg.query<{ id: string }>(
      `INSERT INTO monitors (account_id, target_username, target_key) VALUES ($1, 'u', 'u') RETURNING id`,
      [a[0]!.id],
    );
    monitorId = m[0]!.id;
    // weeks 20 and 15 weeks before NOW (past 90 days), and this week
    for (const w of ['2027-01-25', '2027-03-01']) {
      await pg.query(`SELECT create_week_partition('hits', $1::date)`, [w]);
      await pg.query(`SELECT create_week_partition('delivery_attempts', $1::date)`, [w]);
    }
    await pg.query(`SELECT create_week_partition('hits', '2027-06-14')`);
    await pg.query(`SELECT create_week_partition('hits', '2027-03-15')`);
    await pg.query(`SELECT create_week_partition('delivery_attempts', '2027-06-14')`);
    await pg.query(
      `INSERT INTO hits (monitor_id, tweet_id, tweet_text, tweet_author_id, tweet_author_username, tweet_created_at)
       SELECT $1::uuid, 'old' || n, 'x', '1', 'u', timestamptz '2027-01-26Z' + (n % 5) * interval '1 day' FROM generate_series(1, 1000) n
       UNION ALL SELECT $1::uuid, 'mid' || n, 'x', '1', 'u', timestamptz '2027-03-02Z' FROM generate_series(1, 10) n
       UNION ALL SELECT $1::uuid, 'new' || n, 'x', '1', 'u', $2::timestamptz - n * interval '1 minute' FROM generate_series(1, 10) n
       UNION ALL SELECT $1::uuid, 'edge', 'x', '1', 'u', timestamptz '2027-03-19Z'
       UNION ALL SELECT $1::uuid, 'ancient' || n, 'x', '1', 'u', timestamptz '2001-01-01Z' FROM generate_series(1, 3) n`,
      [monitorId, NOW],
    );
    await pg.query(
      `INSERT INTO delivery_attempts (monitor_id, event, delivery_id, url, outcome, created_at)
       SELECT $1, 'monitor.hit', 'd' || n, 'u', 'delivered', CASE WHEN n <= 500 THEN timestamptz '2027-03-03Z' ELSE $2::timestamptz END
       FROM generate_series(1, 510) n`,
      [monitorId, NOW],
    );
    // 450 published long ago (more than 3 batches of 100), 5 published just now, 5 never published
    await pg.query(
      `INSERT INTO outbox (routing_key, message_id, payload, created_at, published_at)
       SELECT 'monitor.hit', 'm' || n, '{}', $1::timestamptz - interval '3 days',
              CASE WHEN n <= 450 THEN $1::timestamptz - interval '2 days' WHEN n <= 455 THEN $1::timestamptz END
       FROM generate_series(1, 460) n`,
      [NOW],
    );
    await pg.query(
      `INSERT INTO account_events (dedup_key, routing_key, account_id, payload, created_at, published_at)
       SELECT 'e' || n, 'account.x', $2, '{}', $1::timestamptz - interval '100 days',
              CASE WHEN n <= 3 THEN $1::timestamptz - interval '95 days' END
       FROM generate_series(1, 5) n`,
      [NOW, a[0]!.id],
    );
    await pg.query(
      `INSERT INTO mail_outbox (dedup_key, kind, to_address, subject, text_body, html_body, created_at, sent_at)
       VALUES ('sent-old', 'k', 'a@b', 's', 't', 'h', $1::timestamptz - interval '40 days', $1::timestamptz - interval '40 days'),
              ('unsent-old', 'k', 'a@b', 's', 't', 'h', $1::timestamptz - interval '40 days', NULL),
              ('sent-new', 'k', 'a@b', 's', 't', 'h', $1::timestamptz - interval '1 day', $1::timestamptz - interval '1 day'),
              ('unsent-new', 'k', 'a@b', 's', 't', 'h', $1::timestamptz - interval '1 day', NULL)`,
      [NOW],
    );
    await pg.query(
      `INSERT INTO mail_notices (dedup_key, account_id, kind, spec, created_at, digested_at)
       VALUES ('notice-old', $2, 'quota', '{}', $1::timestamptz - interval '40 days', $1::timestamptz - interval '40 days'),
              ('notice-new', $2, 'quota', '{}', $1::timestamptz - interval '1 day', $1::timestamptz - interval '1 day'),
              ('notice-waiting', $2, 'quota', '{}', $1::timestamptz - interval '40 days', NULL)`,
      [NOW, a[0]!.id],
    );
    await pg.query(
      `INSERT INTO email_tokens (account_id, purpose, token_hash, expires_at)
       VALUES ($2, 'verify', repeat('a', 64), $1::timestamptz - interval '8 days'),
              ($2, 'verify', repeat('b', 64), $1::timestamptz - interval '1 day'),
              ($2, 'verify', repeat('c', 64), $1::timestamptz + interval '1 day')`,
      [NOW, a[0]!.id],
    );
    await pg.query(
      `INSERT INTO usage_daily (account_id, day, used) VALUES ($1, '2025-01-01', 5), ($1, '2027-06-01', 5)`,
      [a[0]!.id],
    );
    // what X billed: 401 days back goes (400 kept), yesterday stays
    await pg.query(
      `INSERT INTO x_billable_reads (day, resource, resource_id)
       VALUES (($1::timestamptz - interval '401 days')::date, 'post_read', 'old'),
              (($1::timestamptz - interval '1 day')::date, 'post_read', 'new')`,
      [NOW],
    );
    // coverage gaps: ended 31 days ago (pruned), ended 29 days ago and still open (kept)
    await pg.query(
      `INSERT INTO coverage_gaps (target_key, starts_at, ends_at, reason)
       VALUES ('old', $1::timestamptz - interval '32 days', $1::timestamptz - interval '31 days', 'stream_down'),
              ('recent', $1::timestamptz - interval '30 days', $1::timestamptz - interval '29 days', 'source_error'),
              ('open', $1::timestamptz - interval '40 days', NULL, 'budget_refused')`,
      [NOW],
    );
    // monitor events: 350 older than 30 days (more than 3 batches of 100), 5 from 29 days ago
    await pg.query(
      `INSERT INTO monitor_events (monitor_id, kind, payload, created_at)
       SELECT $1, 'monitor.profile_changed', '{}',
              CASE WHEN n <= 350 THEN $2::timestamptz - interval '31 days' ELSE $2::timestamptz - interval '29 days' END
       FROM generate_series(1, 355) n`,
      [monitorId, NOW],
    );
  });
  afterAll(async () => {
    await pg.end();
    await db.$disconnect();
    await t.drop();
  });

  it('weekStart is the UTC Monday', () => {
    expect(weekStart(NOW)).toBe('2027-06-14');
    expect(weekStart(new Date('2026-11-23T00:00:00Z'))).toBe('2026-11-23');
    expect(weekStart(new Date('2026-11-22T23:59:59Z'))).toBe('2026-11-16');
  });

  it('drops whole weeks past retention, creates the weeks ahead, prunes in bounded batches, and a second run does nothing', async () => {
    const first = await runMaintenance(db, policy, NOW);
    // hits: 90 days → weeks ending before 2027-03-18 go; delivery attempts: 30 days
    expect(first.dropped).toEqual(
      expect.arrayContaining([
        'delivery_attempts_p20270125',
        'delivery_attempts_p20270301',
        'hits_p20270125',
        'hits_p20270301',
      ]),
    );
    // the week holding the horizon stays (its last days are within retention)
    expect(first.dropped).not.toContain('hits_p20270315');
    expect(await partitions('hits')).toContain('hits_p20270315');
    expect(await count(`hits WHERE tweet_id = 'edge'`)).toBe(1);
    expect(first.created).toEqual(
      expect.arrayContaining(['hits_p20270712', 'delivery_attempts_p20270712', 'hits_p20270621']),
    );
    expect(first.created).not.toContain('hits_p20270719');
    expect(await partitions('hits')).toEqual(
      expect.arrayContaining(['hits_default', 'hits_p20270614', 'hits_p20270712']),
    );
    expect(await count(`hits WHERE tweet_id LIKE 'old%' OR tweet_id LIKE 'mid%'`)).toBe(0);
    expect(await count(`hits WHERE tweet_id LIKE 'new%'`)).toBe(10);
    expect(await count(`hits_default`)).toBe(0); // the 2001 rows, past retention: deleted in a batch
    expect(await count(`delivery_attempts`)).toBe(10);
    // outbox: 3 batches of 100 this run (bounded), the rest next run; unpublished and recent rows stay
    expect(first.pruned.outbox).toBe(300);
    expect(first.more).toBe(true);
    const second = await runMaintenance(db, policy, NOW);
    expect(second.pruned.outbox).toBe(150);
    // monitor events: bounded the same way (3 batches of 100, then the rest); the recent ones stay
    expect(first.pruned.monitor_events).toBe(300);
    expect(second.pruned.monitor_events).toBe(50);
    expect(await count(`monitor_events`)).toBe(5);
    expect(await count(`monitor_events WHERE created_at < '${new Date(NOW.getTime() - 30 * DAY).toISOString()}'`)).toBe(
      0,
    );
    expect(second.created).toEqual([]);
    expect(await count(`outbox`)).toBe(10);
    expect(await count(`outbox WHERE published_at IS NULL`)).toBe(5);
    expect(await count(`account_events`)).toBe(2); // the unpublished ones stay
    expect(
      (await pg.query<{ k: string }>(`SELECT dedup_key AS k FROM mail_outbox ORDER BY 1`)).rows.map((r) => r.k),
    ).toEqual(['sent-new', 'unsent-new']);
    // digested notices go with sent mail; a notice still waiting for its digest stays
    expect(
      (await pg.query<{ k: string }>(`SELECT dedup_key AS k FROM mail_notices ORDER BY 1`)).rows.map((r) => r.k),
    ).toEqual(['notice-new', 'notice-waiting']);
    expect(await count(`email_tokens`)).toBe(2);
    expect((await pg.query(`SELECT day::text FROM usage_daily`)).rows).toEqual([{ day: '2027-06-01' }]);
    expect((await pg.query(`SELECT resource_id AS id FROM x_billable_reads`)).rows).toEqual([{ id: 'new' }]);
    expect(first.pruned.coverage_gaps).toBe(1);
    expect(
      (await pg.query<{ k: string }>(`SELECT target_key AS k FROM coverage_gaps ORDER BY 1`)).rows.map((r) => r.k),
    ).toEqual(['open', 'recent']);

    const third = await runMaintenance(db, policy, NOW);
    expect(third).toMatchObject({ created: [], dropped: [], busy: [], more: false });
    expect(Object.values(third.pruned).every((n) => n === 0)).toBe(true);
  });

  it('a row that landed in the DEFAULT partition moves into its week when that week is created', async () => {
    const far = new Date(NOW.getTime() + 70 * DAY); // beyond the 4 weeks ahead
    await pg.query(
      `INSERT INTO hits (monitor_id, tweet_id, tweet_text, tweet_author_id, tweet_author_username, tweet_created_at)
       VALUES ($1, 'future', 'x', '1', 'u', $2)`,
      [monitorId, far],
    );
    expect((await pg.query(`SELECT tableoid::regclass::text AS p FROM hits WHERE tweet_id = 'future'`)).rows[0].p).toBe(
      'hits_default',
    );
    const later = await runMaintenance(db, policy, new Date(NOW.getTime() + 42 * DAY));
    const week = `hits_p${weekStart(far).replaceAll('-', '')}`;
    expect(later.created).toContain(week);
    expect((await pg.query(`SELECT tableoid::regclass::text AS p FROM hits WHERE tweet_id = 'future'`)).rows[0].p).toBe(
      week,
    );
  });

  it('drops a week a previous run detached but did not get to drop', async () => {
    await pg.query(`SELECT create_week_partition('delivery_attempts', '2027-01-04')`);
    await pg.query(`ALTER TABLE delivery_attempts DETACH PARTITION delivery_attempts_p20270104`);
    const r = await runMaintenance(db, policy, NOW);
    expect(r.dropped).toContain('delivery_attempts_p20270104');
    expect((await pg.query(`SELECT to_regclass('delivery_attempts_p20270104') AS t`)).rows[0].t).toBeNull();
    expect(r.lockMs).toBeGreaterThan(0);
  });

  it('runs from several places at once without errors or double work', async () => {
    const others = [createDbClient({ url: t.url, poolSize: 2 }), createDbClient({ url: t.url, poolSize: 2 })];
    try {
      await pg.query(
        `INSERT INTO outbox (routing_key, message_id, payload, published_at)
         SELECT 'monitor.hit', 'c' || n, '{}', now() - interval '3 days' FROM generate_series(1, 1000) n`,
      );
      await pg.query(
        `INSERT INTO monitor_events (monitor_id, kind, payload, created_at)
         SELECT $1, 'monitor.target_unavailable', '{}', now() - interval '40 days' FROM generate_series(1, 1000) n`,
        [monitorId],
      );
      const eventsBefore = await count(`monitor_events`);
      const at = new Date(Date.now() + 200 * DAY); // every week so far is past retention
      const runs = await Promise.all(
        [db, ...others].map((d) => runMaintenance(d, { ...policy, batchSize: 50, maxBatches: 100 }, at)),
      );
      const dropped = runs.flatMap((r) => r.dropped);
      expect(new Set(dropped).size).toBe(dropped.length); // no week dropped twice
      expect(runs.reduce((n, r) => n + (r.pruned.outbox ?? 0), 0)).toBeGreaterThanOrEqual(1000);
      expect(await count(`outbox WHERE message_id LIKE 'c%'`)).toBe(0);
      // the runners divided the old events: each deleted once, none left
      const eventsPruned = runs.reduce((n, r) => n + (r.pruned.monitor_events ?? 0), 0);
      expect(eventsPruned).toBe(eventsBefore - (await count(`monitor_events`)));
      expect(await count(`monitor_events WHERE kind = 'monitor.target_unavailable'`)).toBe(0);
      expect(await partitions('hits')).toEqual(expect.arrayContaining([`hits_p${weekStart(at).replaceAll('-', '')}`]));
      expect((await partitions('hits')).filter((p) => p < `hits_p${weekStart(at).replaceAll('-', '')}`)).toEqual([
        'hits_default',
      ]);
    } finally {
      await Promise.all(others.map((o) => o.$disconnect()));
    }
  });
});
