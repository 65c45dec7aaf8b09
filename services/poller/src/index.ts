export { createPoller, type Poller, type PollerOptions, type CycleResult } from './poller';
export { createOutboxRelay, type OutboxRelay, type OutboxRelayOptions } from './adapters/relay';
export { createPollerRepository, OUTBOX_CHANNEL, type PollerRepository } from './adapters/repository';
export { createRedisLeases, type LeaseStore } from './adapters/lease';
export * from './domain/hits';
export { loadPollerEnv, pollerEnvSchema, type PollerEnv } from './env';
