/**
 * Composition of the X `stream` mode (X_MONITOR_MODE=stream with SOCIAL_SOURCE=x): the election,
 * the rules/stream API client and the backfill search over the shared gate, the stream repository
 * and metrics. main.ts starts it beside the tick (which then polls only Free-only targets).
 */
import type { Registry } from 'prom-client';
import type { Logger } from '@sts/common';
import type { Db } from '@sts/db';
import type { PollerRepository } from '../adapters/repository';
import { createStreamElection } from './election';
import { createStreamMetrics, type LatencyRecorder } from './metrics';
import { createStreamRepository } from './repository';
import { createGroupSearch } from './search';
import { createStreamMode, type StreamMode } from './streamMode';
import { createXStreamApi, openGate, type XGate } from './xStreamApi';

export { createStreamMode, type StreamMode, type StreamModeOptions, type StreamMetrics } from './streamMode';
export { streamEnv } from './env';

export interface StreamModeEnv {
  DATABASE_URL: string;
  X_API_BASE_URL: string;
  X_BEARER_TOKEN?: string | undefined;
  X_TIMEOUT_MS: number;
  X_RULE_MAX_LENGTH: number;
  X_MAX_RULES: number;
  X_RULE_SETTLE_SECONDS: number;
  X_QUERY_MAX_LENGTH?: number | undefined;
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
    gate?: XGate;
    latency?: LatencyRecorder;
    hits?: (n: number) => void;
    /** tests: shorter than X's 20 s */
    stallMs?: number;
    syncMs?: number;
  },
): StreamMode {
  const gate = deps.gate ?? openGate;
  const x = { baseUrl: env.X_API_BASE_URL, bearerToken: env.X_BEARER_TOKEN ?? '', timeoutMs: env.X_TIMEOUT_MS, gate };
  const overlapMs = env.POLL_OVERLAP_SECONDS * 1000;
  return createStreamMode({
    repository: createStreamRepository(deps.db),
    pollerRepository: deps.pollerRepository,
    election: createStreamElection({ databaseUrl: env.DATABASE_URL, logger: deps.logger }),
    api: createXStreamApi(x),
    search: createGroupSearch(x),
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
    lookbackMs: env.PLAN_FREE_POLL_INTERVAL_SECONDS * 1000 + overlapMs,
    overflowIntervalMs: env.PLAN_STARTER_POLL_INTERVAL_SECONDS * 1000,
    ...(deps.stallMs !== undefined ? { stallMs: deps.stallMs } : {}),
    ...(deps.syncMs !== undefined ? { syncMs: deps.syncMs } : {}),
  });
}
