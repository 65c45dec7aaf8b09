/**
 * A role one replica of the fleet holds at a time (the fleet-wide metrics reporter): the replica
 * holding a PostgreSQL session-level advisory lock `hashtext(<lock>)`, taken on the process's
 * direct session (@sts/db directSession.ts), the connection its LISTENs use too.
 *
 * No renewal timer: a replica asks `check()` when it needs to know; one holding the lock checks
 * that the session is still the connection it took the lock on (`generation()`) and alive (one
 * `SELECT 1`), one not holding it tries `pg_try_advisory_lock` (never waits). The lock goes with
 * the connection: when the holder stops (close() unlocks) or dies, or its session reconnects,
 * PostgreSQL has freed it and the next replica that checks takes it. Sharing the connection with
 * the LISTENs is sound because their failure is the same event: a lost session loses both, and
 * both come back with the reconnect (the LISTENs at once, the role at the next check). Needs a
 * session-mode connection (not a transaction-mode PgBouncer), like LISTEN.
 */
import type { Logger } from '@sts/common';
import { errorMessage } from '@sts/core';
import type { DirectSession } from '@sts/db';

const LOCK_SQL = 'SELECT pg_try_advisory_lock(hashtext($1)) AS locked';
const UNLOCK_SQL = 'SELECT pg_advisory_unlock(hashtext($1)) AS unlocked';

export interface AdvisoryRole {
  /** true when this replica holds the role now; takes the lock when it is free */
  check(): Promise<boolean>;
  /** gives the role up (unlocks; the session stays for the others) */
  close(): Promise<void>;
}

export interface AdvisoryRoleOptions {
  session: DirectSession;
  logger: Logger;
  /** the lock's name, hashed with hashtext(): one lock per database and name */
  lock: string;
  /** names the role in log lines ("<role> check failed") */
  role: string;
  /** called when this replica takes the lock */
  onTaken?: () => void;
}

export function createAdvisoryRole(options: AdvisoryRoleOptions): AdvisoryRole {
  const { logger, role, session } = options;
  /** the session generation the lock was taken on (null: not held) */
  let heldOn: number | null = null;
  let closed = false;
  let pending: Promise<boolean> | undefined;

  async function decide(): Promise<boolean> {
    if (closed || !session.connected()) {
      heldOn = null;
      return false;
    }
    try {
      if (heldOn !== null && heldOn === session.generation()) {
        await session.query('SELECT 1');
        return heldOn === session.generation();
      }
      const generation = session.generation();
      const [row] = await session.query<{ locked: boolean }>(LOCK_SQL, [options.lock]);
      heldOn = row?.locked === true && generation === session.generation() ? generation : null;
      if (heldOn !== null) options.onTaken?.();
      return heldOn !== null;
    } catch (err) {
      logger.warn(`${role} check failed`, { err: errorMessage(err) });
      heldOn = null;
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
      if (heldOn !== null && heldOn === session.generation())
        await session.query(UNLOCK_SQL, [options.lock]).catch(() => undefined);
      heldOn = null;
    },
  };
}
