/**
 * Which poller replica reports the fleet-wide metrics (outbox lag, poll lag): the one holding the
 * advisory lock `hashtext('sts:poller:metrics-reporter')` on the process's direct session
 * (adapters/advisoryLock.ts). The others
 * export none of those series, so sums and alerts over all replicas do not count them twice.
 * Decided at scrape time, no timer: a scrape asks `isReporter()`; when the reporter stops or dies,
 * the next replica scraped takes the role.
 */
import type { Logger } from '@sts/common';
import { createAdvisoryRole } from './advisoryLock';
import type { DirectSession } from '@sts/db';

export interface MetricsReporter {
  /** true when this replica reports now; takes the lock when it is free */
  isReporter(): Promise<boolean>;
  /** gives the role up (unlocks) */
  close(): Promise<void>;
}

export function createMetricsReporter(options: { session: DirectSession; logger: Logger }): MetricsReporter {
  const role = createAdvisoryRole({
    ...options,
    lock: 'sts:poller:metrics-reporter',
    role: 'metrics reporter',
    onTaken: () => options.logger.info('this replica reports the fleet-wide metrics (outbox lag, poll lag)'),
  });
  return { isReporter: () => role.check(), close: () => role.close() };
}
