// read-api composition root: `node --import tsx services/read-api/src/main.ts`.
// Reads and validates the environment, builds the database client, the social source, logger
// and metrics, starts listening, and on SIGTERM/SIGINT stops accepting, finishes in-flight
// requests and exits 0.
import { ConfigError, createLogger, createMetricsRegistry } from '@sts/common';
import { createDbClient } from '@sts/db';
import { createSocialSource } from '@sts/social';
import { createReadApi } from './app';
import { loadReadApiEnv } from './env';

async function main(): Promise<void> {
  let env;
  try {
    env = loadReadApiEnv();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`read-api: ${err.message}`);
      process.exit(2);
    }
    throw err;
  }
  const logger = createLogger({ service: 'read-api', level: env.LOG_LEVEL });
  // start and stop lines are printed whatever LOG_LEVEL says: supervisors wait for them
  const lifecycle = (message: string, meta: Record<string, unknown> = {}) => {
    if (logger.isLevelEnabled('info')) logger.info(message, meta);
    else {
      const line = { level: 'info', message, service: 'read-api', ...meta, timestamp: new Date().toISOString() };
      process.stdout.write(`${JSON.stringify(line)}\n`);
    }
  };
  const db = createDbClient({ url: env.DATABASE_URL, poolSize: env.DB_POOL_SIZE });
  const source = createSocialSource(env, { db });
  const registry = createMetricsRegistry('read-api');
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
  lifecycle('read-api listening', { port, host: env.READ_API_HOST, socialSource: source.name });

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    lifecycle('read-api stopping', { signal });
    app
      .close()
      .then(() => db.$disconnect())
      .then(() => {
        lifecycle('read-api stopped');
        process.exit(0);
      })
      .catch((err: unknown) => {
        logger.error('read-api did not stop cleanly', { err });
        process.exit(1);
      });
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((err: unknown) => {
  console.error('read-api failed to start:', err instanceof Error ? err.message : err);
  process.exit(1);
});
