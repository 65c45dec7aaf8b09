#!/usr/bin/env node
// Idempotent set-up that `npm start` and `npm test` run first: installs the workspace with pnpm
// (through npx, nothing global needed) when the lockfile changed, and generates the Prisma client
// when the schema changed. Quiet when there is nothing to do.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const stamp = path.join(root, 'node_modules', '.sts-setup.json');
const hash = (...files) => {
  const h = createHash('sha256');
  for (const f of files) h.update(existsSync(f) ? readFileSync(f) : '');
  return h.digest('hex');
};
const lockHash = hash(path.join(root, 'pnpm-lock.yaml'), path.join(root, 'package.json'));
const schemaFile = path.join(root, 'packages/db/prisma/schema.prisma');
const schemaHash = hash(schemaFile);
const prev = existsSync(stamp) ? JSON.parse(readFileSync(stamp, 'utf8')) : {};
const sh = (cmd, args, env = {}) =>
  execFileSync(cmd, args, { cwd: root, stdio: 'inherit', env: { ...process.env, ...env } });

if (prev.lock !== lockHash || !existsSync(path.join(root, 'node_modules', '.pnpm'))) {
  console.log('setup: installing dependencies (pnpm)');
  sh('npx', ['-y', 'pnpm@10.34.9', 'install', '--frozen-lockfile', '--config.confirmModulesPurge=false']);
}
const generated = path.join(root, 'packages/db/src/generated/prisma/client.ts');
if (prev.schema !== schemaHash || !existsSync(generated)) {
  console.log('setup: generating the Prisma client');
  // Generation needs no schema engine, but the CLI insists on one being present: point it at any
  // existing file so it does not try to download one.
  const fakeEngine = path.join(root, 'node_modules', '.sts-no-schema-engine');
  if (!existsSync(fakeEngine)) writeFileSync(fakeEngine, '');
  sh(path.join(root, 'node_modules/.bin/prisma'), ['generate', '--config', 'packages/db/prisma.config.ts'], {
    PRISMA_SCHEMA_ENGINE_BINARY: fakeEngine,
    PRISMA_HIDE_UPDATE_MESSAGE: '1',
    CHECKPOINT_DISABLE: '1',
  });
}
mkdirSync(path.dirname(stamp), { recursive: true });
writeFileSync(stamp, JSON.stringify({ lock: lockHash, schema: schemaHash }));
