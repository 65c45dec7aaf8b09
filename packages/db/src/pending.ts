/**
 * Pending migrations: the migration folders this process ships with (MIGRATIONS_DIR) that
 * `_prisma_migrations` does not record as finished (and not rolled back). Services refuse to
 * become ready while any is pending, so new pods never serve on an old schema.
 */
import { loadMigrations, MIGRATIONS_DIR } from './migrate';
import type { Db } from './client';

const localNames = new Map<string, Promise<string[]>>();

/** Names of the local migrations the database has not applied, oldest first. */
export async function pendingMigrations(db: Db, dir: string = MIGRATIONS_DIR): Promise<string[]> {
  // the folder is part of the deployed code and does not change while the process runs
  let names = localNames.get(dir);
  if (!names) {
    names = loadMigrations(dir).then((ms) => ms.map((m) => m.name));
    names.catch(() => localNames.delete(dir));
    localNames.set(dir, names);
  }
  const local = await names;
  const [table] = await db.$queryRaw<
    { present: boolean }[]
  >`SELECT to_regclass('_prisma_migrations') IS NOT NULL AS present`;
  if (!table?.present) return local;
  const rows = await db.$queryRaw<{ migration_name: string }[]>`
    SELECT migration_name FROM "_prisma_migrations" WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL`;
  const applied = new Set(rows.map((r) => r.migration_name));
  return local.filter((name) => !applied.has(name));
}

/**
 * A /readyz check that throws while migrations are pending. Answers are cached for `cacheMs`
 * (readiness probes come every few seconds from every kubelet); once none is pending it stays
 * satisfied for the life of the process (applied migrations do not un-apply, the folder is
 * fixed), so a later PostgreSQL blip does not fail this check — that is what lets the gateway's
 * readiness stay independent of shared backends.
 */
export function migrationsCheck(
  db: Db,
  options: { cacheMs?: number; dir?: string; now?: () => number } = {},
): () => Promise<void> {
  const cacheMs = options.cacheMs ?? 5000;
  const now = options.now ?? Date.now;
  let settled = false;
  let cached: { at: number; result: Promise<void> } | undefined;
  return () => {
    if (settled) return Promise.resolve();
    if (cached && now() - cached.at < cacheMs) return cached.result;
    const result = pendingMigrations(db, options.dir).then((pending) => {
      if (pending.length === 0) {
        settled = true;
        return;
      }
      throw new Error(`${pending.length} migration(s) pending: ${pending.join(', ')}`);
    });
    result.catch(() => undefined);
    cached = { at: now(), result };
    return result;
  };
}
