export { createPoller, type Poller, type PollerOptions, type PollerMetrics, type CycleResult } from './poller';
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
export { createFleetMetrics, POLL_LAG_BUCKETS, type FleetMetricsOptions } from './metrics';
