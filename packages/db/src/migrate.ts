import { createHash, randomUUID } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { Client } from 'pg';
import { applyDatabaseSettings } from './settings';

/** Where the SQL migrations live, in Prisma's layout: <dir>/<name>/migration.sql */
export const MIGRATIONS_DIR = path.resolve(__dirname, '../prisma/migrations');

/** The advisory lock key `prisma migrate deploy` takes, so our runner and Prisma's exclude each other. */
const PRISMA_ADVISORY_LOCK = 72707369;

export interface Migration {
  name: string;
  sql: string;
  /** sha256 of the file's bytes, hex, as Prisma records it */
  checksum: string;
}

export interface MigrateResult {
  applied: string[];
  alreadyApplied: string[];
}

export class MigrationError extends Error {
  override name = 'MigrationError';
}

export async function loadMigrations(dir: string = MIGRATIONS_DIR): Promise<Migration[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const names = entries
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort();
  const out: Migration[] = [];
  for (const name of names) {
    const bytes = await readFile(path.join(dir, name, 'migration.sql'));
    out.push({
      name,
      sql: bytes.toString('utf8'),
      checksum: createHash('sha256').update(bytes).digest('hex'),
    });
  }
  return out;
}

// The table exactly as Prisma's schema engine creates it.
const CREATE_MIGRATIONS_TABLE = `
CREATE TABLE IF NOT EXISTS "_prisma_migrations" (
    "id"                    VARCHAR(36) PRIMARY KEY NOT NULL,
    "checksum"              VARCHAR(64) NOT NULL,
    "finished_at"           TIMESTAMPTZ,
    "migration_name"        VARCHAR(255) NOT NULL,
    "logs"                  TEXT,
    "rolled_back_at"        TIMESTAMPTZ,
    "started_at"            TIMESTAMPTZ NOT NULL DEFAULT now(),
    "applied_steps_count"   INTEGER NOT NULL DEFAULT 0
)`;

interface AppliedRow {
  migration_name: string;
  checksum: string;
  finished_at: Date | null;
  rolled_back_at: Date | null;
}

/**
 * Applies pending migrations the way `prisma migrate deploy` does: under Prisma's advisory lock,
 * one row per migration in `_prisma_migrations` (uuid id, sha256 checksum, started/finished
 * times, applied_steps_count 1). Each migration runs in its own transaction here, so a failure
 * leaves no half-applied schema; it is recorded with its logs like Prisma records it, and later
 * runs refuse to continue until it is resolved. Then it sets the database's defaults (the query
 * timeout, settings.ts). Needs a session of its own (the advisory lock): give it
 * DATABASE_DIRECT_URL, never a transaction-mode PgBouncer.
 */
export async function migrate(
  databaseUrl: string,
  options: { dir?: string; log?: (line: string) => void } = {},
): Promise<MigrateResult> {
  const log = options.log ?? (() => undefined);
  const migrations = await loadMigrations(options.dir);
  const client = new Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    // a schema change is never cut halfway by the services' query timeout (it is transactional)
    await client.query('SET statement_timeout = 0');
    await client.query('SELECT pg_advisory_lock($1)', [PRISMA_ADVISORY_LOCK]);
    await client.query(CREATE_MIGRATIONS_TABLE);
    const { rows } = await client.query<AppliedRow>(
      'SELECT migration_name, checksum, finished_at, rolled_back_at FROM "_prisma_migrations" ORDER BY started_at',
    );
    const failed = rows.find((r) => r.finished_at === null && r.rolled_back_at === null);
    if (failed) {
      throw new MigrationError(
        `migration ${failed.migration_name} failed earlier and is not resolved; fix it, then mark it rolled back (prisma migrate resolve --rolled-back ${failed.migration_name})`,
      );
    }
    const done = new Map(rows.filter((r) => r.finished_at !== null).map((r) => [r.migration_name, r]));
    const known = new Set(migrations.map((m) => m.name));
    for (const name of done.keys()) {
      if (!known.has(name)) log(`warning: migration ${name} is applied in the database but missing locally`);
    }
    const result: MigrateResult = { applied: [], alreadyApplied: [] };
    for (const m of migrations) {
      const row = done.get(m.name);
      if (row) {
        if (row.checksum !== m.checksum) {
          log(`warning: migration ${m.name} was modified after it was applied (checksum differs)`);
        }
        result.alreadyApplied.push(m.name);
        continue;
      }
      const id = randomUUID();
      await client.query(
        'INSERT INTO "_prisma_migrations" (id, checksum, migration_name, started_at, applied_steps_count) VALUES ($1, $2, $3, now(), 0)',
        [id, m.checksum, m.name],
      );
      try {
        await client.query('BEGIN');
        await client.query(m.sql);
        await client.query(
          'UPDATE "_prisma_migrations" SET finished_at = now(), applied_steps_count = 1 WHERE id = $1',
          [id],
        );
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        const message = err instanceof Error ? err.message : String(err);
        await client.query('UPDATE "_prisma_migrations" SET logs = $2 WHERE id = $1', [id, message]);
        throw new MigrationError(`migration ${m.name} failed: ${message}`);
      }
      log(`applied ${m.name}`);
      result.applied.push(m.name);
    }
    await applyDatabaseSettings(client);
    return result;
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [PRISMA_ADVISORY_LOCK]).catch(() => undefined);
    await client.end();
  }
}

/** Creates the database named in the URL when it does not exist (connecting to `postgres`). */
export async function ensureDatabase(databaseUrl: string): Promise<void> {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.replace(/^\//, ''));
  if (!name) throw new MigrationError('DATABASE_URL names no database');
  url.pathname = '/postgres';
  const admin = new Client({ connectionString: url.toString() });
  await admin.connect();
  try {
    const { rowCount } = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (!rowCount) await admin.query(`CREATE DATABASE "${name.replace(/"/g, '""')}"`);
  } finally {
    await admin.end();
  }
}
