import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient } from './generated/prisma/client';

export interface DbClientOptions {
  /** postgresql:// connection string */
  url: string;
  /** pool size; defaults to 10 */
  poolSize?: number;
  /** statement timeout in milliseconds; defaults to 15 000 */
  statementTimeoutMs?: number;
}

export type Db = PrismaClient;

/** Prisma Client over the node-postgres driver adapter (no native query engine). */
export function createDbClient(options: DbClientOptions): PrismaClient {
  const adapter = new PrismaPg({
    connectionString: options.url,
    max: options.poolSize ?? 10,
    statement_timeout: options.statementTimeoutMs ?? 15_000,
    connectionTimeoutMillis: 5_000,
    idleTimeoutMillis: 30_000,
  });
  return new PrismaClient({ adapter });
}
