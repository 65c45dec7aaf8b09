// read-api composition root: `node --import tsx services/read-api/src/main.ts`, run by runService
// (signals, environment, ops server on OPS_PORT, exit codes: packages/common/src/runService.ts).
// Builds the database client and the social source and listens on READ_API_PORT; stopping stops
// accepting and finishes in-flight requests.
import { runService, type ServiceDefinition } from '@sts/common';
import { createDbClient, migrationsCheck } from '@sts/db';
import { createSocialSource } from '@sts/social';
import { createReadApi } from './app';
import { loadReadApiEnv, type ReadApiEnv } from './env';

export const readApiService: ServiceDefinition<ReadApiEnv> = {
  name: 'read-api',
  startedMessage: 'read-api listening',
  loadEnv: loadReadApiEnv,
  async start(env, { logger, registry }) {
    const db = createDbClient({ url: env.DATABASE_URL, poolSize: env.DB_POOL_SIZE });
    const source = createSocialSource(env, { db });
    const app = createReadApi({
      db,
      source,
      internalToken: env.INTERNAL_TOKEN,
      logger,
      registry,
      userCacheTtlMs: env.USER_CACHE_TTL_MS,
      shutdownGraceMs: env.SHUTDOWN_GRACE_MS,
    });
    const port = await app.listen(env.READ_API_PORT, env.READ_API_HOST);
    return {
      info: { port, host: env.READ_API_HOST, socialSource: source.name },
      checks: { postgres: async () => void (await db.$queryRaw`SELECT 1`), migrations: migrationsCheck(db) },
      async stop() {
        await app.close();
        await db.$disconnect();
      },
    };
  },
};

if (require.main === module) runService(readApiService);
