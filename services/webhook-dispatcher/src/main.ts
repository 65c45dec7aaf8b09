/**
 * Composition root of the webhook dispatcher: reads and validates the environment, builds the
 * database client, the messaging client, the dispatcher and the ops server (/healthz, /readyz,
 * /metrics), and starts consuming. SIGTERM / SIGINT stop it gracefully: no new messages, the
 * deliveries in flight finish and are logged and acknowledged, then connections close.
 */
import { ConfigError, createLogger, createMetricsRegistry, startOpsServer } from '@sts/common';
import { createDbClient } from '@sts/db';
import { AmqpClient } from '@sts/messaging';
import { createDispatcher, dispatcherOptionsFromEnv, type Dispatcher } from './app';
import { createPrismaRepository } from './adapters/repository';
import { parseDispatcherEnv } from './env';

export interface RunningDispatcher {
  dispatcher: Dispatcher;
  /** port of the ops server */
  port: number;
  stop(): Promise<void>;
}

export async function start(source: NodeJS.ProcessEnv = process.env): Promise<RunningDispatcher> {
  const env = parseDispatcherEnv(source);
  const logger = createLogger({ service: 'webhook-dispatcher', level: env.LOG_LEVEL });
  const db = createDbClient({ url: env.DATABASE_URL, poolSize: env.DISPATCH_DB_POOL_SIZE });
  const amqp = new AmqpClient({ url: env.AMQP_URL, logger, name: 'webhook-dispatcher' });
  const registry = createMetricsRegistry('webhook-dispatcher');
  const repository = createPrismaRepository(db);
  const dispatcher = createDispatcher({
    repository,
    messaging: amqp,
    logger,
    registry,
    ...dispatcherOptionsFromEnv(env),
  });
  if (env.WEBHOOK_ALLOW_PRIVATE_HOSTS.length) {
    logger.warn('private-address check disabled for some hosts (WEBHOOK_ALLOW_PRIVATE_HOSTS)', {
      hosts: env.WEBHOOK_ALLOW_PRIVATE_HOSTS,
    });
  }
  const ops = await startOpsServer({
    port: env.DISPATCHER_PORT,
    registry,
    checks: { database: () => repository.ping(), rabbitmq: () => amqp.check(), secrets: () => dispatcher.check() },
  });
  try {
    await amqp.start();
    await dispatcher.start();
  } catch (err) {
    await Promise.all([dispatcher.stop(), amqp.stop().catch(() => undefined)]);
    dispatcher.close();
    await ops.close();
    await db.$disconnect();
    throw err;
  }
  logger.info('webhook-dispatcher started', { port: ops.port, prefetch: env.DISPATCH_PREFETCH });

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      logger.info('webhook-dispatcher stopping: finishing deliveries in flight');
      // amqp.stop() cancels the consumer and waits for the handlers; dispatcher.stop() bounds them
      // by DISPATCH_SHUTDOWN_GRACE_MS (unfinished deliveries are handed back unlogged)
      await Promise.all([dispatcher.stop(), amqp.stop()]);
      dispatcher.close();
      await ops.close();
      await db.$disconnect();
      logger.info('webhook-dispatcher stopped');
    })());
  return { dispatcher, port: ops.port, stop };
}

if (require.main === module) {
  start()
    .then((running) => {
      const shutdown = (signal: string) => {
        running.stop().then(
          () => process.exit(0),
          (err: unknown) => {
            console.error(`webhook-dispatcher: shutdown after ${signal} failed`, err);
            process.exit(1);
          },
        );
      };
      process.once('SIGTERM', () => shutdown('SIGTERM'));
      process.once('SIGINT', () => shutdown('SIGINT'));
    })
    .catch((err: unknown) => {
      console.error(
        err instanceof ConfigError ? `webhook-dispatcher: ${err.message}` : 'webhook-dispatcher: failed to start',
        err instanceof ConfigError ? '' : err,
      );
      process.exit(1);
    });
}
