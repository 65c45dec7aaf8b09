/**
 * The maintenance step (`npm run cli -- maintenance run`, the k8s CronJob, the timer of
 * `npm start`): keeps storage bounded without a statement that grows with the data.
 *
 * - `hits` and `delivery_attempts` are partitioned by UTC week (migration
 *   20261125120000_partitioned_retention). Each run makes sure the current week and
 *   `weeksAhead` weeks after it have their partition, and drops every week partition whose whole
 *   week lies before the table's horizon (now − retention days): detached under a short lock (a
 *   catalog operation, as cheap for ten million rows as for ten, the only part readers of the
 *   table can wait on), then its files removed (the file system's work, in proportion to its
 *   bytes, touching no other table). Rows that landed in a table's DEFAULT partition (out of every
 *   week) are deleted in batches once past the horizon.
 * - Queue-like tables lose their finished rows in batches of `batchSize`, at most `maxBatches`
 *   a table and run (the next run goes on): published `outbox` rows and `account_events`, sent or
 *   abandoned `mail_outbox` rows, digested `mail_notices`, expired `email_tokens`, `usage_daily` and `x_billable_reads` days past retention,
 *   `coverage_gaps` that ended more than 30 days ago, `monitor_events` (profile changes, target
 *   health) older than the delivery log.
 *   Every batch finds its rows through an index range.
 *
 * Safe from several places at once: the partition work of a table runs under a transaction-level
 * advisory lock (another runner skips that table and says so), every batch claims its rows with
 * FOR UPDATE SKIP LOCKED. Both work through PgBouncer in transaction mode. Idempotent: a second
 * run finds nothing to create, drop or delete.
 */
import type { Db } from './client';

export interface RetentionPolicy {
  /** hits are kept at least this many days after the tweet was created (the longest plan's) */
  hitsDays: number;
  /** delivery attempts are kept at least this many days (the longest plan's) */
  deliveryAttemptsDays: number;
  /** published outbox rows (monitor.hit events already in RabbitMQ) */
  outboxHours: number;
  /** published account events; longer than a month, since their keys de-duplicate monthly notices */
  accountEventsDays: number;
  /** sent mail, and mail never sent by then */
  mailDays: number;
  /** expired email tokens are kept this many days more (a late click still reads "expired") */
  emailTokensGraceDays: number;
  /** per-day usage rows (the dashboard's charts) */
  usageDailyDays: number;
  /** what X billed per day (`x cost`): a year and a month, so a year ago is still comparable */
  xBillableDays: number;
  /** coverage gaps, counted from their end (the coverage endpoint shows 30 days) */
  coverageGapsDays: number;
  /**
   * monitor events that are not hits (monitor.profile_changed, monitor.target_unavailable): a
   * redelivery reads its event here, so they are kept as long as the delivery log (the longest plan's)
   */
  monitorEventsDays: number;
  /** week partitions created ahead of the current week */
  weeksAhead: number;
  batchSize: number;
  /** batches per table and run */
  maxBatches: number;
}

export const DEFAULT_RETENTION: RetentionPolicy = {
  hitsDays: 90,
  deliveryAttemptsDays: 30,
  outboxHours: 24,
  accountEventsDays: 90,
  mailDays: 30,
  emailTokensGraceDays: 7,
  usageDailyDays: 400,
  xBillableDays: 400,
  coverageGapsDays: 30,
  monitorEventsDays: 30,
  weeksAhead: 4,
  batchSize: 5000,
  maxBatches: 1000,
};

/** The tables partitioned by week, and their partition key. */
const PARTITIONED = { hits: 'tweet_created_at', delivery_attempts: 'created_at' } as const;
type PartitionedTable = keyof typeof PARTITIONED;

export interface MaintenanceReport {
  /** week partitions created, by name */
  created: string[];
  /** week partitions dropped, by name */
  dropped: string[];
  /** tables whose partition work another runner held (skipped this time) */
  busy: PartitionedTable[];
  /** rows deleted per table (batched) */
  pruned: Record<string, number>;
  /** true when some table hit maxBatches: rows are left for the next run */
  more: boolean;
  /** time spent in the transactions that lock a partitioned table (creating, detaching weeks) */
  lockMs: number;
  ms: number;
}

/** advisory lock namespace of the maintenance step (the second key is the table's) */
const LOCK_SPACE = 0x5354_4d4e; // "STMN"
const DAY_MS = 86_400_000;

/** The Monday (UTC) of the week holding `t`, as YYYY-MM-DD. */
export function weekStart(t: Date): string {
  const d = new Date(Date.UTC(t.getUTCFullYear(), t.getUTCMonth(), t.getUTCDate()));
  d.setUTCDate(d.getUTCDate() - ((d.getUTCDay() + 6) % 7));
  return d.toISOString().slice(0, 10);
}

const addDays = (day: string, n: number) => new Date(Date.parse(`${day}T00:00:00Z`) + n * DAY_MS);

/**
 * The week tables of `table` with their first day (names <table>_pYYYYMMDD): its partitions, and
 * any a run detached but did not get to drop (it stopped in between).
 */
async function weekPartitions(db: Db, table: PartitionedTable): Promise<{ name: string; week: string }[]> {
  const rows = await db.$queryRaw<{ name: string }[]>`
    SELECT c.relname AS name FROM pg_class c
    WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r' AND c.relname ~ ('^' || ${table} || '_p[0-9]{8}$')
    ORDER BY c.relname`;
  const re = new RegExp(`^${table}_p(\\d{4})(\\d{2})(\\d{2})$`);
  return rows.flatMap((r) => {
    const m = re.exec(r.name);
    return m ? [{ name: r.name, week: `${m[1]}-${m[2]}-${m[3]}` }] : [];
  });
}

/**
 * One table's partition work in transactions that each hold the table's advisory lock: create
 * the missing weeks, then drop each week past the horizon in its own short transaction (a
 * lock_timeout keeps it from queueing behind long reads; it is retried on the next run).
 */
async function partitionWork(
  db: Db,
  table: PartitionedTable,
  horizon: Date,
  now: Date,
  weeksAhead: number,
  report: MaintenanceReport,
): Promise<void> {
  const lock = async (tx: Parameters<Parameters<Db['$transaction']>[0]>[0]) => {
    await tx.$executeRaw`SET LOCAL lock_timeout = '2s'`;
    const [row] = await tx.$queryRaw<
      { ok: boolean }[]
    >`SELECT pg_try_advisory_xact_lock(${LOCK_SPACE}::int, hashtext(${table})) AS ok`;
    return row?.ok === true;
  };
  const current = weekStart(now);
  const started = performance.now();
  const created = await db.$transaction(async (tx) => {
    if (!(await lock(tx))) return null;
    const made: string[] = [];
    for (let i = 0; i <= weeksAhead; i++) {
      const week = addDays(current, 7 * i)
        .toISOString()
        .slice(0, 10);
      const [r] = await tx.$queryRaw<
        { made: boolean }[]
      >`SELECT create_week_partition(${table}, ${week}::date) AS made`;
      if (r?.made) made.push(`${table}_p${week.replaceAll('-', '')}`);
    }
    return made;
  });
  report.lockMs += performance.now() - started;
  if (created === null) {
    report.busy.push(table);
    return;
  }
  report.created.push(...created);
  for (const p of await weekPartitions(db, table)) {
    if (addDays(p.week, 7).getTime() > horizon.getTime()) continue;
    // detach under the lock (a catalog change: the only moment readers of the parent wait), then
    // remove the files outside it; a table another run left detached is dropped under the lock
    const t = performance.now();
    const step = await db.$transaction(async (tx) => {
      if (!(await lock(tx))) return 'busy';
      const [row] = await tx.$queryRaw<{ attached: boolean | null }[]>`
        SELECT (SELECT c.relispartition FROM pg_class c WHERE c.oid = to_regclass(${p.name})) AS attached`;
      if (row?.attached == null) return 'gone'; // another runner dropped it meanwhile
      // the names come from the catalog and matched <table>_pYYYYMMDD
      if (!row.attached) {
        await tx.$executeRawUnsafe(`DROP TABLE "${p.name}"`);
        return 'dropped';
      }
      await tx.$executeRawUnsafe(`ALTER TABLE "${table}" DETACH PARTITION "${p.name}"`);
      return 'detached';
    });
    report.lockMs += performance.now() - t;
    if (step === 'detached') {
      try {
        await db.$executeRawUnsafe(`DROP TABLE "${p.name}"`);
        report.dropped.push(p.name);
      } catch (err) {
        // another runner found it detached and dropped it first
        if (!/does not exist/.test(err instanceof Error ? err.message : String(err))) throw err;
      }
    } else if (step === 'dropped') report.dropped.push(p.name);
    else if (step === 'busy' && !report.busy.includes(table)) report.busy.push(table);
  }
}

/** A batched delete of at most $1 rows older than the cutoff $2, claimed with FOR UPDATE SKIP LOCKED. */
interface Prune {
  table: string;
  sql: string;
  cutoff: Date;
}

function prunes(p: RetentionPolicy, now: Date): Prune[] {
  const day = (days: number) => days * DAY_MS;
  // [table, its key, which rows are past retention ($2 is the cutoff), how long they are kept]
  const rules: [table: string, key: string, where: string, keepMs: number][] = [
    ['outbox', 'id', 'published_at < $2', p.outboxHours * 3_600_000],
    ['account_events', 'dedup_key', 'published_at < $2', day(p.accountEventsDays)],
    ['mail_outbox', 'id', 'sent_at < $2', day(p.mailDays)],
    ['mail_outbox', 'id', 'created_at < $2 AND sent_at IS NULL', day(p.mailDays)],
    ['mail_notices', 'id', 'digested_at < $2', day(p.mailDays)],
    ['email_tokens', 'id', 'expires_at < $2', day(p.emailTokensGraceDays)],
    ['usage_daily', 'account_id, day', 'day < $2::date', day(p.usageDailyDays)],
    ['x_billable_reads', 'day, resource, resource_id', 'day < $2::date', day(p.xBillableDays)],
    ['coverage_gaps', 'id', 'ends_at < $2', day(p.coverageGapsDays)],
    ['monitor_events', 'id', 'created_at < $2', day(p.monitorEventsDays)],
    ['hits_default', 'id, tweet_created_at', 'tweet_created_at < $2', day(p.hitsDays)],
    ['delivery_attempts_default', 'id, created_at', 'created_at < $2', day(p.deliveryAttemptsDays)],
  ];
  return rules.map(([table, key, where, keepMs]) => ({
    table,
    sql: `DELETE FROM ${table} WHERE (${key}) IN (SELECT ${key} FROM ${table} WHERE ${where} LIMIT $1 FOR UPDATE SKIP LOCKED)`,
    cutoff: new Date(now.getTime() - keepMs),
  }));
}

/** Runs the step once; see the file comment. */
export async function runMaintenance(
  db: Db,
  policy: RetentionPolicy = DEFAULT_RETENTION,
  now: Date = new Date(),
): Promise<MaintenanceReport> {
  const started = Date.now();
  const report: MaintenanceReport = { created: [], dropped: [], busy: [], pruned: {}, more: false, lockMs: 0, ms: 0 };
  const horizons: Record<PartitionedTable, Date> = {
    hits: new Date(now.getTime() - policy.hitsDays * DAY_MS),
    delivery_attempts: new Date(now.getTime() - policy.deliveryAttemptsDays * DAY_MS),
  };
  for (const table of Object.keys(PARTITIONED) as PartitionedTable[])
    await partitionWork(db, table, horizons[table], now, policy.weeksAhead, report);
  for (const p of prunes(policy, now)) {
    let total = 0;
    for (let i = 0; ; i++) {
      if (i === policy.maxBatches) {
        report.more = true;
        break;
      }
      const n = await db.$executeRawUnsafe(p.sql, policy.batchSize, p.cutoff);
      total += n;
      if (n < policy.batchSize) break;
    }
    report.pruned[p.table] = (report.pruned[p.table] ?? 0) + total;
  }
  report.ms = Date.now() - started;
  return report;
}
