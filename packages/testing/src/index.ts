/**
 * Test support for every package and service, one file per thing it provides (see README.md).
 * Helpers that need a service's own code stay in that service, in its `src/testing.ts`.
 */
export * from './fixtures';
export * from './http';
export * from './https';
export * from './isolation';
export * from './logger';
export * from './process';
export * from './pgbouncer';
export * from './engines';
export * from './redisCluster';
export * from './proxy';
export * from './rabbitmq';
export * from './store';
export * from './wait';
export { createVhost, type ServiceUrls } from './services';
export * from './fakeX';
export * from './apiStack';
