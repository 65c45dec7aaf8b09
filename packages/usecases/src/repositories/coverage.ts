/** A monitor's coverage record (gaps, covered-until, latency percentiles), as the poller, stream and backfill wrote it. */
import type { MonitorCoverage } from '@sts/db';

interface CoverageMonitorRef {
  id: string;
  /** the lower-cased target the monitor reads; null for a monitor without a single target */
  targetKey: string | null;
  createdAt: Date;
}

export interface CoverageRepository {
  /** the monitor when it belongs to the account */
  monitor(accountId: string, monitorId: string): Promise<CoverageMonitorRef | null>;
  read(monitor: CoverageMonitorRef, now: Date): Promise<MonitorCoverage>;
}
