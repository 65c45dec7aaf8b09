import { createHash } from 'node:crypto';
import { mkdtemp, mkdir, readFile, writeFile, cp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { createTestDatabase } from '@sts/testing';
import { createDbClient } from './client';
import { loadMigrations, migrate, MIGRATIONS_DIR, MigrationError } from './migrate';
import { schemaDrift } from '../test/schemaDrift';

describe('migrations', () => {
  let db: Awaited<ReturnType<typeof createTestDatabase>>;

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  it('the migrated database matches the Prisma schema', async () => {
    expect(await schemaDrift(db.url)).toEqual([]);
  });

  it('records each migration as prisma migrate deploy does', async () => {
    const c = new Client({ connectionString: db.url });
    await c.connect();
    try {
      const { rows } = await c.query<{
        id: string;
        checksum: string;
        migration_name: string;
        finished_at: Date | null;
        applied_steps_count: number;
        logs: string | null;
      }>('SELECT * FROM "_prisma_migrations" ORDER BY started_at');
      const files = await loadMigrations();
      expect(rows.map((r) => r.migration_name)).toEqual(files.map((f) => f.name));
      for (const [i, row] of rows.entries()) {
        const sql = await readFile(path.join(MIGRATIONS_DIR, row.migration_name, 'migration.sql'));
        expect(row.checksum).toBe(createHash('sha256').update(sql).digest('hex'));
        expect(row.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
        expect(row.finished_at).toBeInstanceOf(Date);
        expect(row.applied_steps_count).toBe(1);
        expect(row.logs).toBeNull();
        expect(files[i]!.checksum).toBe(row.checksum);
      }
    } finally {
      await c.end();
    }
  });

  it('is idempotent: a second run applies nothing', async () => {
    const r = await migrate(db.url);
    expect(r.applied).toEqual([]);
    expect(r.alreadyApplied.length).toBeGreaterThan(0);
  });

  it('the drift check notices a changed column, index and foreign key', async () => {
    const scratch = await createTestDatabase();
    const c = new Client({ connectionString: scratch.url });
    await c.connect();
    try {
      await c.query('ALTER TABLE hits ALTER COLUMN tweet_text DROP NOT NULL');
      await c.query('DROP INDEX "hits_monitor_id_tweet_id_tweet_created_at_key"');
      await c.query('ALTER TABLE api_keys DROP CONSTRAINT api_keys_account_id_fkey');
      await c.query('ALTER TABLE accounts ADD COLUMN extra int');
      const diffs = await schemaDrift(scratch.url);
      expect(diffs).toEqual(
        expect.arrayContaining([
          expect.stringContaining('hits.tweet_text'),
          expect.stringContaining('hits unique btree (monitor_id, tweet_id, tweet_created_at)'),
          expect.stringContaining('api_keys(account_id) -> accounts(id)'),
          expect.stringContaining('accounts.extra'),
        ]),
      );
    } finally {
      await c.end();
      await scratch.drop();
    }
  });

  it('applies new migrations in order, and a failing one is recorded, rolled back and blocks later runs', async () => {
    const scratch = await createTestDatabase();
    const dir = await mkdtemp(path.join(os.tmpdir(), 'mig-'));
    try {
      await cp(MIGRATIONS_DIR, dir, { recursive: true });
      await mkdir(path.join(dir, '29990101000000_add_note'));
      await writeFile(
        path.join(dir, '29990101000000_add_note', 'migration.sql'),
        'ALTER TABLE accounts ADD COLUMN note TEXT;',
      );
      await mkdir(path.join(dir, '29990102000000_broken'));
      await writeFile(
        path.join(dir, '29990102000000_broken', 'migration.sql'),
        'CREATE TABLE t_ok (id int);\nSELECT * FROM no_such_table;',
      );
      await expect(migrate(scratch.url, { dir })).rejects.toThrow(/29990102000000_broken failed: .*no_such_table/);
      const c = new Client({ connectionString: scratch.url });
      await c.connect();
      try {
        const note = await c.query(
          `SELECT 1 FROM information_schema.columns WHERE table_name = 'accounts' AND column_name = 'note'`,
        );
        expect(note.rowCount).toBe(1);
        const partial = await c.query(`SELECT 1 FROM information_schema.tables WHERE table_name = 't_ok'`);
        expect(partial.rowCount).toBe(0);
        const { rows } = await c.query<{ finished_at: Date | null; logs: string | null }>(
          `SELECT finished_at, logs FROM "_prisma_migrations" WHERE migration_name = '29990102000000_broken'`,
        );
        expect(rows[0]!.finished_at).toBeNull();
        expect(rows[0]!.logs).toContain('no_such_table');
      } finally {
        await c.end();
      }
      await expect(migrate(scratch.url, { dir })).rejects.toThrow(MigrationError);
    } finally {
      await scratch.drop();
    }
  });

  it('the Prisma client works over the pg adapter against the migrated schema', async () => {
    const prisma = createDbClient({ url: db.url });
    try {
      const account = await prisma.account.create({ data: { email: `a-${Date.now()}@example.com` } });
      expect(account.plan).toBe('free');
      await prisma.socialUser.create({ data: { id: 42n, username: 'Alice', usernameKey: 'alice', name: 'Alice' } });
      await prisma.socialTweet.create({ data: { id: 1000n, authorId: 42n, text: 'Hello full text world' } });
      const found = await prisma.$queryRaw<
        { id: string }[]
      >`SELECT id::text AS id FROM social_tweets WHERE search @@ websearch_to_tsquery('simple', 'text world')`;
      expect(found.map((r) => r.id)).toEqual(['1000']);
      await expect(
        prisma.hit.createMany({
          data: [1, 2].map(() => ({
            monitorId: '00000000-0000-4000-8000-000000000000',
            tweetId: '1',
            tweetText: 'x',
            tweetAuthorId: '42',
            tweetAuthorUsername: 'alice',
            tweetCreatedAt: new Date(),
          })),
        }),
      ).rejects.toThrow();
    } finally {
      await prisma.$disconnect();
    }
  });
});
