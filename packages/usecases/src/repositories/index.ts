/**
 * The use-cases' storage, one interface per kind of record. The use-cases reach the database only
 * through these; src/adapters/ implements them over PostgreSQL (Prisma).
 */
import type { AccountsRepository, EmailTokensRepository, UsageRepository } from './accounts';
import type { CoverageRepository } from './coverage';
import type { KeysRepository } from './keys';
import type { LogsRepository } from './logs';
import type { MonitorsRepository } from './monitors';

export interface Repositories {
  accounts: AccountsRepository;
  emailTokens: EmailTokensRepository;
  usage: UsageRepository;
  keys: KeysRepository;
  monitors: MonitorsRepository;
  logs: LogsRepository;
  coverage: CoverageRepository;
}
