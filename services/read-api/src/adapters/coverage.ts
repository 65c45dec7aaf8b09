/** A monitor's coverage (@sts/db readMonitorCoverage), scoped to one account. */
import { readMonitorCoverage, type Db, type MonitorCoverage } from '@sts/db';

export interface CoverageReader {
  /** the monitor's coverage, or null when it does not exist or is another account's */
  read(accountId: string, monitorId: string): Promise<(MonitorCoverage & { monitorId: string }) | null>;
}

export function createCoverageReader(db: Db): CoverageReader {
  return {
    async read(accountId, monitorId) {
      const m = await db.monitor.findFirst({
        where: { id: monitorId, accountId },
        select: { id: true, targetKey: true, createdAt: true },
      });
      if (!m) return null;
      return { monitorId: m.id, ...(await readMonitorCoverage(db, m)) };
    },
  };
}
