export * from './records';
export * from './params';
export * from './jsonSchema';
export * from './scopes';
export * from './manage';
export * from './coverage';
