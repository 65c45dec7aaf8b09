#!/usr/bin/env node
// `npm test`: runs every test with jest against the real services (see packages/testing).
// Extra arguments go to jest: `npm test -- services/gateway`.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const r = spawnSync(process.execPath, [path.join(root, 'node_modules/jest/bin/jest.js'), ...process.argv.slice(2)], {
  cwd: root,
  stdio: 'inherit',
  env: { ...process.env, LOG_LEVEL: process.env.LOG_LEVEL ?? 'error' },
});
process.exit(r.status ?? 1);
