// gateway composition root: `node --import tsx services/gateway/src/main.ts`, run by runService
// (signals, environment, ops server on OPS_PORT, exit codes: packages/common/src/runService.ts).
// Builds PostgreSQL and Redis clients, the key store and the quota store, listens on GATEWAY_PORT;
// stopping finishes in-flight calls and writes the pending usage.
//
// Readiness depends on no shared backend: a Redis, read-api or PostgreSQL blip answers clients
// with the gateway's JSON 503 instead of taking every gateway pod out of the load balancer. Only
// pending migrations (checked until none is, then never again) keep it unready. The live-key
// filter is built before listening when PostgreSQL answers (else lookups ask the database until a
// retry builds it); its apikey.changed subscription connects in the background, RabbitMQ being
// no readiness dependency either.
import { createRedis, runService, type ServiceDefinition } from '@sts/common';
import { plansFromEnv } from '@sts/core';
import { createDbClient, migrationsCheck } from '@sts/db';
import { AmqpClient } from '@sts/messaging';
import { createKeyStore } from './adapters/keys';
import { createLiveKeys, keyChangesConsumer } from './adapters/liveKeys';
import { createQuotaNotices } from './adapters/quotaNotices';
import { createQuotaStore } from './adapters/leasedQuota';
import { createGateway } from './app';
import { hitFeedConsumer } from './adapters/hitFeed';
import { createHitHistory } from './adapters/hitHistory';
import { createStreamSlots } from './adapters/streamSlots';
import { createCursorCodec } from './domain/streamCursor';
import { StreamHub } from './stream/hub';
import { loadGatewayEnv, type GatewayEnv } from './env';

export const gatewayService: ServiceDefinition<GatewayEnv> = {
  name: 'gateway',
  startedMessage: 'gateway listening',
  loadEnv: loadGatewayEnv,
  async start(env, { logger, registry, untilStopped }) {
    const db = createDbClient({ url: env.DATABASE_URL, poolSize: env.DB_POOL_SIZE });
    // REDIS_MODE: one server or a Redis Cluster (packages/common/src/redis.ts)
    const redis = createRedis(env, { maxRetriesPerRequest: 1, enableOfflineQueue: false, lazyConnect: true, logger });
    const live = createLiveKeys({ db, logger, rebuildMs: env.KEY_FILTER_REBUILD_MS, syncMs: env.KEY_FILTER_SYNC_MS });
    const keys = createKeyStore({
      db,
      redis,
      ttlMs: env.KEY_CACHE_TTL_MS,
      unknownPerMinute: env.UNKNOWN_KEY_MAX_PER_MIN,
      filter: live,
    });
    const amqp = new AmqpClient({ url: env.AMQP_URL, logger, name: 'gateway' });
    const plans = plansFromEnv(env);
    const quota = createQuotaStore({ db, redis });
    const streams = new StreamHub({
      history: createHitHistory(db),
      keys,
      slots: createStreamSlots(redis, env.STREAM_HEARTBEAT_MS * 3 + 5000),
      quota,
      cursors: createCursorCodec(env.INTERNAL_TOKEN),
      plans,
      logger,
      perAccount: { free: 0, starter: env.STREAM_MAX_PER_ACCOUNT },
      maxStreams: env.STREAM_MAX_PER_PROCESS,
      heartbeatMs: env.STREAM_HEARTBEAT_MS,
      maxLifetimeMs: env.STREAM_MAX_LIFETIME_S * 1000,
      maxUnsentBytes: env.STREAM_MAX_UNSENT_BYTES,
    });
    const gateway = createGateway({
      keys,
      trustedProxyHops: env.GATEWAY_TRUSTED_PROXY_HOPS,
      quotaNotices: createQuotaNotices(db, plans),
      quota,
      plans,
      streams,
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
    await untilStopped(
      live
        .rebuild()
        .catch((err: unknown) =>
          logger.warn('live-key filter not built; retrying', { err: err instanceof Error ? err.message : String(err) }),
        ),
    );
    live.start();
    void amqp.start().catch(() => undefined);
    // one connection, two broadcast consumers: key changes, and live hits for the streams
    amqp
      .consume(keyChangesConsumer(live, keys, logger, (hash) => streams.keyRevoked(hash)))
      .catch((err: unknown) =>
        logger.warn('apikey.changed subscription failed', { err: err instanceof Error ? err.message : String(err) }),
      );
    amqp
      .consume(
        hitFeedConsumer({
          onHit: (hit) => streams.deliver(hit),
          onResync: () => {
            logger.info('monitor.hit subscribed, streams re-read what they may have missed');
            streams.resync();
          },
        }),
      )
      .catch((err: unknown) =>
        logger.warn('monitor.hit subscription failed', { err: err instanceof Error ? err.message : String(err) }),
      );
    const port = await gateway.listen(env.GATEWAY_PORT, env.GATEWAY_HOST);
    return {
      info: { port },
      checks: { migrations: migrationsCheck(db) },
      async stop() {
        live.stop();
        await gateway.close();
        await amqp.stop().catch(() => undefined);
        redis.disconnect();
        await db.$disconnect();
      },
    };
  },
};

if (require.main === module) runService(gatewayService);
