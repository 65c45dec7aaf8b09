/**
 * Builds the publishable package into packages/client/dist (then `npm pack packages/client/dist`):
 * - index.js: src/index.ts bundled by esbuild as one ES module for Node 20+, with the workspace
 *   code it uses (@sts/signing) inlined; openapi-fetch stays a dependency (from npm);
 * - index.d.ts and schema.d.ts: tsc's declarations, with the signing package's declarations beside
 *   them (signing/*.d.ts) and every import made a relative ESM path, so no workspace name remains;
 * - package.json ("type": "module", exports with types, the npm dependencies only) and README.md.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { build } from 'esbuild';

const root = path.join(__dirname, '..');
const dist = path.join(root, 'dist');
const repo = path.join(root, '../..');

interface Manifest {
  name: string;
  version: string;
  license: string;
  dependencies: Record<string, string>;
}

/** extensionless relative specifiers get `.js`; the signing package becomes its copied declarations */
function esmDeclarations(dir: string, signingAt: string): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      esmDeclarations(file, signingAt);
      continue;
    }
    if (!entry.name.endsWith('.d.ts')) continue;
    const text = readFileSync(file, 'utf8')
      .replace(/(from\s+|import\()(['"])(\.\.?\/[^'"]+?)(?<!\.js)\2/g, '$1$2$3.js$2')
      .replace(/'@sts\/signing'/g, `'${signingAt}'`);
    writeFileSync(file, text);
  }
}

async function main(): Promise<void> {
  rmSync(dist, { recursive: true, force: true });
  mkdirSync(dist, { recursive: true });
  const manifest = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as Manifest;
  // workspace packages are bundled in; the npm ones stay dependencies of the published package
  const npmDependencies = Object.fromEntries(
    Object.entries(manifest.dependencies).filter(([, spec]) => !spec.startsWith('workspace:')),
  );

  await build({
    entryPoints: [path.join(root, 'src/index.ts')],
    outfile: path.join(dist, 'index.js'),
    bundle: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    external: Object.keys(npmDependencies),
    legalComments: 'none',
    logLevel: 'warning',
  });

  execFileSync(path.join(repo, 'node_modules/.bin/tsc'), ['-p', path.join(root, 'tsconfig.build.json')], {
    stdio: 'inherit',
  });
  const types = path.join(dist, '.types');
  for (const name of readdirSync(path.join(types, 'client/src'))) {
    renameSync(path.join(types, 'client/src', name), path.join(dist, name));
  }
  renameSync(path.join(types, 'signing/src'), path.join(dist, 'signing'));
  rmSync(types, { recursive: true, force: true });
  for (const name of readdirSync(path.join(dist, 'signing')))
    if (!name.endsWith('.d.ts')) rmSync(path.join(dist, 'signing', name));
  esmDeclarations(dist, './signing/index.js');

  const published = {
    name: manifest.name,
    version: manifest.version,
    description:
      'Typed client for the social timeline data service API: every endpoint typed from its OpenAPI document, errors typed by code, webhook verification.',
    license: manifest.license,
    type: 'module',
    engines: { node: '>=20' },
    exports: { '.': { types: './index.d.ts', default: './index.js' } },
    types: './index.d.ts',
    files: ['*.js', '*.d.ts', 'signing/*.d.ts', 'README.md'],
    dependencies: npmDependencies,
  };
  writeFileSync(path.join(dist, 'package.json'), `${JSON.stringify(published, null, 2)}\n`);
  cpSync(path.join(root, 'README.md'), path.join(dist, 'README.md'));
  console.log(`built ${path.relative(process.cwd(), dist)}: npm pack ${path.relative(process.cwd(), dist)}`);
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : String(err));
  process.exit(1);
});
