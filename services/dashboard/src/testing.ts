/** Test support: the dashboard started in the test's own process, with its ops server. */
import { startInProcess } from '@sts/common';
import { dashboardService } from './main';

export interface RunningDashboard {
  port: number;
  opsPort: number;
  stop(): Promise<void>;
}

export async function start(source: NodeJS.ProcessEnv): Promise<RunningDashboard> {
  const s = await startInProcess(dashboardService, source);
  return { port: s.info.port as number, opsPort: s.opsPort, stop: () => s.stop() };
}
