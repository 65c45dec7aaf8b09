import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import { PrismaClient } from './generated/prisma/client';

export interface DbClientOptions {
  /** postgresql:// connection string */
  url: string;
  /** pool size; defaults to 10 */
  poolSize?: number;
}

export type Db = PrismaClient;

/** The node-postgres pool under a Db: parameterised statements with no Prisma runtime in between. */
export type SqlPool = Pick<pg.Pool, 'query'>;

const pools = new WeakMap<PrismaClient, pg.Pool>();

/**
 * Prisma Client over the node-postgres driver adapter (no native query engine). Works through
 * PgBouncer in transaction mode: the adapter sends unnamed statements only (no
 * `statementNameGenerator`), and no startup parameter beyond what PgBouncer tracks; the query
 * timeout is the database's default (settings.ts), not a parameter of this pool. The pool is the
 * client's own (ended by `$disconnect()`); `sqlPool(db)` hands it out for statements on a hot path.
 */
export function createDbClient(options: DbClientOptions): PrismaClient {
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.poolSize ?? 10,
    connectionTimeoutMillis: 5_000,
    idleTimeoutMillis: 30_000,
  });
  const db = new PrismaClient({ adapter: new PrismaPg(pool, { disposeExternalPool: true }) });
  pools.set(db, pool);
  return db;
}

/**
 * The pool a client of createDbClient() runs on, for the few statements where Prisma's runtime
 * per query (its plan interpreter, argument mapping, result conversion) costs more than the
 * statement: plain node-postgres, the same connections and budget (DB_POOL_SIZE), unnamed
 * statements (PgBouncer-safe). Errors are node-postgres's (`code` is the SQLSTATE), not Prisma's.
 */
export function sqlPool(db: PrismaClient): SqlPool {
  const pool = pools.get(db);
  if (!pool) throw new Error('sqlPool: not a client made by createDbClient()');
  return pool;
}
