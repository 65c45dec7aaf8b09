/**
 * Retention benchmark: the maintenance step (`npm run cli -- maintenance run`, @sts/db
 * runMaintenance) dropping a week of hits past retention costs the same for ten million rows as
 * for ten thousand, and the API's hit listing keeps its p99 while it runs.
 *
 * In a database of its own (dropped at the end): 100 monitors with RETENTION_RECENT (10,000)
 * recent hits between them, and, each round, one week 20 weeks back (past the 90-day horizon)
 * filled with RETENTION_SMALL (10,000) or RETENTION_ROWS (10,000,000) hits. A week is generated
 * inside PostgreSQL (INSERT … SELECT generate_series) into a table of the partition's shape,
 * indexed afterwards (sorted builds), attached as the week's partition with a CHECK constraint
 * that spares the attach its scan, vacuumed (FREEZE, ANALYZE) and checkpointed like a
 * 20-week-old week would be: the same table the poller's inserts would have made, built in a
 * fraction of the time. CHECKPOINT needs a superuser (the local default) or pg_checkpoint.
 *
 * Per round (RETENTION_ROUNDS, default 3, alternating small/large first): the time of one
 * maintenance run that drops the old week; meanwhile a reader lists hits (the read-api's
 * listHits, Prisma, 20 a page, newest first, a random monitor) back to back for
 * RETENTION_READ_MS (2,000) around the run, and for as long again with no run (idle): p99 of each.
 * Figures: medians over the rounds.
 * The step's time is also split out: the part that holds the partitioned table's lock (creating
 * weeks ahead, detaching the old one: catalog work) and the rest (removing the detached table's
 * files, the batched prunes). Last line: `rows_small <n> drop_small_ms <a> rows_large <m>
 * drop_large_ms <b> lock_small_ms <c> lock_large_ms <d> read_p99_idle_ms <e> read_p99_during_ms <f>
 * unlink_small_ms <g> unlink_large_ms <h>`.
 * Target: lock_large within 2x of lock_small (a catalog operation whatever the rows), read p99
 * around the runs ≤ 2x idle; drop_large − drop_small is the file system freeing the files.
 *
 * The file system's own floor: when the bench can write next to PostgreSQL's data directory (the
 * same device; a superuser reads `data_directory`), each round also writes a plain file the size of
 * the dropped week (its table and indexes, fsynced, as the checkpointed week is) and times its
 * unlink: what removing that many bytes costs on this disk with no database involved
 * (`unlink_small_ms`, `unlink_large_ms` on the last line; `n/a` when the device differs).
 */
import { randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, mkdtempSync, openSync, rmSync, statSync, unlinkSync, writeSync } from 'node:fs';
import path from 'node:path';
import { Client } from 'pg';
import { createDbClient, DEFAULT_RETENTION, runMaintenance, weekStart, type Db } from '../packages/db/src';
import { createMonitorRepository } from '../services/read-api/src/adapters/monitors';
import { clockLog, median, percentileOf, positiveEnv } from './lib/numbers';
import { createDatabase, dropDatabase, postgresAdminUrl } from './lib/services';

const LARGE = positiveEnv('RETENTION_ROWS', 10_000_000, { whole: true });
const SMALL = positiveEnv('RETENTION_SMALL', 10_000, { whole: true });
const RECENT = positiveEnv('RETENTION_RECENT', 10_000, { whole: true });
const ROUNDS = positiveEnv('RETENTION_ROUNDS', 3, { whole: true });
const READ_MS = positiveEnv('RETENTION_READ_MS', 2000, { whole: true });
const DAY = 86_400_000;

const log = clockLog;

const p99 = (xs: number[]) => percentileOf(xs, 99);

/** Fills the week starting `week` (a Monday, YYYY-MM-DD) with `rows` hits and attaches it as hits' partition. */
async function buildWeek(c: Client, week: string, rows: number, monitors: string[]): Promise<number> {
  const started = Date.now();
  const part = `hits_p${week.replaceAll('-', '')}`;
  const lo = `${week}T00:00:00Z`;
  const hi = new Date(Date.parse(lo) + 7 * DAY).toISOString();
  await c.query(`SET maintenance_work_mem = '512MB'`);
  // building 10 M rows takes minutes: past the database's statement_timeout (set by the migrations)
  await c.query(`SET statement_timeout = 0`);
  await c.query(`CREATE TABLE "${part}" (LIKE hits INCLUDING DEFAULTS)`);
  await c.query(
    `INSERT INTO "${part}" (id, monitor_id, tweet_id, tweet_text, tweet_author_id, tweet_author_username, tweet_created_at, detected_at)
     SELECT gen_random_uuid(), ($1::uuid[])[1 + n % $2], 'b' || n, 'an old post', '42', 'bench',
            $3::timestamptz + (n % 600000) * interval '1 second', $3::timestamptz + (n % 600000) * interval '1 second'
     FROM generate_series(1, $4) n`,
    [monitors, monitors.length, lo, rows],
  );
  await c.query(`ALTER TABLE "${part}" ADD PRIMARY KEY (id, tweet_created_at)`);
  await c.query(`CREATE UNIQUE INDEX ON "${part}" (monitor_id, tweet_id, tweet_created_at)`);
  await c.query(`CREATE INDEX ON "${part}" (monitor_id, detected_at DESC, id DESC)`);
  await c.query(
    `ALTER TABLE "${part}" ADD CONSTRAINT "${part}_range" CHECK (tweet_created_at >= '${lo}' AND tweet_created_at < '${hi}')`,
  );
  await c.query(`ALTER TABLE hits ATTACH PARTITION "${part}" FOR VALUES FROM ('${lo}') TO ('${hi}')`);
  await c.query(`ALTER TABLE "${part}" DROP CONSTRAINT "${part}_range"`);
  // as an old week is in production: vacuumed, frozen and analyzed long ago (a fresh table would
  // draw autovacuum, whose lock the drop would wait on for deadlock_timeout)
  await c.query(`VACUUM (FREEZE, ANALYZE) "${part}"`);
  // and written out: a checkpoint flushes its pages, so the drop does not meet gigabytes of dirty
  // page cache that a 20-week-old table would not have
  await c.query('CHECKPOINT');
  return Date.now() - started;
}

/** Where a plain file lands on PostgreSQL's own device, or null (another device, or no superuser). */
async function floorDir(c: Client): Promise<string | null> {
  try {
    const { rows } = await c.query<{ data_directory: string }>('SHOW data_directory');
    const dir = mkdtempSync(path.join(path.dirname(rows[0]!.data_directory), 'sts-bench-unlink-'));
    if (statSync(dir).dev === statSync(rows[0]!.data_directory).dev) return dir;
    rmSync(dir, { recursive: true, force: true });
    return null;
  } catch {
    return null; // not a superuser, or no write access next to the data directory
  }
}

/** Writes `bytes` to a new file in `dir` (fsynced), then times its unlink: the file system's floor. */
function unlinkFloorMs(dir: string, bytes: number): number {
  const file = path.join(dir, 'week');
  const chunk = randomBytes(1 << 20);
  const fd = openSync(file, 'w');
  for (let left = bytes; left > 0; left -= chunk.length) writeSync(fd, chunk, 0, Math.min(left, chunk.length));
  fsyncSync(fd);
  closeSync(fd);
  const t = performance.now();
  unlinkSync(file);
  return performance.now() - t;
}

/** Lists hits back to back until `until()` says stop; returns each call's ms. */
async function reader(db: Db, monitors: string[], until: () => boolean): Promise<number[]> {
  const repo = createMonitorRepository(db);
  const since = new Date(Date.now() - 90 * DAY);
  const times: number[] = [];
  while (!until()) {
    const m = monitors[Math.floor(Math.random() * monitors.length)]!;
    const t = performance.now();
    await repo.listHits(m, { limit: 20, since });
    times.push(performance.now() - t);
  }
  return times;
}

async function main(): Promise<void> {
  const admin = postgresAdminUrl();
  const name = `sts_bench_retention_${randomBytes(4).toString('hex')}`;
  const url = await createDatabase(admin, name);
  const c = new Client({ connectionString: url });
  await c.connect();
  const db = createDbClient({ url, poolSize: 4 });
  const readDb = createDbClient({ url, poolSize: 2 });
  try {
    const { rows: acct } = await c.query<{ id: string }>(
      `INSERT INTO accounts (email) VALUES ('bench@example.com') RETURNING id`,
    );
    const { rows: mons } = await c.query<{ id: string }>(
      `INSERT INTO monitors (account_id, target_username, target_key)
       SELECT $1, 'bench' || n, 'bench' || n FROM generate_series(1, 100) n RETURNING id`,
      [acct[0]!.id],
    );
    const monitors = mons.map((m) => m.id);
    await c.query(
      `INSERT INTO hits (monitor_id, tweet_id, tweet_text, tweet_author_id, tweet_author_username, tweet_created_at, detected_at)
       SELECT ($1::uuid[])[1 + n % 100], 'r' || n, 'a recent post', '42', 'bench',
              now() - n * interval '10 seconds', now() - n * interval '10 seconds'
       FROM generate_series(1, $2) n`,
      [monitors, RECENT],
    );
    await c.query('ANALYZE hits');
    const now = new Date();
    const week = weekStart(new Date(now.getTime() - 20 * 7 * DAY));
    const policy = { ...DEFAULT_RETENTION };
    await runMaintenance(db, policy, now); // weeks ahead exist; nothing else to do

    const drops: Record<'small' | 'large', number[]> = { small: [], large: [] };
    const locks: Record<'small' | 'large', number[]> = { small: [], large: [] };
    const unlinks: Record<'small' | 'large', number[]> = { small: [], large: [] };
    const floor = await floorDir(c);
    const idle: number[] = [];
    const during: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const order: ('small' | 'large')[] = round % 2 === 0 ? ['small', 'large'] : ['large', 'small'];
      for (const size of order) {
        const rows = size === 'small' ? SMALL : LARGE;
        const built = await buildWeek(c, week, rows, monitors);
        log(
          `round ${round + 1}: ${rows.toLocaleString('en-US')} rows in week ${week} built in ${(built / 1000).toFixed(1)} s`,
        );
        const part = `hits_p${week.replaceAll('-', '')}`;
        const { rows: sized } = await c.query<{ bytes: string }>(
          `SELECT pg_total_relation_size($1::regclass)::text AS bytes`,
          [part],
        );
        const bytes = Number(sized[0]!.bytes);
        // idle reads, then reads around one maintenance run (started half-way into the window)
        let stop = Date.now() + READ_MS;
        idle.push(...(await reader(readDb, monitors, () => Date.now() > stop)));
        stop = Date.now() + READ_MS;
        const reads = reader(readDb, monitors, () => Date.now() > stop);
        await new Promise((r) => setTimeout(r, READ_MS / 2));
        const t = performance.now();
        const report = await runMaintenance(db, policy, now);
        const ms = performance.now() - t;
        during.push(...(await reads));
        if (!report.dropped.includes(part))
          throw new Error(`the maintenance run did not drop the week: ${JSON.stringify(report)}`);
        drops[size].push(ms);
        locks[size].push(report.lockMs);
        const unlinkMs = floor === null ? null : unlinkFloorMs(floor, bytes);
        if (unlinkMs !== null) unlinks[size].push(unlinkMs);
        log(
          `round ${round + 1}: maintenance dropped ${rows.toLocaleString('en-US')} rows (${(bytes / 2 ** 20).toFixed(0)} MiB) ` +
            `in ${ms.toFixed(1)} ms (${report.lockMs.toFixed(1)} ms of it holding the table's lock)` +
            (unlinkMs === null ? '' : `; unlinking a plain file of that size: ${unlinkMs.toFixed(1)} ms`),
        );
      }
    }
    const left = await c.query<{ n: number }>(`SELECT count(*)::int AS n FROM hits`);
    if (left.rows[0]!.n !== RECENT) throw new Error(`expected ${RECENT} recent hits left, found ${left.rows[0]!.n}`);
    const f = (x: number) => x.toFixed(1);
    log(
      `drop: ${SMALL} rows ${f(median(drops.small))} ms, ${LARGE} rows ${f(median(drops.large))} ms (medians of ${ROUNDS}); ` +
        `hit listing p99 ${f(p99(idle))} ms idle (${idle.length} reads), ${f(p99(during))} ms around the runs (${during.length} reads)`,
    );
    log(
      `of which holding the tables' locks (create ahead, detach): ${f(median(locks.small))} ms and ${f(median(locks.large))} ms; ` +
        `slowest read ${f(Math.max(...idle))} ms idle, ${f(Math.max(...during))} ms around the runs`,
    );
    if (floor !== null) rmSync(floor, { recursive: true, force: true });
    const floorOf = (size: 'small' | 'large') => (unlinks[size].length > 0 ? f(median(unlinks[size])) : 'n/a');
    console.log(
      `rows_small ${SMALL} drop_small_ms ${f(median(drops.small))} rows_large ${LARGE} drop_large_ms ${f(median(drops.large))} ` +
        `lock_small_ms ${f(median(locks.small))} lock_large_ms ${f(median(locks.large))} ` +
        `read_p99_idle_ms ${f(p99(idle))} read_p99_during_ms ${f(p99(during))} ` +
        `unlink_small_ms ${floorOf('small')} unlink_large_ms ${floorOf('large')}`,
    );
  } finally {
    await c.end();
    await db.$disconnect();
    await readDb.$disconnect();
    await dropDatabase(admin, name);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
