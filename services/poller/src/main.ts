// poller composition root: `node --import tsx services/poller/src/main.ts`, run by runService
// (signals, environment, ops server on OPS_PORT, exit codes: packages/common/src/runService.ts).
// Builds PostgreSQL, Redis, RabbitMQ and the social source, runs the poller and the outbox relay;
// stopping finishes the polls and the relay round in flight before closing its connections.
import { Counter, Histogram } from 'prom-client';
import {
  createRedis,
  directDatabaseUrl,
  runService,
  type Logger,
  type ServiceContext,
  type ServiceDefinition,
  type StartedService,
} from '@sts/common';
import { errorMessage, plansFromEnv } from '@sts/core';
import { createDbClient, DirectSession, migrationsCheck, type Db } from '@sts/db';
import { AmqpClient } from '@sts/messaging';
import { createSocialSource, createXBilling, isXSource, xPricesFromEnv, type SocialSource } from '@sts/social';
import { createRedisLeases } from './adapters/lease';
import { SESSION_APPLICATION_NAME } from './adapters/session';
import { createOutboxRelay } from './relay/relay';
import { createMetricsReporter } from './adapters/reporter';
import { createHitWriter } from './adapters/hitWriter';
import { createScheduleStore, type ScheduleStore } from './adapters/scheduleStore';
import { createProfileRepository, type ProfileRepository } from './adapters/profiles';
import { createPostDeletes } from './adapters/postDeletes';
import { createTargetFlapGate } from './adapters/flap';
import { startSuspectRechecks } from './intake/profile/rechecks';
import { createCoverageRepository } from './gaps/gaps';
import { loadPollerEnv, type PollerEnv } from './env';
import { createDetectionLatency, createFleetMetrics } from './metrics';
import { createPoller, type PollerOptions } from './poller';
import { buildStreamMode, inStream, type StreamMode } from '@sts/x-stream';
import { createStreamPort, streamSelectDue } from './intake/stream/port';
import { buildActivityIntake } from './intake/activity';

/** suspects are claimed for another look at least this often (a quarter of the flap window when shorter) */
const RECHECK_EVERY_MAX_MS = 15_000;

export const pollerService: ServiceDefinition<PollerEnv> = {
  name: 'poller',
  loadEnv: loadPollerEnv,
  start,
};

async function start(env: PollerEnv, { logger, registry }: ServiceContext): Promise<StartedService> {
  const db = createDbClient({ url: env.DATABASE_URL, poolSize: env.DB_POOL_SIZE });
  // the process's one direct session (never a transaction-mode PgBouncer): every LISTEN (relay,
  // push) and the metrics reporter's advisory lock (@sts/db directSession.ts)
  const session = new DirectSession({
    databaseUrl: directDatabaseUrl(env),
    applicationName: SESSION_APPLICATION_NAME,
    logger,
  });
  // REDIS_MODE: one server or a Redis Cluster (packages/common/src/redis.ts)
  const redis = createRedis(env, { maxRetriesPerRequest: 2, logger });
  const amqp = new AmqpClient({ url: env.AMQP_URL, logger, name: 'poller' });
  const polls = new Counter({
    name: 'poller_polls_total',
    help: 'target polls by outcome',
    labelNames: ['outcome'],
    registers: [registry],
  });
  const hits = new Counter({ name: 'poller_hits_total', help: 'hits recorded', registers: [registry] });
  const published = new Counter({
    name: 'poller_outbox_published_total',
    help: 'events published',
    registers: [registry],
  });
  // the fleet's Redis: X's rate-limit governor and user cache, shared with the stream holder
  // what X bills, counted once per UTC day across the fleet (x_billable_total, @sts/social billing.ts)
  const billing = createXBilling({ db, registry, logger, prices: xPricesFromEnv(env) });
  const source = createSocialSource(env, { db, redis, registry, billing });
  const relay = createOutboxRelay({
    db,
    publisher: amqp,
    logger,
    session,
    onPublished: (n) => published.inc(n),
  });
  // outbox lag and poll lag: exported by the one replica holding the reporter lock (metrics.ts)
  const reporter = createMetricsReporter({ session, logger });
  createFleetMetrics({ registry, reporter, db, outboxLag: () => relay.lag() });
  const latency = createDetectionLatency(registry, Histogram);
  const sourceName = env.SOCIAL_SOURCE;
  const schedule = createScheduleStore(db);
  const writer = createHitWriter(db);
  // watched accounts reported unavailable: the source failing, or the accounts (domain/flap.ts)
  const flapPolicy = {
    sharePercent: env.TARGET_FLAP_SHARE,
    windowMs: env.TARGET_FLAP_WINDOW_SEC * 1000,
    minTargets: env.TARGET_FLAP_MIN,
  };
  const flap = createTargetFlapGate({ db, policy: flapPolicy, source: sourceName, registry });
  const profiles = createProfileRepository(db, flap);
  // X_MONITOR_MODE=stream: the elected replica holds X's filtered stream (@sts/x-stream)
  const stream =
    env.X_MONITOR_MODE === 'stream' && isXSource(source)
      ? buildStreamMode(env, {
          source,
          db,
          port: createStreamPort({ schedule, writer, profiles, logger }),
          logger,
          registry,
          latency,
          hits: (n) => hits.inc(n),
          amqp,
        })
      : null;
  // SOCIAL_SOURCE=x: the X Activity API pushes profile changes and deletions (src/intake/activity/)
  const activity = activityOf(env, source, { db, schedule, writer, logger, registry });
  const poller = createPoller({
    schedule,
    writer,
    source,
    leases: createRedisLeases(redis),
    logger,
    intervals: { plans: plansFromEnv(env), overrideSec: env.POLL_INTERVAL_SECONDS },
    concurrency: env.POLL_CONCURRENCY,
    claimLimit: env.POLL_CLAIM_LIMIT,
    batchSize: env.POLL_BATCH_SIZE,
    pollTimeoutMs: env.POLL_TIMEOUT_MS,
    ...intakes(env, { source, schedule, profiles, stream, logger, session, db }),
    ...(activity && { healthLookupSec: env.X_HEALTH_LOOKUP_SECONDS }),
    coverage: createCoverageRepository(db),
    metrics: {
      polls: (o) => polls.inc({ outcome: o }),
      hits: (n) => hits.inc(n),
      detected: (found, how) => latency.observe(sourceName, sourceName === 'x' ? env.X_MONITOR_MODE : how, found),
    },
  });

  // Not awaited: while RabbitMQ is down the poller keeps recording hits and the outbox holds
  // their events until the relay can publish them (/readyz says rabbitmq is not connected).
  amqp.start().catch((err: unknown) => logger.warn('RabbitMQ client did not start', { err: errorMessage(err) }));
  // not reachable now: it keeps reconnecting (the listeners resync then), the ticks cover meanwhile
  await session
    .start()
    .catch((err: unknown) => logger.warn('direct session did not start', { err: errorMessage(err) }));
  await relay.start();
  await poller.start();
  stream?.start();
  activity?.start();
  const looks = poller.profiles ?? poller.accounts;
  const rechecks = startSuspectRechecks({
    gate: flap,
    look: (key) => looks?.look(key),
    everyMs: Math.min(flapPolicy.windowMs / 4, RECHECK_EVERY_MAX_MS),
    logger,
  });
  return {
    info: { pollIntervalOverride: env.POLL_INTERVAL_SECONDS ?? null, xMonitorMode: env.X_MONITOR_MODE },
    checks: {
      postgres: async () => void (await db.$queryRaw`SELECT 1`),
      redis: async () => void (await redis.ping()),
      rabbitmq: () => amqp.check(),
      migrations: migrationsCheck(db),
    },
    async stop() {
      await rechecks.stop();
      await stream?.stop();
      await activity?.stop();
      await poller.stop();
      const relayStopped = relay.stop();
      // RabbitMQ down: stopping the client fails the publishes waiting for it now rather than
      // after their timeout (their rows stay unpublished for the next start)
      if (!amqp.isConnected()) await amqp.stop();
      await relayStopped;
      await amqp.stop();
      // the billable reads still queued are written before the pool closes
      await Promise.all([reporter.close(), billing.close()]);
      await session.stop();
      redis.disconnect();
      await db.$disconnect();
    },
  };
}

/**
 * The ways in besides the tick, by source and X_MONITOR_MODE (the tick always runs):
 *
 * | source, mode  | the tick reads due targets by                        | push | X stream |
 * | ------------- | ---------------------------------------------------- | ---- | -------- |
 * | local         | one poll per target                                  | yes  | no       |
 * | x, timeline   | one timeline read per target                         | no   | no       |
 * | x, search     | batched search (`from:` OR-queries, src/intake/search) | no | no       |
 * | x, stream     | batched search, only the Free-only targets while a   | no   | yes      |
 * |               | stream is alive (`streamSelectDue`), all without one |      |          |
 *
 * Query monitors on X: one recent search each (src/intake/xquery) in every X mode (a timeline
 * cannot answer a query); in stream mode only those the stream does not read (Free-only, or no
 * stream alive), the others are stream rules (packages/x-stream/src/queries.ts).
 *
 * The push is the local store's: it notifies committed tweets (LISTEN sts_tweets); X has none.
 * Profile changes and target health: the local store's users trigger notifies them; on X every
 * mode looks the watched accounts up in batches (src/intake/profile/xLookup.ts).
 */
function intakes(
  env: PollerEnv,
  deps: {
    source: SocialSource;
    schedule: ScheduleStore;
    profiles: ProfileRepository;
    stream: StreamMode | null;
    logger: Logger;
    session: DirectSession;
    db: Db;
  },
): Pick<
  PollerOptions,
  'search' | 'session' | 'selectDue' | 'profiles' | 'xAccounts' | 'xQueries' | 'leavesFirstLook' | 'postDeletes'
> {
  const { source, schedule, profiles, stream, logger, session } = deps;
  // the push LISTENs on the direct session; the same channel carries the users trigger's profile
  // notifications. X: the accounts are looked up in batches (every mode)
  // the local store's deleted tweets are notified on the same channel as its new ones
  if (!isXSource(source))
    return env.SOCIAL_SOURCE === 'local' ? { session, profiles, postDeletes: createPostDeletes(deps.db) } : {};
  // query monitors: a timeline cannot answer a query, so every X mode reads them by search
  const push = { profiles, xAccounts: source, xQueries: { searchGroup: source.searchGroup.bind(source) } };
  if (env.X_MONITOR_MODE === 'timeline') return push;
  const search = { source, maxQueryLength: env.X_QUERY_MAX_LENGTH, overlapMs: env.POLL_OVERLAP_SECONDS * 1000 };
  if (!stream) return { ...push, search };
  const starterSec = env.PLAN_STARTER_POLL_INTERVAL_SECONDS;
  return {
    ...push,
    search,
    selectDue: streamSelectDue(schedule, starterSec, logger, () => stream.covers()),
    // a new streamed target's first account look is the stream backfill's lookup (X_BACKFILL_LOOKUP)
    leavesFirstLook: (t, now) => stream.leavesFirstLook(t, now),
    xQueries: { ...push.xQueries, streamed: (m, now) => stream.covers() && inStream([m.account], now) },
  };
}

/** the X Activity API intake (SOCIAL_SOURCE=x, X_INTAKE_ACTIVITY not `off`), or null */
function activityOf(
  env: PollerEnv,
  source: SocialSource,
  deps: Omit<Parameters<typeof buildActivityIntake>[1], 'governor' | 'billing'>,
): ReturnType<typeof buildActivityIntake> | null {
  if (!isXSource(source) || env.X_INTAKE_ACTIVITY === 'off') return null;
  return buildActivityIntake(env, { ...deps, governor: source.client.governor, billing: source.client.billing });
}

if (require.main === module) runService(pollerService);
