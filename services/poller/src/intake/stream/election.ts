/**
 * Which replica holds the X stream connection: the one holding the PostgreSQL session advisory
 * lock `hashtext('sts:poller:x-stream')` on a connection of its own (adapters/advisoryLock.ts, as
 * the metrics reporter). No renewal timer: the lock lives and dies with its connection, so when
 * the holder stops or dies PostgreSQL frees it at once and the next replica's check (every sync,
 * ~2 s) takes it. A holder whose lock connection fails gives the stream up.
 */
import type { Logger } from '@sts/common';
import { createAdvisoryRole, type AdvisoryRole } from '../../adapters/advisoryLock';

/** `check()`: true when this replica holds the stream now; takes the lock when it is free */
export type StreamElection = AdvisoryRole;

export function createStreamElection(options: { databaseUrl: string; logger: Logger }): StreamElection {
  return createAdvisoryRole({ ...options, lock: 'sts:poller:x-stream', role: 'stream election' });
}
