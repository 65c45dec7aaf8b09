// `pnpm migrate [deploy|status]`: applies the SQL migrations over DATABASE_DIRECT_URL (a session of
// its own: the runner holds an advisory lock), or DATABASE_URL when that is unset.
import { ConfigError, databaseEnvSchema, directDatabaseUrl, loadDevEnv, parseEnv } from '@sts/common';
import { ensureDatabase, loadMigrations, migrate } from './migrate';

async function main(): Promise<void> {
  loadDevEnv(); // next to `npm start`: its settings (.tmp/dev.env) where the environment sets none
  const cmd = process.argv[2] ?? 'deploy';
  if (cmd === 'deploy') {
    const url = directDatabaseUrl(parseEnv(databaseEnvSchema));
    await ensureDatabase(url);
    const r = await migrate(url, { log: (l) => console.log(l) });
    console.log(`${r.applied.length} migration(s) applied, ${r.alreadyApplied.length} already applied`);
  } else if (cmd === 'status') {
    const ms = await loadMigrations();
    console.log(ms.map((m) => `${m.name} ${m.checksum}`).join('\n'));
  } else {
    console.error(`unknown command "${cmd}" (expected deploy or status)`);
    process.exitCode = 2;
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exitCode = err instanceof ConfigError ? 2 : 1;
});
