import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTestDatabase } from '@sts/testing';
import { createDbClient, type Db } from './client';
import { loadMigrations, MIGRATIONS_DIR } from './migrate';
import { migrationsCheck, pendingMigrations } from './pending';

describe('pendingMigrations', () => {
  let testDb: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sts-migrations-'));

  beforeAll(async () => {
    testDb = await createTestDatabase();
    db = createDbClient({ url: testDb.url, poolSize: 2 });
    // the real migrations plus one the database has not seen
    cpSync(MIGRATIONS_DIR, dir, { recursive: true });
    mkdirSync(path.join(dir, '29990101000000_later'));
    writeFileSync(path.join(dir, '29990101000000_later', 'migration.sql'), 'SELECT 1;');
  });

  afterAll(async () => {
    await db.$disconnect();
    await testDb.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('is empty on a migrated database and names what the folder has beyond it', async () => {
    expect(await pendingMigrations(db)).toEqual([]);
    expect(await pendingMigrations(db, dir)).toEqual(['29990101000000_later']);
  });

  it('counts a migration whose row is unfinished or rolled back as pending', async () => {
    const last = (await loadMigrations()).at(-1)!.name;
    await db.$executeRaw`UPDATE "_prisma_migrations" SET rolled_back_at = now() WHERE migration_name = ${last}`;
    try {
      expect(await pendingMigrations(db)).toEqual([last]);
    } finally {
      await db.$executeRaw`UPDATE "_prisma_migrations" SET rolled_back_at = NULL WHERE migration_name = ${last}`;
    }
  });

  it('treats a database without _prisma_migrations as having everything pending', async () => {
    const empty = await createTestDatabase();
    const emptyDb = createDbClient({ url: empty.url, poolSize: 1 });
    try {
      await emptyDb.$executeRawUnsafe('DROP TABLE "_prisma_migrations"');
      expect(await pendingMigrations(emptyDb)).toEqual((await loadMigrations()).map((m) => m.name));
    } finally {
      await emptyDb.$disconnect();
      await empty.drop();
    }
  });

  it('migrationsCheck: fails while pending (cached briefly), and once none is pending stays satisfied', async () => {
    let t = 0;
    const pending = migrationsCheck(db, { dir, cacheMs: 1000, now: () => t });
    await expect(pending()).rejects.toThrow('1 migration(s) pending: 29990101000000_later');
    await expect(pending()).rejects.toThrow('pending');

    // a client whose queries fail while `down` (PostgreSQL unreachable)
    let down = false;
    const flaky = new Proxy(db, {
      get(target, prop) {
        if (prop === '$queryRaw')
          return down ? () => Promise.reject(new Error('connection refused')) : target.$queryRaw.bind(target);
        return Reflect.get(target, prop) as unknown;
      },
    });
    let clock = 0;
    const check = migrationsCheck(flaky, { cacheMs: 1000, now: () => clock });
    down = true;
    await expect(check()).rejects.toThrow('connection refused'); // not known yet: not ready
    clock = 1000;
    down = false;
    const last = (await loadMigrations()).at(-1)!.name;
    await db.$executeRaw`UPDATE "_prisma_migrations" SET finished_at = NULL WHERE migration_name = ${last}`;
    try {
      await expect(check()).rejects.toThrow(last);
    } finally {
      await db.$executeRaw`UPDATE "_prisma_migrations" SET finished_at = now() WHERE migration_name = ${last}`;
    }
    await expect(check()).rejects.toThrow(last); // the answer is cached for cacheMs
    clock = 2000;
    await expect(check()).resolves.toBeUndefined();
    // none pending once: a later PostgreSQL outage does not make the service unready
    down = true;
    clock = 99_000;
    await expect(check()).resolves.toBeUndefined();
    t = 5000;
    await expect(pending()).rejects.toThrow('pending'); // while pending it keeps asking
  });
});
