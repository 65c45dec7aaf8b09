#!/usr/bin/env node
// Production build: bundles each service's src/main.ts (and the migration runner and the admin
// CLI) into one CommonJS file per entry under dist/, with esbuild. The workspace packages
// (@sts/*, TypeScript source) and the pure-JavaScript libraries are bundled in; only the packages
// listed in EXTERNAL stay in node_modules (see below), so the image needs neither tsx nor the
// dev dependencies at run time.
//
//   node scripts/build.mjs [--outdir dist] [--entry read-api ...]
//
// Output: dist/bin/<entry>.js (+ .js.map), dist/prisma/migrations (the SQL the migration runner
// reads: it resolves `../prisma/migrations` from its own file, dist/bin/), dist/public (the
// dashboard's static files, resolved the same way) and dist/package.json ({"type":"commonjs"}). Prints one line per entry with its size.
import { build } from 'esbuild';
import { cpSync, existsSync, mkdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * Kept out of the bundles and installed as production dependencies (`pnpm deploy --prod
 * --filter @sts/db`, see the Dockerfile): Prisma's runtime loads its query compiler (WebAssembly)
 * by dynamic import and checks its own version against the generated client, and pg has an
 * optional native binding (pg-native) that must resolve at run time or not at all. Everything
 * else (express, ioredis, amqplib, axios, zod, prom-client, winston, ...) is plain JavaScript and
 * is bundled; the bundle tests run every entry to prove it.
 */
export const EXTERNAL = ['pg-native'];

/** name → entry file; the dashboard is built when it exists in the tree. */
export function entries() {
  const all = {
    gateway: 'services/gateway/src/main.ts',
    'read-api': 'services/read-api/src/main.ts',
    poller: 'services/poller/src/main.ts',
    'webhook-dispatcher': 'services/webhook-dispatcher/src/main.ts',
    dashboard: 'services/dashboard/src/main.ts',
    migrate: 'packages/db/src/cli.ts',
    demo: 'services/poller/src/demo.ts',
    cli: 'packages/admin-cli/src/main.ts',
  };
  return Object.fromEntries(Object.entries(all).filter(([, file]) => existsSync(path.join(root, file))));
}

export async function buildAll({ outdir = path.join(root, 'dist'), only } = {}) {
  const selected = Object.entries(entries()).filter(([name]) => !only || only.length === 0 || only.includes(name));
  if (selected.length === 0) throw new Error(`nothing to build (asked for ${only?.join(', ')})`);
  rmSync(outdir, { recursive: true, force: true });
  mkdirSync(outdir, { recursive: true });
  await build({
    entryPoints: Object.fromEntries(selected.map(([name, file]) => [name, path.join(root, file)])),
    outdir: path.join(outdir, 'bin'),
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'cjs',
    // minified with a source map (without the sources) so stack traces point at the TypeScript
    // files when the service runs with --enable-source-maps (the entry point passes it)
    minify: true,
    sourcemap: 'linked',
    sourcesContent: false,
    // keeps class and function names (error names in logs, Prisma's error classes)
    keepNames: true,
    external: EXTERNAL,
    logLevel: 'warning',
    legalComments: 'none',
  });
  cpSync(path.join(root, 'packages/db/prisma/migrations'), path.join(outdir, 'prisma/migrations'), {
    recursive: true,
  });
  // the dashboard serves its static files from `../public` of its own file (PUBLIC_DIR in
  // services/dashboard/src/app.ts), i.e. dist/public beside dist/bin
  const dashboardPublic = path.join(root, 'services/dashboard/public');
  if (selected.some(([name]) => name === 'dashboard') && existsSync(dashboardPublic)) {
    cpSync(dashboardPublic, path.join(outdir, 'public'), { recursive: true });
  }
  writeFileSync(path.join(outdir, 'package.json'), `${JSON.stringify({ type: 'commonjs' })}\n`);
  return selected.map(([name]) => {
    const file = path.join(outdir, 'bin', `${name}.js`);
    return { name, file, bytes: statSync(file).size };
  });
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: { outdir: { type: 'string' }, entry: { type: 'string', multiple: true } },
  });
  const built = await buildAll({
    outdir: values.outdir ? path.resolve(values.outdir) : undefined,
    only: values.entry,
  });
  for (const b of built) console.log(`build: ${path.relative(root, b.file)} ${(b.bytes / 1024).toFixed(0)} KiB`);
}
