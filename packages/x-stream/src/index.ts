/**
 * The X filtered stream (X_MONITOR_MODE=stream with SOCIAL_SOURCE=x), as the poller runs it:
 * `buildStreamMode(env, deps)` composes the lease election, the rules/stream API client and the
 * backfill search over the shared gate, the stream repository and metrics; the poller hands in
 * its side as a `StreamPort` (recording, query monitors, account looks) and starts the mode
 * beside its tick (which then polls only Free-only targets while `covers()`).
 */
import type { Registry } from 'prom-client';
import type { Logger } from '@sts/common';
import type { AmqpClient } from '@sts/messaging';
import type { Db } from '@sts/db';
import type { XSource } from '@sts/social';
import { createStreamElection } from './election';
import { createStreamMetrics, type LatencyRecorder } from './metrics';
import { RecentCheck, type BackfillLookupMode } from './recentCheck';
import { createStreamRepository } from './repository';
import { createUserCheck } from './userCheck';
import {
  backfillHoldMs,
  createStreamMode,
  DEFAULT_SYNC_MS,
  type RecordQueueOptions,
  type StreamMode,
} from './streamMode';
import { createXStreamApi } from './xStreamApi';
import type { StreamPort } from './port';

export { streamEnv } from './env';
export { createStreamElection, type StreamElection } from './election';
export { inStream } from './domain/streamRules';
export { queryRuleValue } from './domain/queryRules';
export { byTarget } from './domain/streamPost';
export type { LookedTarget, RecordedBatch, RecordedHit, StreamPort, WriteLane } from './port';
export type { RecordQueueOptions, StreamMode } from './streamMode';

export interface StreamModeEnv {
  DATABASE_URL: string;
  X_API_BASE_URL: string;
  X_BEARER_TOKEN?: string | undefined;
  X_TIMEOUT_MS: number;
  X_RULE_MAX_LENGTH: number;
  X_MAX_RULES: number;
  X_RULE_SETTLE_SECONDS: number;
  X_RULE_COALESCE_SECONDS: number;
  X_STREAM_BACKFILL_MINUTES: number;
  X_STREAM_LEASE_SECONDS: number;
  X_QUERY_MAX_LENGTH: number;
  X_BACKFILL_LOOKUP: BackfillLookupMode;
  POLL_OVERLAP_SECONDS: number;
  PLAN_FREE_POLL_INTERVAL_SECONDS: number;
  PLAN_STARTER_POLL_INTERVAL_SECONDS: number;
}

export function buildStreamMode(
  env: StreamModeEnv,
  deps: {
    db: Db;
    /** the poller's side: its recording, query monitors and account looks */
    port: StreamPort;
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
  const syncMs = deps.syncMs ?? DEFAULT_SYNC_MS;
  const coalesceMs = env.X_RULE_COALESCE_SECONDS * 1000;
  const recent =
    env.X_BACKFILL_LOOKUP === 'auto'
      ? new RecentCheck({
          lookupAccounts: (request) => deps.source.lookupAccounts(request),
          looks: deps.port,
          searchesLeft: async () => (await deps.source.client.governor.budget('search')).remaining,
          logger: deps.logger,
          holdMs: backfillHoldMs(coalesceMs, syncMs),
          ...(deps.backfillLookupLagMs !== undefined && { lagMs: deps.backfillLookupLagMs }),
        })
      : undefined;
  return createStreamMode({
    repository,
    port: deps.port,
    election: createStreamElection({
      db: deps.db,
      logger: deps.logger,
      ttlMs: env.X_STREAM_LEASE_SECONDS * 1000,
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
    readAccountSince: (userId, request) => deps.source.readAccountSince(userId, request),
    logger: deps.logger,
    metrics: createStreamMetrics(deps.registry, {
      ...(deps.latency ? { latency: deps.latency } : {}),
      hits: deps.hits,
    }),
    ruleMaxLength: env.X_RULE_MAX_LENGTH,
    maxRules: env.X_MAX_RULES,
    queryMaxLength: env.X_QUERY_MAX_LENGTH,
    overlapMs,
    ruleSettleMs: env.X_RULE_SETTLE_SECONDS * 1000,
    coalesceMs,
    backfillMinutes: env.X_STREAM_BACKFILL_MINUTES,
    lookbackMs: env.PLAN_FREE_POLL_INTERVAL_SECONDS * 1000 + overlapMs,
    overflowIntervalMs: env.PLAN_STARTER_POLL_INTERVAL_SECONDS * 1000,
    ...(deps.stallMs !== undefined ? { stallMs: deps.stallMs } : {}),
    ...(deps.syncMs !== undefined ? { syncMs: deps.syncMs } : {}),
    ...(deps.amqp && { amqp: deps.amqp }),
    ...(deps.recordQueues && { recordQueues: deps.recordQueues }),
  });
}
