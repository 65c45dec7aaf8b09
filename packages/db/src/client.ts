import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient } from './generated/prisma/client';

export interface DbClientOptions {
  /** postgresql:// connection string */
  url: string;
  /** pool size; defaults to 10 */
  poolSize?: number;
}

export type Db = PrismaClient;

/**
 * Prisma Client over the node-postgres driver adapter (no native query engine). Works through
 * PgBouncer in transaction mode: the adapter sends unnamed statements only (no
 * `statementNameGenerator`), and no startup parameter beyond what PgBouncer tracks; the query
 * timeout is the database's default (settings.ts), not a parameter of this pool.
 */
export function createDbClient(options: DbClientOptions): PrismaClient {
  const adapter = new PrismaPg({
    connectionString: options.url,
    max: options.poolSize ?? 10,
    connectionTimeoutMillis: 5_000,
    idleTimeoutMillis: 30_000,
  });
  return new PrismaClient({ adapter });
}
