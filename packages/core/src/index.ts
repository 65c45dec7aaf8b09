export * from './addressPolicy';
export * from './apiKeys';
export * from './ids';
export * from './keywords';
export * from './plans';
export * from './secretBox';
export * from './webhookUrl';
export * from './rules';
