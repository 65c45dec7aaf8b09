export {
  createPoller,
  TWEETS_CHANNEL,
  type Poller,
  type PollerOptions,
  type PollerMetrics,
  type CycleResult,
} from './poller';
export * from './domain/groups';
export { createGroupPoll, type GroupPoll, type GroupPollDeps } from './search';
export { createOutboxRelay, type OutboxRelay, type OutboxRelayOptions, type Publisher } from './adapters/relay';
export {
  createPollerRepository,
  OUTBOX_CHANNEL,
  type PollerRepository,
  type NewHit,
  type CursorState,
} from './adapters/repository';
export { createRedisLeases, type LeaseStore } from './adapters/lease';
export * from './domain/hits';
export * from './domain/schedule';
export { loadPollerEnv, pollerEnvSchema, type PollerEnv } from './env';
export { createMetricsReporter, type MetricsReporter } from './adapters/reporter';
export {
  createDetectionLatency,
  createFleetMetrics,
  DETECTION_LATENCY_BUCKETS,
  POLL_LAG_BUCKETS,
  type FleetMetricsOptions,
} from './metrics';
