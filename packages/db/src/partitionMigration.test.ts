/**
 * The partitioning migration on a database that already holds data: migrations up to the one
 * before it, rows in place (recent, old, one week far in the past), then the rest: every row is
 * still there, in a week partition, and the keys still hold.
 */
import type { Client } from 'pg';
import { migrate } from './migrate';
import { databaseBefore, type DatabaseBefore } from '../test/databaseBefore';
import { schemaDrift } from '../test/schemaDrift';

const PARTITIONING = '20261125120000_partitioned_retention';

describe('the partitioning migration on a database with rows', () => {
  let db: DatabaseBefore;
  let c: Client;

  beforeAll(async () => {
    db = await databaseBefore(PARTITIONING, 'partmig');
    c = db.client;
  });
  afterAll(async () => {
    await db.close();
  });

  it('keeps every hit and delivery attempt, partitions them by week, and the keys still hold', async () => {
    const { rows: acct } = await c.query<{ id: string }>(
      `INSERT INTO accounts (email) VALUES ('owner@example.com') RETURNING id`,
    );
    const { rows: mons } = await c.query<{ id: string }>(
      `INSERT INTO monitors (account_id, target_username, target_key)
       SELECT $1, 'user' || n, 'user' || n FROM generate_series(1, 2) n RETURNING id`,
      [acct[0]!.id],
    );
    const [m1, m2] = mons.map((m) => m.id);
    // 300 recent hits over 20 days, 5 from 2019 (the week of 2019-06-03), for two monitors
    await c.query(
      `INSERT INTO hits (monitor_id, tweet_id, tweet_text, tweet_author_id, tweet_author_username, tweet_created_at, detected_at)
       SELECT CASE WHEN n % 2 = 0 THEN $1::uuid ELSE $2::uuid END, 't' || n, 'text ' || n, '42', 'user',
              now() - n * interval '96 minutes', now() - n * interval '95 minutes'
       FROM generate_series(1, 300) n
       UNION ALL
       SELECT $1::uuid, 'old' || n, 'old', '42', 'user', timestamptz '2019-06-05 12:00Z' + n * interval '1 hour', now()
       FROM generate_series(1, 5) n`,
      [m1, m2],
    );
    await c.query(
      `INSERT INTO delivery_attempts (monitor_id, hit_id, event, delivery_id, url, outcome, status_code, created_at, request_body)
       SELECT h.monitor_id, h.id, 'monitor.hit', 'd-' || h.tweet_id, 'https://example.com/hook', 'delivered', 200, h.detected_at, 'body'
       FROM hits h`,
    );
    // the hits' and attempts' columns of that time (later migrations add some)
    const { rows: cols } = await c.query<{ name: string }>(
      `SELECT quote_ident(column_name) AS name FROM information_schema.columns
        WHERE table_schema = current_schema() AND table_name = 'delivery_attempts' ORDER BY ordinal_position`,
    );
    const attemptRow = `row(${cols.map((col) => `a.${col.name}`).join(', ')})`;
    const snapshot = async () =>
      (
        await c.query<{ h: string; a: string }>(
          `SELECT (SELECT string_agg(md5(row(h.id, h.monitor_id, h.tweet_id, h.tweet_text, h.tweet_author_id,
                     h.tweet_author_username, h.tweet_created_at, h.detected_at)::text), ',' ORDER BY id) FROM hits h) AS h,
                  (SELECT string_agg(md5(${attemptRow}::text), ',' ORDER BY id) FROM delivery_attempts a) AS a`,
        )
      ).rows[0]!;
    const was = await snapshot();

    const r = await migrate(db.url);
    expect(r.applied[0]).toBe(PARTITIONING);

    expect(await snapshot()).toEqual(was);
    const counts = await c.query<{ t: string; n: number }>(
      `SELECT 'hits' AS t, count(*)::int AS n FROM hits UNION ALL SELECT 'attempts', count(*)::int FROM delivery_attempts`,
    );
    expect(counts.rows).toEqual([
      { t: 'hits', n: 305 },
      { t: 'attempts', n: 305 },
    ]);
    const kinds = await c.query<{ relname: string; relkind: string }>(
      `SELECT relname, relkind::text FROM pg_class WHERE relname IN ('hits', 'delivery_attempts') ORDER BY relname`,
    );
    expect(kinds.rows.map((k) => k.relkind)).toEqual(['p', 'p']);
    // every row sits in its week's partition, none in the default one
    const placed = await c.query<{ part: string; n: number }>(
      `SELECT tableoid::regclass::text AS part, count(*)::int AS n FROM hits GROUP BY 1 ORDER BY 1`,
    );
    expect(placed.rows.map((p) => p.part)).toContain('hits_p20190603');
    expect(placed.rows.find((p) => p.part === 'hits_p20190603')?.n).toBe(5);
    expect(placed.rows.some((p) => p.part === 'hits_default')).toBe(false);
    const monday = await c.query<{ name: string }>(
      `SELECT 'hits_p' || to_char(date_trunc('week', now() AT TIME ZONE 'UTC') + interval '28 days', 'YYYYMMDD') AS name`,
    );
    expect((await c.query(`SELECT to_regclass($1) AS r`, [monday.rows[0]!.name])).rows[0].r).not.toBeNull();

    // unique (monitor_id, tweet_id) holds: the same tweet again (same creation time) is refused
    await expect(
      c.query(
        `INSERT INTO hits (monitor_id, tweet_id, tweet_text, tweet_author_id, tweet_author_username, tweet_created_at)
         SELECT monitor_id, tweet_id, 'again', '42', 'user', tweet_created_at FROM hits WHERE tweet_id = 't2'`,
      ),
    ).rejects.toThrow(/duplicate key/);
    // the monitor foreign key holds and still cascades into every partition
    await expect(
      c.query(
        `INSERT INTO hits (monitor_id, tweet_id, tweet_text, tweet_author_id, tweet_author_username, tweet_created_at)
         VALUES ('00000000-0000-4000-8000-000000000000', 'x', 'x', '42', 'user', now())`,
      ),
    ).rejects.toThrow(/foreign key/);
    await c.query(`DELETE FROM monitors WHERE id = $1`, [m1]);
    const left = await c.query<{ h: number; a: number }>(
      `SELECT (SELECT count(*)::int FROM hits) AS h, (SELECT count(*)::int FROM delivery_attempts) AS a`,
    );
    expect(left.rows[0]).toEqual({ h: 150, a: 150 });
    expect(await schemaDrift(db.url)).toEqual([]);
  });
});
