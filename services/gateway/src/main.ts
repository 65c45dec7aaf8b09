// gateway composition root: `node --import tsx services/gateway/src/main.ts`, run by runService
// (signals, environment, ops server on OPS_PORT, exit codes: packages/common/src/runService.ts).
// Builds PostgreSQL and Redis clients, the key store and the quota store, listens on GATEWAY_PORT;
// stopping finishes in-flight calls and writes the pending usage.
//
// Readiness depends on no shared backend: a Redis, read-api or PostgreSQL blip answers clients
// with the gateway's JSON 503 instead of taking every gateway pod out of the load balancer. Only
// pending migrations (checked until none is, then never again) keep it unready.
import { createRedis, runService, type ServiceDefinition } from '@sts/common';
import { plansFromEnv } from '@sts/core';
import { createDbClient, migrationsCheck } from '@sts/db';
import { createKeyStore } from './adapters/keys';
import { createQuotaNotices } from './adapters/quotaNotices';
import { createQuotaStore } from './adapters/leasedQuota';
import { createGateway } from './app';
import { loadGatewayEnv, type GatewayEnv } from './env';

export const gatewayService: ServiceDefinition<GatewayEnv> = {
  name: 'gateway',
  startedMessage: 'gateway listening',
  loadEnv: loadGatewayEnv,
  async start(env, { logger, registry, untilStopped }) {
    const db = createDbClient({ url: env.DATABASE_URL, poolSize: env.DB_POOL_SIZE });
    // REDIS_MODE: one server or a Redis Cluster (packages/common/src/redis.ts)
    const redis = createRedis(env, { maxRetriesPerRequest: 1, enableOfflineQueue: false, lazyConnect: true, logger });
    const gateway = createGateway({
      keys: createKeyStore({
        db,
        redis,
        ttlMs: env.KEY_CACHE_TTL_MS,
        unknownPerMinute: env.UNKNOWN_KEY_MAX_PER_MIN,
      }),
      trustedProxyHops: env.GATEWAY_TRUSTED_PROXY_HOPS,
      quotaNotices: createQuotaNotices(db, plansFromEnv(env)),
      quota: createQuotaStore({ db, redis }),
      plans: plansFromEnv(env),
      readApiUrl: env.READ_API_URL,
      internalToken: env.INTERNAL_TOKEN,
      logger,
      upstreamTimeoutMs: env.UPSTREAM_TIMEOUT_MS,
      upstreamConnectTimeoutMs: env.UPSTREAM_CONNECT_TIMEOUT_MS,
      upstreamMaxSockets: env.UPSTREAM_MAX_SOCKETS,
      upstreamPipelineDepth: env.UPSTREAM_PIPELINE_DEPTH,
      upstreamPipelineMaxMs: env.UPSTREAM_PIPELINE_MAX_MS,
      shutdownGraceMs: env.SHUTDOWN_GRACE_MS,
      flushIntervalMs: env.USAGE_FLUSH_MS,
      registry,
    });
    // Commands fail fast while Redis is unreachable (no offline queue), so connect before serving.
    await untilStopped(redis.connect());
    const port = await gateway.listen(env.GATEWAY_PORT, env.GATEWAY_HOST);
    return {
      info: { port },
      checks: { migrations: migrationsCheck(db) },
      async stop() {
        await gateway.close();
        redis.disconnect();
        await db.$disconnect();
      },
    };
  },
};

if (require.main === module) runService(gatewayService);
