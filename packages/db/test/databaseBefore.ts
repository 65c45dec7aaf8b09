/**
 * A database of its own, migrated up to (not including) one migration: where a migration is tested
 * on a database that already holds rows. `close()` ends the client, drops the database (FORCE) and
 * removes the copied migrations.
 */
import { cp, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { migrate, loadMigrations, MIGRATIONS_DIR } from '../src/migrate';

export interface DatabaseBefore {
  url: string;
  /** connected to the database */
  client: Client;
  close(): Promise<void>;
}

async function withAdmin(base: string, sql: string): Promise<void> {
  const admin = new Client({ connectionString: base });
  await admin.connect();
  try {
    await admin.query(sql);
  } finally {
    await admin.end();
  }
}

export async function databaseBefore(migration: string, label: string): Promise<DatabaseBefore> {
  const base = process.env.TEST_POSTGRES_URL;
  if (!base) throw new Error('TEST_POSTGRES_URL is not set');
  const name = `sts_t_${label}_${process.pid}_${Date.now()}`;
  await withAdmin(base, `CREATE DATABASE "${name}" TEMPLATE template0`);
  const url = new URL(base);
  url.pathname = `/${name}`;
  const before = await mkdtemp(path.join(os.tmpdir(), 'mig-before-'));
  for (const m of await loadMigrations())
    if (m.name < migration) await cp(path.join(MIGRATIONS_DIR, m.name), path.join(before, m.name), { recursive: true });
  await migrate(url.toString(), { dir: before });
  const client = new Client({ connectionString: url.toString() });
  await client.connect();
  return {
    url: url.toString(),
    client,
    close: async () => {
      await client.end();
      await withAdmin(base, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await rm(before, { recursive: true, force: true });
    },
  };
}
