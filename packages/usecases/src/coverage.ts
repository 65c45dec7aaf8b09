/**
 * A monitor's proof of coverage and of speed (docs/api.md "Coverage"): up to when it has seen
 * everything its source has, its gaps of the last 30 days and when each was filled, and the p50 /
 * p95 of post → detected and detected → delivered over 24 h and 7 days.
 */
import type { MonitorCoverage } from '@sts/db';
import { idOrNotFound, type Ctx } from './context';
import { NotFoundError } from './errors';

export interface CoverageUseCases {
  /** NotFoundError when the monitor is not the account's */
  read(accountId: string, monitorId: string): Promise<MonitorCoverage>;
}

export function coverageUseCases(ctx: Ctx): CoverageUseCases {
  return {
    async read(accountId, monitorId) {
      const message = `no monitor with id ${monitorId}`;
      const id = idOrNotFound(monitorId, 'monitor', message);
      const monitor = await ctx.repos.coverage.monitor(idOrNotFound(accountId, 'monitor', message), id);
      if (!monitor) throw new NotFoundError('monitor', message);
      return ctx.repos.coverage.read(monitor, ctx.now());
    },
  };
}
