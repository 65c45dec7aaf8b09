/**
 * BENCH_VIA_PGBOUNCER=1: the bench's services reach PostgreSQL through a PgBouncer in transaction
 * mode (Debian's, started here on a free port with BENCH_PGBOUNCER_POOL server connections per
 * database, default 5), and a sampler counts PostgreSQL's backends on the bench database while it
 * runs, leaving out the bench's own direct connections (application_name `sts-bench`).
 */
import { Client } from 'pg';
import { startPgBouncer, type PgBouncer } from '../../packages/testing/src/pgbouncer';

const VIA_PGBOUNCER = process.env.BENCH_VIA_PGBOUNCER === '1';
export const PGBOUNCER_POOL = Number(process.env.BENCH_PGBOUNCER_POOL ?? 5);

/** the bench's own connections carry this application_name, so the sampler can leave them out */
const BENCH_APP = 'sts-bench';

/** `url` with the bench's application_name (its own client, direct) */
export function benchClientUrl(url: string): string {
  const u = new URL(url);
  u.searchParams.set('application_name', BENCH_APP);
  return u.toString();
}

/** PgBouncer in front of `adminUrl`'s server when BENCH_VIA_PGBOUNCER=1, else null */
export function maybeStartPgBouncer(adminUrl: string): Promise<PgBouncer | null> {
  return VIA_PGBOUNCER ? startPgBouncer({ upstream: adminUrl, poolSize: PGBOUNCER_POOL }) : Promise.resolve(null);
}

export interface BackendSampler {
  /** stops sampling; the peak and median count of the services' backends on the database */
  stop(): Promise<{ peak: number; median: number; samples: number }>;
}

/** Counts, every `everyMs`, the backends on `database` other than the bench's own. */
export async function sampleBackends(adminUrl: string, database: string, everyMs = 200): Promise<BackendSampler> {
  const c = new Client({ connectionString: adminUrl });
  await c.connect();
  const counts: number[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const { rows } = await c.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = $1 AND backend_type = 'client backend' AND application_name IS DISTINCT FROM $2`,
        [database, BENCH_APP],
      );
      counts.push(rows[0]!.n);
      await new Promise((r) => setTimeout(r, everyMs));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      await c.end();
      const sorted = [...counts].sort((a, b) => a - b);
      return {
        peak: sorted.at(-1) ?? 0,
        median: sorted[Math.floor(sorted.length / 2)] ?? 0,
        samples: sorted.length,
      };
    },
  };
}
