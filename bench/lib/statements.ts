/**
 * Statement and row counts of a bench phase, for figures that do not depend on a busy machine's
 * clock (BENCH_X_STATEMENTS=1 in bench/realtimeStream.ts):
 *
 * - client side: every statement node-postgres sends in this process (each a round trip; BEGIN
 *   and COMMIT included), by its first words, counted while `start()`…`stop()`;
 * - server side: the database's own counters over the same span (pg_stat_database: transactions,
 *   rows inserted / updated; pg_stat_user_tables: rows written per table), which include what
 *   triggers do.
 */
import pg from 'pg';

type Query = (...args: unknown[]) => unknown;

/** the statement's kind: its first words, whitespace folded, at most 60 characters */
function kindOf(config: unknown): string {
  const text = typeof config === 'string' ? config : (config as { text?: unknown } | null)?.text;
  if (typeof text !== 'string') return '?';
  return text.replace(/\s+/g, ' ').trim().slice(0, 60);
}

interface ServerCounts {
  commits: number;
  inserted: number;
  updated: number;
  tables: Map<string, number>;
}

async function serverCounts(pool: pg.Pool): Promise<ServerCounts> {
  const client = await pool.connect();
  try {
    await client.query('SELECT pg_stat_clear_snapshot()');
    const [db] = (
      await client.query<{ c: string; i: string; u: string }>(
        `SELECT xact_commit AS c, tup_inserted AS i, tup_updated AS u FROM pg_stat_database WHERE datname = current_database()`,
      )
    ).rows;
    const tables = await client.query<{ t: string; n: string }>(
      `SELECT relname AS t, n_tup_ins + n_tup_upd + n_tup_del AS n FROM pg_stat_user_tables`,
    );
    return {
      commits: Number(db!.c),
      inserted: Number(db!.i),
      updated: Number(db!.u),
      tables: new Map(tables.rows.map((r) => [r.t, Number(r.n)])),
    };
  } finally {
    client.release();
  }
}

export class StatementCounter {
  private readonly counts = new Map<string, number>();
  private counting = false;
  private before: ServerCounts | null = null;
  private readonly pool: pg.Pool;

  constructor(dbUrl: string) {
    this.pool = new pg.Pool({ connectionString: dbUrl, max: 1 });
    const proto = pg.Client.prototype as unknown as { query: Query };
    const original = proto.query;
    const count = (config: unknown) => {
      if (!this.counting) return;
      const kind = kindOf(config);
      this.counts.set(kind, (this.counts.get(kind) ?? 0) + 1);
    };
    proto.query = function (this: unknown, ...args: unknown[]) {
      count(args[0]);
      return original.apply(this, args);
    };
  }

  async start(): Promise<void> {
    this.counts.clear();
    this.before = await serverCounts(this.pool);
    this.counting = true;
  }

  /** the counts since start(), per `posts`, as report lines */
  async stop(posts: number): Promise<string[]> {
    this.counting = false;
    // the server's counters are flushed by each backend at most once a second
    await new Promise((r) => setTimeout(r, 1500));
    const after = await serverCounts(this.pool);
    const before = this.before!;
    const per = (n: number) => (n / posts).toFixed(2);
    const sent = [...this.counts.values()].reduce((a, b) => a + b, 0);
    const lines = [
      `statements sent ${sent} (${per(sent)} per post), transactions committed ${after.commits - before.commits} ` +
        `(${per(after.commits - before.commits)} per post), rows inserted ${per(after.inserted - before.inserted)} ` +
        `and updated ${per(after.updated - before.updated)} per post`,
    ];
    for (const [kind, n] of [...this.counts].sort((x, y) => y[1] - x[1]).slice(0, 15))
      lines.push(`  ${per(n)} per post  ${n}  ${kind}`);
    for (const [table, n] of after.tables) {
      const d = n - (before.tables.get(table) ?? 0);
      if (d > 0) lines.push(`  rows written in ${table}: ${per(d)} per post`);
    }
    return lines;
  }

  async end(): Promise<void> {
    await this.pool.end();
  }
}
