/**
 * The migration that gives hits their commit-order key, on a database that already holds hits (in
 * a week partition and in the DEFAULT one): every row is kept with xid 1, new rows get their
 * transaction's id, a week partition made later has the column and its default, and the index
 * exists on every partition.
 */
import { cp, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { migrate, loadMigrations, MIGRATIONS_DIR } from './migrate';
import { schemaDrift } from '../test/schemaDrift';

const HITS_XID = '20261126100000_hits_commit_xid';

async function emptyDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  const base = process.env.TEST_POSTGRES_URL;
  if (!base) throw new Error('TEST_POSTGRES_URL is not set');
  const name = `sts_t_xidmig_${process.pid}_${Date.now()}`;
  const admin = new Client({ connectionString: base });
  await admin.connect();
  await admin.query(`CREATE DATABASE "${name}" TEMPLATE template0`);
  await admin.end();
  const url = new URL(base);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const c = new Client({ connectionString: base });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await c.end();
    },
  };
}

describe('the hits commit-xid migration on a database with rows', () => {
  let db: Awaited<ReturnType<typeof emptyDatabase>>;
  let c: Client;
  let before: string;

  beforeAll(async () => {
    db = await emptyDatabase();
    before = await mkdtemp(path.join(os.tmpdir(), 'mig-before-'));
    for (const m of await loadMigrations())
      if (m.name < HITS_XID)
        await cp(path.join(MIGRATIONS_DIR, m.name), path.join(before, m.name), { recursive: true });
    await migrate(db.url, { dir: before });
    c = new Client({ connectionString: db.url });
    await c.connect();
  });
  afterAll(async () => {
    await c.end();
    await db.drop();
    await rm(before, { recursive: true, force: true });
  });

  it('keeps every hit (xid 1), stamps new ones with their transaction, and indexes every partition', async () => {
    const { rows: acct } = await c.query<{ id: string }>(
      `INSERT INTO accounts (email) VALUES ('owner@example.com') RETURNING id`,
    );
    const { rows: mon } = await c.query<{ id: string }>(
      `INSERT INTO monitors (account_id, target_username, target_key) VALUES ($1, 'nasa', 'nasa') RETURNING id`,
      [acct[0]!.id],
    );
    const monitorId = mon[0]!.id;
    // 20 this week, 3 in 2019 (no week partition: the DEFAULT one)
    await c.query(
      `INSERT INTO hits (monitor_id, tweet_id, tweet_text, tweet_author_id, tweet_author_username, tweet_created_at)
       SELECT $1, 't' || n, 'text ' || n, '42', 'nasa',
              CASE WHEN n <= 3 THEN timestamptz '2019-06-04T00:00:00Z' ELSE now() END - n * interval '1 second'
       FROM generate_series(1, 23) n`,
      [monitorId],
    );
    const snapshot = async () =>
      (await c.query<{ h: string }>(`SELECT string_agg(id::text || tweet_text, ',' ORDER BY id) AS h FROM hits`))
        .rows[0]!.h;
    const kept = await snapshot();

    await migrate(db.url);

    expect(await snapshot()).toBe(kept);
    const { rows: old } = await c.query<{ xid: string; n: number }>(
      `SELECT xid::text, count(*)::int AS n FROM hits GROUP BY xid`,
    );
    expect(old).toEqual([{ xid: '1', n: 23 }]);
    await c.query('BEGIN');
    const { rows: tx } = await c.query<{ xid: string }>(`SELECT pg_current_xact_id()::text AS xid`);
    await c.query(
      `INSERT INTO hits (monitor_id, tweet_id, tweet_text, tweet_author_id, tweet_author_username, tweet_created_at)
       VALUES ($1, 'new', 'new', '42', 'nasa', now()), ($1, 'old', 'old', '42', 'nasa', timestamptz '2019-06-05T00:00:00Z')`,
      [monitorId],
    );
    await c.query('COMMIT');
    const { rows: fresh } = await c.query<{ xid: string }>(
      `SELECT DISTINCT xid::text FROM hits WHERE tweet_id IN ('new', 'old')`,
    );
    expect(fresh).toEqual([{ xid: tx[0]!.xid }]);

    // a week partition made after the migration (the 2019 rows move into it) has the column and the index
    await c.query(`SELECT create_week_partition('hits', '2019-06-03')`);
    const { rows: moved } = await c.query<{ part: string; xid: string; n: number }>(
      `SELECT tableoid::regclass::text AS part, xid::text, count(*)::int AS n FROM hits
       WHERE tweet_created_at < '2020-01-01' GROUP BY 1, 2 ORDER BY 2`,
    );
    expect(moved).toEqual([
      { part: 'hits_p20190603', xid: '1', n: 3 },
      { part: 'hits_p20190603', xid: tx[0]!.xid, n: 1 },
    ]);
    const { rows: unindexed } = await c.query<{ part: string }>(
      `SELECT i.inhrelid::regclass::text AS part FROM pg_inherits i
       WHERE i.inhparent = 'hits'::regclass
         AND NOT EXISTS (SELECT 1 FROM pg_index x JOIN pg_class ix ON ix.oid = x.indexrelid
                         WHERE x.indrelid = i.inhrelid AND pg_get_indexdef(x.indexrelid) LIKE '%(monitor_id, xid, id)%')`,
    );
    expect(unindexed).toEqual([]);
    expect(await schemaDrift(db.url)).toEqual([]);
  });
});
