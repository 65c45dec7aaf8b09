export * from './contracts';
export * from './client';
export * from './topology';
export * from './dlq';
export * from './webhookBodies';
