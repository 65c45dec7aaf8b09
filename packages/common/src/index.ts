export * from './env';
export * from './redis';
export * from './redisConfig';
export * from './errors';
export * from './logger';
export * from './ops';
export * from './devEnv';
export * from './runService';
