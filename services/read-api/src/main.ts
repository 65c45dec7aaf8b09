// read-api composition root: `node --import tsx services/read-api/src/main.ts`, run by runService
// (signals, environment, ops server on OPS_PORT, exit codes: packages/common/src/runService.ts).
// Builds the database client and the social source and listens on READ_API_PORT; stopping stops
// accepting and finishes in-flight requests.
import type { Registry } from 'prom-client';
import { createRedis, runService, type Logger, type RedisClient, type ServiceDefinition } from '@sts/common';
import { createDbClient, migrationsCheck, type Db } from '@sts/db';
import { createSocialSource, type SocialSource } from '@sts/social';
import { createCachedSource } from './adapters/readCache';
import { retentionFromEnv } from '@sts/core';
import { createReadApi } from './app';
import { loadReadApiEnv, type ReadApiEnv } from './env';

/**
 * The social source read-api serves from. X: the fleet's budget and user cache in Redis, wrapped
 * in the read cache; local: PostgreSQL only, not cached (README, "Read cache").
 */
export function buildSource(
  env: ReadApiEnv,
  deps: { db: Db; logger: Logger; registry: Registry },
): { source: SocialSource; redis?: RedisClient } {
  const { db, logger, registry } = deps;
  if (env.SOCIAL_SOURCE !== 'x') return { source: createSocialSource(env, { db }) };
  const redis = createRedis(env, { maxRetriesPerRequest: 2, logger });
  const source = createCachedSource(createSocialSource(env, { db, redis, registry }), {
    redis,
    ttls: {
      profileMs: env.READ_CACHE_PROFILE_TTL_MS,
      timelineMs: env.READ_CACHE_TIMELINE_TTL_MS,
      tweetMs: env.READ_CACHE_TWEET_TTL_MS,
      searchMs: env.READ_CACHE_SEARCH_TTL_MS,
    },
    onError: (err) =>
      logger.warn('read cache unavailable', { error: err instanceof Error ? err.message : String(err) }),
  });
  return { source, redis };
}

export const readApiService: ServiceDefinition<ReadApiEnv> = {
  name: 'read-api',
  startedMessage: 'read-api listening',
  loadEnv: loadReadApiEnv,
  async start(env, { logger, registry }) {
    const db = createDbClient({ url: env.DATABASE_URL, poolSize: env.DB_POOL_SIZE });
    const { source, redis } = buildSource(env, { db, logger, registry });
    const app = createReadApi({
      db,
      source,
      internalToken: env.INTERNAL_TOKEN,
      logger,
      registry,
      userCacheTtlMs: env.USER_CACHE_TTL_MS,
      shutdownGraceMs: env.SHUTDOWN_GRACE_MS,
      retention: retentionFromEnv(env),
    });
    const port = await app.listen(env.READ_API_PORT, env.READ_API_HOST);
    return {
      info: { port, host: env.READ_API_HOST, socialSource: source.name },
      checks: {
        postgres: async () => void (await db.$queryRaw`SELECT 1`),
        migrations: migrationsCheck(db),
        ...(redis && { redis: async () => void (await redis.ping()) }),
      },
      async stop() {
        await app.close();
        await db.$disconnect();
        redis?.disconnect();
      },
    };
  },
};

if (require.main === module) runService(readApiService);
