/**
 * A role one replica of the fleet holds at a time (the fleet-wide metrics reporter, the X stream
 * holder): the replica holding a PostgreSQL session-level advisory lock `hashtext(<lock>)`, taken
 * on a connection of its own.
 *
 * No renewal timer: a replica asks `check()` when it needs to know; one holding the lock checks
 * its connection with one `SELECT 1` (a dead connection drops the claim), one not holding it tries
 * `pg_try_advisory_lock` (never waits). The lock goes with its connection: when the holder stops
 * (close()) or dies, PostgreSQL frees it and the next replica that checks takes it. Needs a
 * session-mode connection (not a transaction-mode PgBouncer), like LISTEN.
 */
import { Client } from 'pg';
import type { Logger } from '@sts/common';

const LOCK_SQL = 'SELECT pg_try_advisory_lock(hashtext($1)) AS locked';

export interface AdvisoryRole {
  /** true when this replica holds the role now; takes the lock when it is free */
  check(): Promise<boolean>;
  /** gives the role up (the lock's connection closes) */
  close(): Promise<void>;
}

export interface AdvisoryRoleOptions {
  databaseUrl: string;
  logger: Logger;
  /** the lock's name, hashed with hashtext(): one lock per database and name */
  lock: string;
  /** names the role in log lines ("<role> connection lost", "<role> check failed") */
  role: string;
  /** called when this replica takes the lock */
  onTaken?: () => void;
}

export function createAdvisoryRole(options: AdvisoryRoleOptions): AdvisoryRole {
  const { logger, role } = options;
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
      logger.warn(`${role} connection lost`, { error: err.message });
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
        const { rows } = await client.query<{ locked: boolean }>(LOCK_SQL, [options.lock]);
        holding = rows[0]?.locked === true;
        if (holding) options.onTaken?.();
      }
      return holding;
    } catch (err) {
      logger.warn(`${role} check failed`, { error: err instanceof Error ? err.message : String(err) });
      drop(client);
      return false;
    }
  }

  return {
    check() {
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
