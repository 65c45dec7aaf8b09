// read-api composition root: `node --import tsx services/read-api/src/main.ts`, run by runService
// (signals, environment, ops server on OPS_PORT, exit codes: packages/common/src/runService.ts).
// Builds the database client and the social source and listens on READ_API_PORT; stopping stops
// accepting and finishes in-flight requests.
import type { Registry } from 'prom-client';
import { createRedis, runService, type Logger, type RedisClient, type ServiceDefinition } from '@sts/common';
import { createDbClient, migrationsCheck, type Db } from '@sts/db';
import { createSocialSource, createXBilling, type SocialSource, type XBilling } from '@sts/social';
import { createCachedSource } from './adapters/readCache';
import { IDEMPOTENCY_TTL_SEC } from '@sts/api-contract';
import {
  errorMessage,
  monitorLimitsFromEnv,
  plansFromEnv,
  retentionFromEnv,
  webhookSavePolicyFromEnv,
} from '@sts/core';
import { AmqpClient } from '@sts/messaging';
import {
  createUseCases,
  loggedWebhookUrlCheck,
  outboundLimiter,
  previewVia,
  redeliveryBudget,
  secretBoxFromEnv,
  type Publisher,
} from '@sts/usecases';
import { createIdempotencyStore } from './adapters/idempotency';
import { createReadApi, type ReadApiOptions } from './app';
import { loadReadApiEnv, type ReadApiEnv } from './env';

/**
 * The social source read-api serves from. X: the fleet's budget and user cache in Redis, wrapped
 * in the read cache; local: PostgreSQL only, not cached (README, "Read cache").
 */
export function buildSource(
  env: ReadApiEnv,
  deps: { db: Db; logger: Logger; registry: Registry; redis: RedisClient; billing?: XBilling },
): SocialSource {
  const { db, logger, registry, redis, billing } = deps;
  if (env.SOCIAL_SOURCE !== 'x') return createSocialSource(env, { db });
  // what X bills is counted where it is read (a cache hit reads nothing)
  const source = createCachedSource(createSocialSource(env, { db, redis, registry, ...(billing && { billing }) }), {
    redis,
    ttls: {
      profileMs: env.READ_CACHE_PROFILE_TTL_MS,
      timelineMs: env.READ_CACHE_TIMELINE_TTL_MS,
      tweetMs: env.READ_CACHE_TWEET_TTL_MS,
      searchMs: env.READ_CACHE_SEARCH_TTL_MS,
    },
    onError: (err) => logger.warn('read cache unavailable', { err: errorMessage(err) }),
  });
  return source;
}

/**
 * Publishes over `amqp`, connecting at the first message (test pings, redeliveries and recoveries
 * are rare; a read-api that never publishes never opens a connection). start() retries until
 * connected, so while RabbitMQ is down those calls answer 503 after the publish timeout, as in the
 * dashboard, and the reads are untouched.
 */
function lazyPublisher(amqp: AmqpClient, logger: Logger): Publisher {
  let started = false;
  return {
    publish(routingKey, payload, opts) {
      if (!started) {
        started = true;
        amqp.start().catch((err: unknown) => logger.warn('RabbitMQ client did not start', { err: errorMessage(err) }));
      }
      return amqp.publish(routingKey, payload, opts);
    },
  };
}

/**
 * The management endpoints' dependencies: the use-cases as the dashboard builds them (plan limits,
 * the save-time webhook URL rule, the secret box, the AMQP publisher, the outbound bound and the
 * preview's cache in Redis) and the Idempotency-Key store.
 */
function buildManage(
  env: ReadApiEnv,
  deps: { db: Db; logger: Logger; redis: RedisClient; publisher: Publisher; source: SocialSource },
): NonNullable<ReadApiOptions['manage']> {
  const { db, logger, redis, publisher, source } = deps;
  // a bad WEBHOOK_ALLOWED_PORTS / WEBHOOK_ALLOW_PRIVATE_HOSTS fails the start, naming the variable
  const urlPolicy = webhookSavePolicyFromEnv({
    WEBHOOK_ALLOWED_PORTS: env.WEBHOOK_ALLOWED_PORTS,
    WEBHOOK_ALLOW_PRIVATE_HOSTS: env.WEBHOOK_ALLOW_PRIVATE_HOSTS,
  });
  const secretBox = secretBoxFromEnv(env.SECRETS_ENCRYPTION_KEY, env.SECRETS_ENCRYPTION_KEYS_OLD);
  const useCases = createUseCases({
    db,
    plans: plansFromEnv(env),
    monitorLimits: monitorLimitsFromEnv(env),
    retention: retentionFromEnv(env),
    secretBox,
    publisher,
    outboundLimit: outboundLimiter(redis, env.WEBHOOK_TEST_MAX_PER_MIN),
    redeliveryBudget: redeliveryBudget(redis, env.REDELIVERY_MAX_PER_HOUR),
    requireVerifiedEmail: true,
    webhookUrlCheck: loggedWebhookUrlCheck(urlPolicy, logger),
    preview: previewVia(source, redis, {
      logger,
      perMinute: env.PREVIEW_MAX_PER_MIN,
      perDay: env.PREVIEW_MAX_PER_DAY,
    }),
  });
  return { useCases, idempotency: createIdempotencyStore(redis, { ttlSec: IDEMPOTENCY_TTL_SEC, box: secretBox }) };
}

export const readApiService: ServiceDefinition<ReadApiEnv> = {
  name: 'read-api',
  startedMessage: 'read-api listening',
  loadEnv: loadReadApiEnv,
  async start(env, { logger, registry }) {
    const db = createDbClient({ url: env.DATABASE_URL, poolSize: env.DB_POOL_SIZE });
    const redis = createRedis(env, { maxRetriesPerRequest: 2, logger });
    // the X reads this replica makes, counted as X bills them (x_billable_total)
    const billing = createXBilling({ db, registry, logger });
    const source = buildSource(env, { db, logger, registry, redis, billing });
    // bounded below the gateway's 10 s: a broker that does not confirm is a 503 the client sees
    const amqp = new AmqpClient({ url: env.AMQP_URL, logger, name: 'read-api', publishTimeoutMs: 5000 });
    const app = createReadApi({
      manage: buildManage(env, { db, logger, redis, publisher: lazyPublisher(amqp, logger), source }),
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
        redis: async () => void (await redis.ping()),
      },
      async stop() {
        await app.close();
        await amqp.stop();
        await billing.close();
        await db.$disconnect();
        redis.disconnect();
      },
    };
  },
};

if (require.main === module) runService(readApiService);
