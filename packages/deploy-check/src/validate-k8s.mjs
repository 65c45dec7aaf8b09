#!/usr/bin/env node
// Validates rendered Kubernetes manifests (multi-document YAML files given as arguments) in two
// passes, because no single registry package does both:
// 1. kubernetes-models' validators (the Kubernetes OpenAPI schemas compiled with ajv; KEDA and
//    the Prometheus operator from their CRD schemas): types, required fields, enums, formats.
//    They accept unknown fields, so:
// 2. every object is written as a typed object literal (`const o: IDeployment = {...}`) into a
//    scratch .mts file and type-checked with tsc --strict: TypeScript's excess-property check on
//    literals rejects every field the API type does not declare, at any depth.
// Prints one line per problem and exits 1 when there is any; prints a summary otherwise.
// ESM (kubernetes-models ships ESM only), run with plain node by validate.test.ts.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';

const here = path.dirname(fileURLToPath(import.meta.url));
const pkgRoot = path.resolve(here, '..');
const repoRoot = path.resolve(pkgRoot, '../..');

/** apiVersion → the module folder holding its kinds */
function modulePath(apiVersion) {
  const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : ['', apiVersion];
  if (group === 'keda.sh') return `@kubernetes-models/keda/keda.sh/${version}`;
  if (group === 'gateway.networking.k8s.io') return `@kubernetes-models/gateway-api/${group}/${version}`;
  if (group === 'monitoring.coreos.com')
    return `@kubernetes-models/prometheus-operator/monitoring.coreos.com/${version}`;
  return group ? `kubernetes-models/${group}/${version}` : `kubernetes-models/${version}`;
}

function loadObjects(files) {
  const objects = [];
  for (const file of files) {
    for (const doc of parseAllDocuments(readFileSync(file, 'utf8'))) {
      if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors[0].message}`);
      const obj = doc.toJS();
      if (obj) objects.push({ file, obj });
    }
  }
  return objects;
}

async function schemaPass(objects, problems) {
  for (const { file, obj } of objects) {
    const where = `${path.basename(file)} ${obj.kind}/${obj.metadata?.name}`;
    if (!obj.apiVersion || !obj.kind) {
      problems.push(`${where}: apiVersion and kind are required`);
      continue;
    }
    let mod;
    try {
      mod = await import(`${modulePath(obj.apiVersion)}/${obj.kind}`);
    } catch {
      problems.push(`${where}: no schema for ${obj.apiVersion} ${obj.kind}`);
      continue;
    }
    try {
      new mod[obj.kind](obj).validate();
    } catch (err) {
      problems.push(`${where}: ${err instanceof Error ? err.message.split('\n').slice(0, 6).join(' ') : err}`);
    }
  }
}

function typePass(objects, problems) {
  const dir = path.join(pkgRoot, '.tmp', `tsc-${process.pid}`);
  mkdirSync(dir, { recursive: true });
  try {
    const imports = new Map();
    const lines = [];
    objects.forEach(({ file, obj }, i) => {
      const name = `I${obj.kind}`;
      const alias = `T${imports.size}`;
      const key = `${modulePath(obj.apiVersion)}/${obj.kind}`;
      if (!imports.has(key)) imports.set(key, { alias, name });
      const t = imports.get(key).alias;
      lines.push(`// ${path.basename(file)} ${obj.kind}/${obj.metadata?.name}`);
      lines.push(`export const o${i}: ${t} = ${JSON.stringify(obj, null, 1)};`);
    });
    const head = [...imports].map(([mod, { alias, name }]) => `import type { ${name} as ${alias} } from '${mod}';`);
    const file = path.join(dir, 'objects.mts');
    writeFileSync(file, `${head.join('\n')}\n${lines.join('\n')}\n`);
    writeFileSync(
      path.join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          noEmit: true,
          module: 'nodenext',
          moduleResolution: 'nodenext',
          target: 'es2022',
          skipLibCheck: true,
          types: [],
        },
        files: ['objects.mts'],
      }),
    );
    // the scratch file lives under the package, so imports resolve through its node_modules
    try {
      execFileSync(path.join(repoRoot, 'node_modules/.bin/tsc'), ['-p', dir], { encoding: 'utf8', stdio: 'pipe' });
    } catch (err) {
      const out = `${err.stdout ?? ''}${err.stderr ?? ''}`;
      const source = readFileSync(file, 'utf8').split('\n');
      for (const line of out.split('\n').filter((l) => l.includes('error TS'))) {
        const m = /objects\.mts\((\d+),\d+\)/.exec(line);
        // name the object: the nearest "// file Kind/name" comment above the error line
        let label = '';
        if (m)
          for (let n = Number(m[1]) - 1; n >= 0 && !label; n--)
            if (source[n]?.startsWith('// ')) label = source[n].slice(3);
        problems.push(`${label}: ${line.replace(/^.*error TS\d+: /, '')}`);
      }
      if (!out.includes('error TS')) problems.push(`tsc failed: ${out.slice(0, 500)}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error('usage: validate-k8s.mjs <rendered.yaml> ...');
  process.exit(2);
}
const objects = loadObjects(files);
const problems = [];
await schemaPass(objects, problems);
typePass(objects, problems);
for (const p of problems) console.log(`invalid: ${p}`);
if (problems.length > 0) process.exit(1);
console.log(`valid: ${objects.length} objects (${[...new Set(objects.map((o) => o.obj.kind))].sort().join(', ')})`);
