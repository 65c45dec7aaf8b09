/**
 * Composition root of the webhook dispatcher: `node --import tsx services/webhook-dispatcher/src/main.ts`,
 * run by runService (signals, environment, ops server on OPS_PORT, exit codes:
 * packages/common/src/runService.ts). Builds the database client, the messaging client and the
 * dispatcher, and starts consuming. Stopping: no new messages, the deliveries in flight finish
 * and are logged and acknowledged, then connections close.
 */
import { runService, type ServiceDefinition } from '@sts/common';
import { createDbClient, migrationsCheck } from '@sts/db';
import { AmqpClient } from '@sts/messaging';
import { createDispatcher, dispatcherOptionsFromEnv } from './app';
import { createPrismaRepository } from './adapters/repository';
import { dispatcherPoolSize, parseDispatcherEnv, type DispatcherEnv } from './env';

export const dispatcherService: ServiceDefinition<DispatcherEnv> = {
  name: 'webhook-dispatcher',
  loadEnv: parseDispatcherEnv,
  async start(env, { logger, registry, untilStopped }) {
    const db = createDbClient({ url: env.DATABASE_URL, poolSize: dispatcherPoolSize(env) });
    const amqp = new AmqpClient({ url: env.AMQP_URL, logger, name: 'webhook-dispatcher' });
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
    try {
      await untilStopped(amqp.start());
      await dispatcher.start();
    } catch (err) {
      await Promise.all([dispatcher.stop(), amqp.stop().catch(() => undefined)]);
      dispatcher.close();
      await db.$disconnect();
      throw err;
    }
    return {
      info: { prefetch: env.DISPATCH_PREFETCH },
      checks: {
        database: () => repository.ping(),
        rabbitmq: () => amqp.check(),
        secrets: () => dispatcher.check(),
        migrations: migrationsCheck(db),
      },
      async stop() {
        logger.info('webhook-dispatcher stopping: finishing deliveries in flight');
        // amqp.stop() cancels the consumer and waits for the handlers; dispatcher.stop() bounds them
        // by DISPATCH_SHUTDOWN_GRACE_MS (unfinished deliveries are handed back unlogged)
        await Promise.all([dispatcher.stop(), amqp.stop()]);
        dispatcher.close();
        await db.$disconnect();
      },
    };
  },
};

if (require.main === module) runService(dispatcherService);
