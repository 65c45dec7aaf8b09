/** `GET /api/v1/monitors/:id/coverage`: the monitor's proof of coverage and speed (docs/api.md "Coverage"). */
import { NotFoundError, UnauthorizedError } from '@sts/common';
import type { CoverageReader } from '../adapters/coverage';
import { isUuid } from '../domain/params';
import { coverageRecord } from '../domain/coverage';
import type { Route } from './router';

export function coverageRoutes(coverage: CoverageReader): Route[] {
  return [
    {
      pattern: '/api/v1/monitors/:id/coverage',
      handlers: {
        GET: async (ctx) => {
          if (!ctx.accountId) throw new UnauthorizedError('missing or invalid x-account-id');
          const id = ctx.params.id!.toLowerCase();
          const found = isUuid(id) ? await coverage.read(ctx.accountId, id) : null;
          if (!found) throw new NotFoundError('NOT_FOUND', 'monitor not found');
          return { status: 200, body: { data: coverageRecord(found) } };
        },
      },
    },
  ];
}
