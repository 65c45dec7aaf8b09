/** One jest run over every package and service; tests sit next to their source. */
const disruptive = process.env.STS_DISRUPTIVE === '1';

/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/packages', '<rootDir>/services'],
  // Tests that disrupt shared services (restart RabbitMQ, ...) run in a second, serial pass.
  testMatch: disruptive ? ['**/src/**/*.disruptive.test.ts'] : ['**/src/**/*.test.ts'],
  testPathIgnorePatterns: disruptive ? ['/node_modules/'] : ['/node_modules/', '\\.disruptive\\.test\\.ts$'],
  transform: {
    '^.+\\.ts$': [
      '@swc/jest',
      { jsc: { parser: { syntax: 'typescript' }, target: 'es2022' }, module: { type: 'commonjs' } },
    ],
  },
  moduleFileExtensions: ['ts', 'js', 'json'],
  // the client's built package (packages/client/dist) repeats its package name
  modulePathIgnorePatterns: ['<rootDir>/packages/client/dist/'],
  globalSetup: '<rootDir>/packages/testing/src/globalSetup.ts',
  globalTeardown: '<rootDir>/packages/testing/src/globalTeardown.ts',
  testTimeout: 60_000,
  maxWorkers: process.env.JEST_MAX_WORKERS ?? 2,
  // Real services; a worker that leaks a handle should not hang the run.
  forceExit: false,
};
