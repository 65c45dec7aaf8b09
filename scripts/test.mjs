#!/usr/bin/env node
// `npm test`: runs every test with jest against the real services (see packages/testing).
// Pass 1 runs in parallel; pass 2 runs the `*.disruptive.test.ts` files (they restart shared
// services such as RabbitMQ) one at a time, alone. Extra arguments go to jest in both passes:
// `npm test -- services/gateway`. The last line sums both passes: `tests: N passed, N failed`.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const jest = path.join(root, 'node_modules/jest/bin/jest.js');
const args = process.argv.slice(2);
const tmp = path.join(root, '.tmp');
mkdirSync(tmp, { recursive: true });

// Tests that need real HTTPS (webhook receivers) use a test CA. Node reads NODE_EXTRA_CA_CERTS only
// at process start, so the CA is made (or reused from .tmp/test-ca) here, before jest starts.
const env = { ...process.env, LOG_LEVEL: process.env.LOG_LEVEL ?? 'error' };
const ca = spawnSync(process.execPath, ['--import', 'tsx', path.join(root, 'packages/testing/src/https.ts')], {
  cwd: root,
  encoding: 'utf8',
  env,
});
if (ca.status !== 0) {
  process.stderr.write(ca.stderr ?? '');
  console.error('test: could not create the test CA (packages/testing/src/https.ts)');
  process.exit(1);
}
env.NODE_EXTRA_CA_CERTS = ca.stdout.trim().split('\n').pop();

let passed = 0;
let failed = 0;
function pass(extraArgs, extraEnv, name) {
  const out = path.join(tmp, `jest-${name}.json`);
  rmSync(out, { force: true });
  const r = spawnSync(process.execPath, [jest, ...extraArgs, '--json', '--outputFile', out, ...args], {
    cwd: root,
    stdio: 'inherit',
    env: { ...env, ...extraEnv },
  });
  if (existsSync(out)) {
    const summary = JSON.parse(readFileSync(out, 'utf8'));
    passed += summary.numPassedTests;
    failed += summary.numFailedTests + summary.numRuntimeErrorTestSuites;
  }
  return r.status ?? 1;
}

// With paths given, either pass may find nothing (only disruptive files, or none): that is fine as
// long as the two passes together ran something.
const first = pass(args.length > 0 ? ['--passWithNoTests'] : [], {}, 'main');
// STS_E2E=only (the end-to-end files, see jest.config.js) has no disruptive pass.
const second =
  process.env.STS_E2E === 'only'
    ? 0
    : pass(['--runInBand', '--passWithNoTests'], { STS_DISRUPTIVE: '1' }, 'disruptive');
console.log(`tests: ${passed} passed, ${failed} failed`);
if (passed + failed === 0) {
  console.error('test: no tests found');
  process.exit(1);
}
process.exit(first || second || 0);
