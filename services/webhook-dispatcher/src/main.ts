/**
 * Composition root of the webhook dispatcher: `node --import tsx services/webhook-dispatcher/src/main.ts`,
 * run by runService (signals, environment, ops server on OPS_PORT, exit codes:
 * packages/common/src/runService.ts). Builds the database client, the messaging client and the
 * dispatcher, and starts consuming. Stopping: no new messages, the deliveries in flight finish
 * and are logged and acknowledged, then connections close.
 */
import { directDatabaseUrl, runService, type Logger, type ServiceDefinition } from '@sts/common';
import { createDbClient, DirectSession, migrationsCheck, sqlPool, type Db } from '@sts/db';
import { errorMessage } from '@sts/core';
import { AmqpClient } from '@sts/messaging';
import type client from 'prom-client';
import { createDispatcher, dispatcherOptionsFromEnv } from './app';
import { DISPATCHER_SESSION_NAME, listenForContextChanges } from './adapters/contextChanges';
import { recordFillMark } from './adapters/attemptWriter';
import type { MonitorContext } from './adapters/monitorReader';
import { createPrismaRepository } from './adapters/repository';
import { MonitorContextCache } from './contextCache';
import { createHoldingStore } from './adapters/holding';
import { dispatcherPoolSize, parseDispatcherEnv, type DispatcherEnv } from './env';
import { registerCacheMetrics } from './metrics';

/**
 * The monitor cache and its direct session (DISPATCH_CONTEXT_CACHE_MS > 0). The session connects
 * in the background: until its first heartbeat returns, every delivery reads its monitor.
 */
function startContextCache(env: DispatcherEnv, db: Db, logger: Logger, registry: client.Registry) {
  if (env.DISPATCH_CONTEXT_CACHE_MS === 0) return { cache: undefined, stop: () => Promise.resolve() };
  const cache = new MonitorContextCache<MonitorContext>({ maxAgeMs: env.DISPATCH_CONTEXT_CACHE_MS });
  registerCacheMetrics(registry, cache);
  const session = new DirectSession({
    databaseUrl: directDatabaseUrl(env),
    applicationName: DISPATCHER_SESSION_NAME,
    logger,
  });
  const pool = sqlPool(db);
  const changes = listenForContextChanges(cache, session, {
    logger,
    // the heartbeat goes through the pool, as a change does (adapters/contextChanges.ts)
    notify: (channel, payload) => pool.query('SELECT pg_notify($1, $2)', [channel, payload]),
  });
  session
    .start()
    .catch((err: unknown) =>
      logger.warn('monitor cache: direct session not connected yet; retrying', { err: errorMessage(err) }),
    );
  return {
    cache,
    async stop() {
      await changes.close();
      await session.stop();
    },
  };
}

export const dispatcherService: ServiceDefinition<DispatcherEnv> = {
  name: 'webhook-dispatcher',
  loadEnv: parseDispatcherEnv,
  async start(env, { logger, registry, untilStopped }) {
    const db = createDbClient({ url: env.DATABASE_URL, poolSize: dispatcherPoolSize(env) });
    const amqp = new AmqpClient({ url: env.AMQP_URL, logger, name: 'webhook-dispatcher' });
    const contexts = startContextCache(env, db, logger, registry);
    const repository = createPrismaRepository(db, {
      cache: contexts.cache,
      recordLingerMs: env.DISPATCH_RECORD_LINGER_MS,
      recordFillTo: recordFillMark(env.DISPATCH_PREFETCH),
    });
    const dispatcher = createDispatcher({
      repository,
      holding: createHoldingStore(db, { endpointWritten: (id) => contexts.cache?.endpointWritten(id) }),
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
      await Promise.all([db.$disconnect(), contexts.stop()]);
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
        await Promise.all([db.$disconnect(), contexts.stop()]);
      },
    };
  },
};

if (require.main === module) runService(dispatcherService);
