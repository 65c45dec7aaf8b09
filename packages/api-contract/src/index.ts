export * from './records';
export * from './params';
export * from './jsonSchema';
