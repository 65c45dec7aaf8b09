/**
 * Composition of the X `stream` mode (X_MONITOR_MODE=stream with SOCIAL_SOURCE=x): the lease
 * election, the rules/stream API client and the backfill search over the shared gate, the stream
 * repository and metrics. main.ts starts it beside the tick (which then polls only Free-only targets).
 */
import type { Registry } from 'prom-client';
import type { Logger } from '@sts/common';
import type { AmqpClient } from '@sts/messaging';
import type { Db } from '@sts/db';
import type { XSource } from '@sts/social';
import type { PollerRepository } from '../../adapters/repository';
import type { TargetState } from '../../domain/schedule';
import { inStream } from '../../domain/streamRules';
import { createStreamElection } from './election';
import { createStreamMetrics, type LatencyRecorder } from './metrics';
import { createProfileRepository } from '../../adapters/profiles';
import { RecentCheck, type BackfillLookupMode } from './recentCheck';
import { createStreamRepository } from './repository';
import { createUserCheck } from './userCheck';
import { backfillHoldMs, createStreamMode, type RecordQueueOptions, type StreamMode } from './streamMode';
import { createXStreamApi } from './xStreamApi';

export interface StreamModeEnv {
  DATABASE_URL: string;
  X_API_BASE_URL: string;
  X_BEARER_TOKEN?: string | undefined;
  X_TIMEOUT_MS: number;
  X_RULE_MAX_LENGTH: number;
  X_MAX_RULES: number;
  X_RULE_SETTLE_SECONDS: number;
  X_RULE_COALESCE_SECONDS?: number | undefined;
  X_STREAM_BACKFILL_MINUTES?: number | undefined;
  X_STREAM_LEASE_SECONDS?: number | undefined;
  X_QUERY_MAX_LENGTH?: number | undefined;
  /** default 'auto' */
  X_BACKFILL_LOOKUP?: BackfillLookupMode | undefined;
  POLL_OVERLAP_SECONDS: number;
  PLAN_FREE_POLL_INTERVAL_SECONDS: number;
  PLAN_STARTER_POLL_INTERVAL_SECONDS: number;
}

export function buildStreamMode(
  env: StreamModeEnv,
  deps: {
    db: Db;
    pollerRepository: PollerRepository;
    logger: Logger;
    registry: Registry;
    /** the X provider: its request helper and governor (the fleet's), its group search */
    source: XSource;
    latency?: LatencyRecorder;
    hits?: (n: number) => void;
    /** tests: shorter than the 30 s default */
    stallMs?: number;
    syncMs?: number;
    /** the accounts' background check interval; default 60 s */
    userCheckMs?: number;
    /** tests: the lookup pre-check's wait after a window's end (default 10 s) */
    backfillLookupLagMs?: number;
    /** RabbitMQ: the holder hands streamed posts to every replica's recording; absent: it records them */
    amqp?: AmqpClient;
    recordQueues?: RecordQueueOptions;
  },
): StreamMode {
  const overlapMs = env.POLL_OVERLAP_SECONDS * 1000;
  const repository = createStreamRepository(deps.db);
  const syncMs = deps.syncMs ?? 2000;
  const coalesceMs = (env.X_RULE_COALESCE_SECONDS ?? 5) * 1000;
  const recent =
    (env.X_BACKFILL_LOOKUP ?? 'auto') === 'auto'
      ? new RecentCheck({
          lookupAccounts: (request) => deps.source.lookupAccounts(request),
          profiles: createProfileRepository(deps.db),
          searchesLeft: async () => (await deps.source.client.governor.budget('search')).remaining,
          logger: deps.logger,
          holdMs: backfillHoldMs(coalesceMs, syncMs),
          ...(deps.backfillLookupLagMs !== undefined && { lagMs: deps.backfillLookupLagMs }),
        })
      : undefined;
  return createStreamMode({
    repository,
    pollerRepository: deps.pollerRepository,
    election: createStreamElection({
      db: deps.db,
      logger: deps.logger,
      ttlMs: (env.X_STREAM_LEASE_SECONDS ?? 10) * 1000,
    }),
    api: createXStreamApi({
      client: deps.source.client,
      baseUrl: env.X_API_BASE_URL,
      bearerToken: env.X_BEARER_TOKEN ?? '',
      timeoutMs: env.X_TIMEOUT_MS,
    }),
    searchGroup: (group, request) => deps.source.searchGroup(group, request),
    userCheck: createUserCheck({
      users: deps.source.users,
      repository,
      logger: deps.logger,
      ...(deps.userCheckMs !== undefined && { intervalMs: deps.userCheckMs }),
    }),
    ...(recent && { recent }),
    logger: deps.logger,
    metrics: createStreamMetrics(deps.registry, {
      ...(deps.latency ? { latency: deps.latency } : {}),
      hits: deps.hits,
    }),
    ruleMaxLength: env.X_RULE_MAX_LENGTH,
    maxRules: env.X_MAX_RULES,
    queryMaxLength: env.X_QUERY_MAX_LENGTH ?? 512,
    overlapMs,
    ruleSettleMs: env.X_RULE_SETTLE_SECONDS * 1000,
    coalesceMs,
    backfillMinutes: env.X_STREAM_BACKFILL_MINUTES ?? 0,
    lookbackMs: env.PLAN_FREE_POLL_INTERVAL_SECONDS * 1000 + overlapMs,
    overflowIntervalMs: env.PLAN_STARTER_POLL_INTERVAL_SECONDS * 1000,
    ...(deps.stallMs !== undefined ? { stallMs: deps.stallMs } : {}),
    ...(deps.syncMs !== undefined ? { syncMs: deps.syncMs } : {}),
    ...(deps.amqp && { amqp: deps.amqp }),
    ...(deps.recordQueues && { recordQueues: deps.recordQueues }),
  });
}

/**
 * The tick's `selectDue` in stream mode: while a stream is alive somewhere in the fleet
 * (`covers()`), it polls the Free-only targets and leaves the streamed ones (a Starter or trial
 * watcher) to the holder, pushing their schedule one `intervalSec` on so the tick does not read
 * them again every second; with no stream alive it polls every due target (batched search), so
 * a stream outage never leaves Starter targets unpolled.
 */
export function streamSelectDue(
  repository: Pick<PollerRepository, 'reschedule'>,
  intervalSec: number,
  logger: Logger,
  covers: () => boolean,
): (due: TargetState[], now: Date) => TargetState[] {
  return (due, now) => {
    if (!covers()) return due;
    const streamed = due.filter((t) => inStream(t.accounts, now));
    if (streamed.length > 0) {
      const nextDueAt = new Date(now.getTime() + intervalSec * 1000);
      repository
        .reschedule(streamed.map((t) => ({ targetKey: t.targetKey, nextDueAt, pushed: true, readAt: now })))
        .catch((err: unknown) =>
          logger.warn('could not reschedule streamed targets', {
            error: err instanceof Error ? err.message : String(err),
          }),
        );
    }
    return due.filter((t) => !inStream(t.accounts, now));
  };
}
