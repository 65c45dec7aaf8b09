export * from './contracts';
export * from './client';
export * from './topology';
