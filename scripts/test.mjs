#!/usr/bin/env node
// `npm test`: runs every test with jest against the real services (see packages/testing).
// Pass 1 runs in parallel; pass 2 runs the `*.disruptive.test.ts` files (they restart shared
// services such as RabbitMQ) one at a time, alone. Extra arguments go to jest in both passes:
// `npm test -- services/gateway`.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const jest = path.join(root, 'node_modules/jest/bin/jest.js');
const args = process.argv.slice(2);
const env = { ...process.env, LOG_LEVEL: process.env.LOG_LEVEL ?? 'error' };

// Tests that need real HTTPS (webhook receivers) use a test CA. Node reads NODE_EXTRA_CA_CERTS only
// at process start, so the CA is made (or reused from .tmp/test-ca) here, before jest starts.
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

const first = spawnSync(process.execPath, [jest, ...args], { cwd: root, stdio: 'inherit', env });
const second = spawnSync(process.execPath, [jest, '--runInBand', '--passWithNoTests', ...args], {
  cwd: root,
  stdio: 'inherit',
  env: { ...env, STS_DISRUPTIVE: '1' },
});
process.exit(first.status || second.status || 0);
