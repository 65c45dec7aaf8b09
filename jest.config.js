/** One jest run over every package and service; tests sit next to their source. */
const disruptive = process.env.STS_DISRUPTIVE === '1';

/**
 * The end-to-end files: gateway → read-api, the poller → outbox → dispatcher pipeline, the
 * dashboard's journeys in Chromium. CI runs them once, through PgBouncer in transaction mode:
 * STS_E2E=skip leaves them out of a run, STS_E2E=only runs nothing else (see .ci/run).
 */
const e2e = [
  'services/gateway/src/gateway.test.ts',
  'services/gateway/src/main.test.ts',
  'services/poller/src/main.test.ts',
  'services/poller/src/relay/replicas.test.ts',
  'services/webhook-dispatcher/src/main.test.ts',
  'services/dashboard/src/browser.test.ts',
  'services/dashboard/src/accountsBrowser.test.ts',
];
const e2eMode = process.env.STS_E2E ?? 'all';
if (!['all', 'skip', 'only'].includes(e2eMode)) throw new Error(`STS_E2E must be all, skip or only, not ${e2eMode}`);
const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const e2ePattern = `^<rootDir>/(${e2e.map(escape).join('|')})$`;

/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/packages', '<rootDir>/services'],
  // Tests that disrupt shared services (restart RabbitMQ, ...) run in a second, serial pass.
  testMatch: disruptive
    ? ['**/src/**/*.disruptive.test.ts']
    : e2eMode === 'only'
      ? e2e.map((f) => `**/${f}`)
      : ['**/src/**/*.test.ts'],
  testPathIgnorePatterns: [
    '/node_modules/',
    ...(disruptive ? [] : ['\\.disruptive\\.test\\.ts$']),
    ...(e2eMode === 'skip' ? [e2ePattern] : []),
  ],
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
