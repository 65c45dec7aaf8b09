/**
 * Which poller replica reports the fleet-wide metrics (outbox lag, poll lag): the one holding a
 * PostgreSQL session-level advisory lock, taken on a connection of its own. The others export
 * none of those series, so sums and alerts over all replicas do not count them twice.
 *
 * Decided at scrape time, no timer: a scrape asks `isReporter()`; a replica holding the lock
 * checks its connection with one `SELECT 1` (a dead connection drops the claim), a replica not
 * holding it tries `pg_try_advisory_lock` (never waits). The lock goes with its connection: when
 * the reporter stops (close()) or dies, PostgreSQL frees it and the next replica scraped takes it.
 * Needs a session-mode connection (not a transaction-mode PgBouncer), like LISTEN.
 */
import { Client } from 'pg';
import type { Logger } from '@sts/common';

/** hashtext() of a fixed name: one lock per database, apart from the migration runner's */
const LOCK_SQL = `SELECT pg_try_advisory_lock(hashtext('sts:poller:metrics-reporter')) AS locked`;

export interface MetricsReporter {
  /** true when this replica reports now; takes the lock when it is free */
  isReporter(): Promise<boolean>;
  /** gives the role up (the lock's connection closes) */
  close(): Promise<void>;
}

export function createMetricsReporter(options: { databaseUrl: string; logger: Logger }): MetricsReporter {
  const { logger } = options;
  let client: Client | undefined;
  let holding = false;
  let closed = false;
  let pending: Promise<boolean> | undefined;

  function drop(c: Client | undefined): void {
    if (c === undefined || c !== client) return;
    client = undefined;
    holding = false;
    void c.end().catch(() => undefined);
  }

  async function connect(): Promise<Client> {
    const c = new Client({ connectionString: options.databaseUrl, keepAlive: true });
    c.on('error', (err) => {
      logger.warn('metrics reporter connection lost', { error: err.message });
      drop(c);
    });
    await c.connect();
    return c;
  }

  async function decide(): Promise<boolean> {
    if (closed) return false;
    try {
      client ??= await connect();
      if (closed) {
        drop(client);
        return false;
      }
      if (holding) await client.query('SELECT 1');
      else {
        const { rows } = await client.query<{ locked: boolean }>(LOCK_SQL);
        holding = rows[0]?.locked === true;
        if (holding) logger.info('this replica reports the fleet-wide metrics (outbox lag, poll lag)');
      }
      return holding;
    } catch (err) {
      logger.warn('metrics reporter check failed', { error: err instanceof Error ? err.message : String(err) });
      drop(client);
      return false;
    }
  }

  return {
    isReporter() {
      // concurrent callers (every gauge of one scrape) share one check
      pending ??= decide().finally(() => (pending = undefined));
      return pending;
    },
    async close() {
      closed = true;
      await pending?.catch(() => undefined);
      const c = client;
      client = undefined;
      holding = false;
      await c?.end().catch(() => undefined);
    },
  };
}
