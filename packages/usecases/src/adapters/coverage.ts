/** The coverage record in PostgreSQL: @sts/db's readMonitorCoverage. */
import { readMonitorCoverage, type Db } from '@sts/db';
import type { CoverageRepository } from '../repositories/coverage';

export function prismaCoverage(db: Db): CoverageRepository {
  return {
    monitor: (accountId, id) =>
      db.monitor.findFirst({ where: { id, accountId }, select: { id: true, targetKey: true, createdAt: true } }),
    // a monitor without a target key has no poll cursor or gap of its own: only its latency is read
    read: (m, now) => readMonitorCoverage(db, { id: m.id, targetKey: m.targetKey, createdAt: m.createdAt }, now),
  };
}
