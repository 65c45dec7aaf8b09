/** The use-cases' repositories over PostgreSQL: the only module of the package that is handed the Prisma client. */
import type { Db } from '@sts/db';
import type { Repositories } from '../repositories';
import { prismaAccounts, prismaEmailTokens, prismaUsage } from './accounts';
import { prismaCoverage } from './coverage';
import { prismaKeys } from './keys';
import { prismaLogs } from './logs';
import { prismaMonitors } from './monitors';

export function prismaRepositories(db: Db): Repositories {
  return {
    accounts: prismaAccounts(db),
    emailTokens: prismaEmailTokens(db),
    usage: prismaUsage(db),
    keys: prismaKeys(db),
    monitors: prismaMonitors(db),
    logs: prismaLogs(db),
    coverage: prismaCoverage(db),
  };
}
