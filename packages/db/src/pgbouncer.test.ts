/**
 * The database layer through a real PgBouncer in transaction pool mode (Debian's 1.18: no
 * protocol-level prepared statements, only `extra_float_digits` ignored among the startup
 * parameters), started by this file on a free port with 2 server connections per database:
 * the Prisma client (queries, interactive transactions, more clients than server connections),
 * the query timeout as the database's default, and the migration runner on DATABASE_DIRECT_URL.
 */
import { Client } from 'pg';
import {
  createTestDatabase,
  pgbouncerAvailable,
  PGBOUNCER_BIN,
  spawnService,
  startPgBouncer,
  testServiceUrls,
  type PgBouncer,
  type TestDatabase,
} from '@sts/testing';
import { createDbClient, type Db } from './client';
import { STATEMENT_TIMEOUT } from './settings';

const available = pgbouncerAvailable();
if (!available)
  console.warn(`db: ${PGBOUNCER_BIN} IS NOT INSTALLED (apt-get install pgbouncer): THE PGBOUNCER TESTS ARE SKIPPED`);
const describeBouncer = available ? describe : describe.skip;

/** the backends PostgreSQL has open on `database` (read over a direct admin connection) */
async function backends(database: string): Promise<number> {
  const admin = new Client({ connectionString: testServiceUrls().postgres });
  await admin.connect();
  try {
    const { rows } = await admin.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1',
      [database],
    );
    return rows[0]!.n;
  } finally {
    await admin.end();
  }
}

describeBouncer('through PgBouncer in transaction mode', () => {
  const POOL = 2;
  let pgbouncer: PgBouncer;
  let t: TestDatabase;
  let db: Db;

  beforeAll(async () => {
    pgbouncer = await startPgBouncer({ upstream: testServiceUrls().postgres, poolSize: POOL });
    t = await createTestDatabase();
    db = createDbClient({ url: pgbouncer.pooled(t.directUrl), poolSize: 10 });
  });
  afterAll(async () => {
    await db?.$disconnect();
    await t?.drop();
    await pgbouncer?.stop();
  });

  it('refuses a client that sends statement_timeout as a startup parameter (as production PgBouncer does)', async () => {
    const c = new Client({ connectionString: pgbouncer.pooled(t.directUrl), statement_timeout: 1000 });
    await expect(c.connect()).rejects.toThrow('unsupported startup parameter: statement_timeout');
    await c.end().catch(() => undefined);
  });

  it('serves the Prisma client: queries, interactive transactions, 20 at once on 2 server connections', async () => {
    let peak = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        peak = Math.max(peak, await backends(t.name));
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    try {
      const ids = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          db.$transaction(
            async (tx) => {
              const a = await tx.account.create({ data: { email: `bouncer${i}@example.com` } });
              await tx.$queryRaw`SELECT pg_sleep(0.02)::text`;
              await tx.apiKey.create({
                data: { accountId: a.id, keyHash: String(i).padStart(64, '0'), prefix: `p${i}` },
              });
              return a.id;
            },
            // 20 transactions queue for 2 server connections: a busy machine must not fail them
            { maxWait: 30_000, timeout: 30_000 },
          ),
        ),
      );
      expect(new Set(ids).size).toBe(20);
    } finally {
      sampling = false;
      await sampler;
    }
    // a failed transaction leaves nothing behind and the connection usable
    await expect(
      db.$transaction(async (tx) => {
        await tx.account.create({ data: { email: 'rolled-back@example.com' } });
        throw new Error('abort');
      }),
    ).rejects.toThrow('abort');
    expect(await db.account.count({ where: { email: 'rolled-back@example.com' } })).toBe(0);
    // the same statement text with other parameters, many times (unnamed statements only)
    for (let i = 0; i < 20; i++) {
      expect(await db.apiKey.count({ where: { prefix: `p${i}` } })).toBe(1);
    }
    expect(await db.account.count()).toBe(20);
    expect(peak).toBeGreaterThan(0);
    expect(peak).toBeLessThanOrEqual(POOL);
  });

  it("keeps the query timeout: every server session has the database's statement_timeout", async () => {
    const rows = await db.$queryRawUnsafe<{ statement_timeout: string }[]>('SHOW statement_timeout');
    expect(rows[0]!.statement_timeout).toBe(STATEMENT_TIMEOUT);
    // and PostgreSQL enforces it on those sessions: a database whose default is 300 ms
    const short = await createTestDatabase();
    const admin = new Client({ connectionString: short.directUrl });
    await admin.connect();
    await admin.query(`ALTER DATABASE "${short.name}" SET statement_timeout = '300ms'`);
    await admin.end();
    const shortDb = createDbClient({ url: pgbouncer.pooled(short.directUrl), poolSize: 2 });
    try {
      await expect(shortDb.$queryRaw`SELECT pg_sleep(3)::text`).rejects.toThrow(/statement timeout/);
      expect(await shortDb.$queryRaw`SELECT 1 AS one`).toEqual([{ one: 1 }]);
    } finally {
      await shortDb.$disconnect();
      await short.drop();
    }
  });

  it('migrates over DATABASE_DIRECT_URL while DATABASE_URL names PgBouncer; refuses a malformed one (exit 2)', async () => {
    const name = `${t.name}_cli`;
    const direct = new URL(t.directUrl);
    direct.pathname = `/${name}`;
    try {
      const run = spawnService('packages/db/src/cli.ts', {
        DATABASE_URL: pgbouncer.pooled(direct.toString()),
        DATABASE_DIRECT_URL: direct.toString(),
      });
      expect(await run.exited).toBe(0);
      expect(run.lines.join('\n')).toMatch(/\d+ migration\(s\) applied, 0 already applied/);
      const c = new Client({ connectionString: direct.toString() });
      await c.connect();
      const { rows } = await c.query<{ statement_timeout: string }>('SHOW statement_timeout');
      await c.end();
      expect(rows[0]!.statement_timeout).toBe(STATEMENT_TIMEOUT);

      const bad = spawnService('packages/db/src/cli.ts', {
        DATABASE_URL: pgbouncer.pooled(direct.toString()),
        DATABASE_DIRECT_URL: 'mysql://nope',
      });
      expect(await bad.exited).toBe(2);
      expect(bad.lines.join('\n')).toContain('DATABASE_DIRECT_URL');
    } finally {
      const admin = new Client({ connectionString: testServiceUrls().postgres });
      await admin.connect();
      await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await admin.end();
    }
  });
});
