export { createReadApi, type ReadApi, type ReadApiOptions } from './app';
export { readApiEnvSchema, loadReadApiEnv, type ReadApiEnv } from './env';
export { createMonitorRepository, type MonitorRepository } from './adapters/monitors';
export * from './domain/records';
export { LIMIT, HIT_LIMIT, Q_MAX_LENGTH, TWEET_TEXT_MAX_LENGTH } from './domain/params';
