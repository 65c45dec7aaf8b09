/**
 * Composition root of the dashboard: validates the environment, builds PostgreSQL, Redis and
 * the AMQP publisher, the use-cases (@sts/usecases) and the express app; serves the app on
 * DASHBOARD_PORT and /healthz, /readyz, /metrics on the internal OPS_PORT. SIGTERM / SIGINT stop
 * it gracefully (requests in flight finish, then connections close).
 */
import http from 'node:http';
import { Redis } from 'ioredis';
import { ConfigError, createLogger, createMetricsRegistry, listenOn, startOpsServer } from '@sts/common';
import { createDbClient } from '@sts/db';
import { AmqpClient } from '@sts/messaging';
import { createUseCases, evictApiKeyVia, secretBoxFromEnv } from '@sts/usecases';
import { monitorLimitsFromEnv, plansFromEnv } from '@sts/core';
import { createSignInThrottle } from './adapters/throttle';
import { createApp } from './app';
import { parseDashboardEnv } from './env';

export interface RunningDashboard {
  port: number;
  opsPort: number;
  stop(): Promise<void>;
}

export async function start(source: NodeJS.ProcessEnv = process.env): Promise<RunningDashboard> {
  const env = parseDashboardEnv(source);
  const logger = createLogger({ service: 'dashboard', level: env.LOG_LEVEL });
  const db = createDbClient({ url: env.DATABASE_URL, poolSize: env.DB_POOL_SIZE });
  const redis = new Redis(env.REDIS_URL, {
    keyPrefix: env.REDIS_KEY_PREFIX,
    maxRetriesPerRequest: 2,
    lazyConnect: true,
  });
  redis.on('error', (err: Error) => logger.warn('redis connection error', { error: err.message }));
  const amqp = new AmqpClient({ url: env.AMQP_URL, logger, name: 'dashboard' });
  const useCases = createUseCases({
    db,
    plans: plansFromEnv(env),
    monitorLimits: monitorLimitsFromEnv(env),
    secretBox: secretBoxFromEnv(env.SECRETS_ENCRYPTION_KEY),
    publisher: amqp,
    evictApiKey: evictApiKeyVia(redis),
  });
  const app = createApp({
    useCases,
    redis,
    throttle: createSignInThrottle({
      redis,
      perEmail: env.SIGNIN_MAX_PER_EMAIL,
      perAddress: env.SIGNIN_MAX_PER_ADDRESS,
      windowSec: env.SIGNIN_WINDOW_SEC,
    }),
    logger,
    sessionSecrets: env.SESSION_SECRET,
    sessionPrefix: env.SESSION_KEY_PREFIX,
    sessionTtlSec: env.SESSION_TTL_SEC,
    cookieSecure: env.COOKIE_SECURE,
    trustProxy: env.TRUST_PROXY,
    apiUrl: env.API_PUBLIC_URL.replace(/\/$/, ''),
    liveRefreshMs: env.LIVE_REFRESH_MS,
  });
  const registry = createMetricsRegistry('dashboard');
  const server = http.createServer(app);
  server.headersTimeout = 20_000;
  server.requestTimeout = 30_000;
  let ops: Awaited<ReturnType<typeof startOpsServer>> | undefined;
  try {
    await redis.connect();
    // Not awaited (start() retries until connected): while RabbitMQ is down the pages work,
    // /readyz says rabbitmq is not connected, and only Test webhook / Redeliver answer 503.
    amqp
      .start()
      .catch((err: unknown) =>
        logger.warn('RabbitMQ client did not start', { error: err instanceof Error ? err.message : String(err) }),
      );
    ops = await startOpsServer({
      port: env.OPS_PORT,
      registry,
      checks: {
        postgres: async () => void (await db.$queryRaw`SELECT 1`),
        redis: async () => void (await redis.ping()),
        rabbitmq: () => amqp.check(),
      },
    });
    const port = await listenOn(server, env.DASHBOARD_PORT, env.DASHBOARD_HOST);
    logger.info('dashboard started', { port, opsPort: ops.port });
    let stopping: Promise<void> | undefined;
    const opsServer = ops;
    const stop = () =>
      (stopping ??= (async () => {
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeIdleConnections();
        });
        await opsServer.close();
        await amqp.stop();
        redis.disconnect();
        await db.$disconnect();
        logger.info('dashboard stopped');
      })());
    return { port, opsPort: ops.port, stop };
  } catch (err) {
    server.close();
    await ops?.close();
    await amqp.stop().catch(() => undefined);
    redis.disconnect();
    await db.$disconnect();
    throw err;
  }
}

if (require.main === module) {
  start()
    .then((running) => {
      const shutdown = (signal: string) => {
        running.stop().then(
          () => process.exit(0),
          (err: unknown) => {
            console.error(`dashboard: shutdown after ${signal} failed`, err);
            process.exit(1);
          },
        );
      };
      process.once('SIGTERM', () => shutdown('SIGTERM'));
      process.once('SIGINT', () => shutdown('SIGINT'));
    })
    .catch((err: unknown) => {
      if (err instanceof ConfigError) {
        console.error(`dashboard: ${err.message}`);
        process.exit(2);
      }
      console.error('dashboard: failed to start:', err instanceof Error ? err.message : err);
      process.exit(1);
    });
}
