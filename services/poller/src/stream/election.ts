/**
 * Which replica holds the X stream connection: the one holding the PostgreSQL session advisory
 * lock `hashtext('sts:poller:x-stream')` on a connection of its own (the same pattern as the
 * metrics reporter, adapters/reporter.ts). No renewal timer: the lock lives and dies with its
 * connection, so when the holder stops or dies PostgreSQL frees it at once and the next replica's
 * check (every sync, ~2 s) takes it. A holder whose lock connection fails gives the stream up.
 */
import { Client } from 'pg';
import type { Logger } from '@sts/common';

const LOCK_SQL = `SELECT pg_try_advisory_lock(hashtext('sts:poller:x-stream')) AS locked`;

export interface StreamElection {
  /** true when this replica holds the stream now; takes the lock when it is free */
  check(): Promise<boolean>;
  /** gives the role up (the lock's connection closes) */
  close(): Promise<void>;
}

export function createStreamElection(options: { databaseUrl: string; logger: Logger }): StreamElection {
  const { logger } = options;
  let client: Client | undefined;
  let holding = false;
  let closed = false;

  function drop(c: Client | undefined): void {
    if (c === undefined || c !== client) return;
    client = undefined;
    holding = false;
    void c.end().catch(() => undefined);
  }

  return {
    async check() {
      if (closed) return false;
      try {
        if (!client) {
          const c = new Client({ connectionString: options.databaseUrl, keepAlive: true });
          c.on('error', (err) => {
            logger.warn('stream election connection lost', { error: err.message });
            drop(c);
          });
          client = c;
          await c.connect();
        }
        if (holding) await client.query('SELECT 1');
        else holding = (await client.query<{ locked: boolean }>(LOCK_SQL)).rows[0]?.locked === true;
        return holding;
      } catch (err) {
        logger.warn('stream election check failed', { error: err instanceof Error ? err.message : String(err) });
        drop(client);
        return false;
      }
    },
    async close() {
      closed = true;
      const c = client;
      client = undefined;
      holding = false;
      await c?.end().catch(() => undefined);
    },
  };
}
