// gateway composition root: `node --import tsx services/gateway/src/main.ts`.
// Validates the environment, builds PostgreSQL and Redis clients, the key store and the quota
// store, listens on GATEWAY_PORT, and on SIGTERM/SIGINT finishes in-flight calls and writes the
// pending usage before exiting.
import http from 'node:http';
import { Redis } from 'ioredis';
import { ConfigError, createLogger, createMetricsRegistry } from '@sts/common';
import { plansFromEnv } from '@sts/core';
import { createDbClient } from '@sts/db';
import { createKeyStore } from './adapters/keys';
import { createQuotaStore } from './adapters/leasedQuota';
import { createGateway } from './app';
import { loadGatewayEnv, type GatewayEnv } from './env';

export async function start(env: GatewayEnv) {
  const logger = createLogger({ service: 'gateway', level: env.LOG_LEVEL });
  const db = createDbClient({ url: env.DATABASE_URL, poolSize: env.DB_POOL_SIZE });
  const redis = new Redis(env.REDIS_URL, {
    keyPrefix: env.REDIS_KEY_PREFIX,
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    lazyConnect: true,
  });
  redis.on('error', (err: Error) => logger.warn('redis connection error', { error: err.message }));
  const registry = createMetricsRegistry('gateway');
  const readApiHealth = new URL('/healthz', env.READ_API_URL).toString();
  const gateway = createGateway({
    keys: createKeyStore({ db, redis, ttlMs: env.KEY_CACHE_TTL_MS }),
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
    checks: {
      postgres: async () => void (await db.$queryRaw`SELECT 1`),
      redis: async () => void (await redis.ping()),
      'read-api': () =>
        new Promise<void>((resolve, reject) => {
          const req = http.get(readApiHealth, { timeout: 2000 }, (res) => {
            res.resume();
            if (res.statusCode === 200) resolve();
            else reject(new Error(`read-api answered ${res.statusCode}`));
          });
          req.on('timeout', () => req.destroy(new Error('read-api did not answer /healthz in time')));
          req.on('error', reject);
        }),
    },
  });
  // Commands fail fast while Redis is unreachable (no offline queue), so connect before serving.
  await redis.connect();
  const port = await gateway.listen(env.GATEWAY_PORT, env.GATEWAY_HOST);
  return {
    port,
    async stop() {
      await gateway.close();
      redis.disconnect();
      await db.$disconnect();
    },
  };
}

function lifecycle(message: string, meta: Record<string, unknown> = {}): void {
  process.stdout.write(
    `${JSON.stringify({ level: 'info', message, service: 'gateway', ...meta, timestamp: new Date().toISOString() })}\n`,
  );
}

if (require.main === module) {
  let env: GatewayEnv;
  try {
    env = loadGatewayEnv();
  } catch (err) {
    console.error(`gateway: ${err instanceof ConfigError ? err.message : String(err)}`);
    process.exit(2);
  }
  start(env)
    .then((app) => {
      lifecycle('gateway listening', { port: app.port });
      let stopping = false;
      const stop = (signal: string) => {
        if (stopping) return;
        stopping = true;
        lifecycle('gateway stopping', { signal });
        app
          .stop()
          .then(() => process.exit(0))
          .catch((err: unknown) => {
            console.error('gateway did not stop cleanly:', err instanceof Error ? err.message : err);
            process.exit(1);
          });
      };
      process.on('SIGTERM', () => stop('SIGTERM'));
      process.on('SIGINT', () => stop('SIGINT'));
    })
    .catch((err: unknown) => {
      console.error('gateway failed to start:', err instanceof Error ? err.message : err);
      process.exit(1);
    });
}
