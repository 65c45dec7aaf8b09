/* eslint-disable @typescript-eslint/no-unsafe-call, @typescript-eslint/no-unsafe-return --
   the rendered YAML is untyped; every field used is checked by an assertion */
/**
 * The k8s overlays as an ops team would check them: each renders with `kubectl kustomize`, the
 * objects validate against the Kubernetes (and KEDA / Prometheus operator) schemas with unknown
 * fields rejected (validate-k8s.mjs), and the rendered objects have what a deployment needs.
 * Needs kubectl with kustomize v5; without it these tests fail, unless STS_SKIP_KUBECTL=1 (set by .ci/run) skips
 * them (then they print why).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DISPATCHER_QUEUE } from '../../../services/webhook-dispatcher/src/app';
import { kubectlPath, OVERLAYS, PGBOUNCER, renderOverlay, type K8sObject } from './deploy';

const kubectl = kubectlPath();
const skip = process.env.STS_SKIP_KUBECTL === '1';
if (skip) console.warn('deploy-check: STS_SKIP_KUBECTL=1 (no kubectl with kustomize v5): THE K8S CHECKS ARE SKIPPED');
const describeK8s = skip ? describe.skip : describe;

/** the services' Deployments (all but PgBouncer's), by name */
const deployments = (objects: K8sObject[]) =>
  new Map(
    objects.filter((o) => o.kind === 'Deployment' && o.metadata.name !== PGBOUNCER).map((o) => [o.metadata.name, o]),
  );

const SERVICES = ['gateway', 'dashboard', 'read-api', 'poller', 'webhook-dispatcher'];

describeK8s.each(OVERLAYS)('k8s overlay %s', (overlay) => {
  let objects: K8sObject[];
  let yaml: string;

  beforeAll(() => {
    if (!kubectl)
      throw new Error('kubectl is not installed (.ci/run sets STS_SKIP_KUBECTL=1 to skip when it is missing)');
    ({ yaml, objects } = renderOverlay(kubectl, overlay));
  });

  const byKind = (kind: string) => objects.filter((o) => o.kind === kind);

  it('validates against the Kubernetes schemas with unknown fields rejected', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'sts-k8s-'));
    try {
      const file = path.join(dir, `${overlay}.yaml`);
      writeFileSync(file, yaml);
      const out = execFileSync(process.execPath, [path.join(__dirname, 'validate-k8s.mjs'), file], {
        encoding: 'utf8',
      });
      expect(out).toContain(`valid: ${objects.length} objects`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('runs in a namespace with the restricted Pod Security profile, and commits no Secret', () => {
    const ns = byKind('Namespace');
    expect(ns).toHaveLength(1);
    expect(ns[0]!.metadata.labels?.['pod-security.kubernetes.io/enforce']).toBe('restricted');
    expect(byKind('Secret')).toEqual([]);
  });

  it('has a Deployment with probes on the ops port, a PDB and restricted security for every service', () => {
    const deps = deployments(objects);
    expect([...deps.keys()].sort()).toEqual([...SERVICES].sort());
    for (const name of SERVICES) {
      const spec = deps.get(name)!.spec.template.spec;
      const c = spec.containers[0];
      expect(c.args).toEqual([name]);
      const ops = c.ports.find((p: { name: string }) => p.name === 'ops');
      expect(ops).toBeDefined();
      expect(c.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'ops' });
      expect(c.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'ops' });
      expect(c.resources.requests.cpu).toBeDefined();
      expect(c.resources.limits.memory).toBeDefined();
      expect(spec.topologySpreadConstraints.length).toBeGreaterThan(0);
      // restricted profile: pod and every container
      expect(spec.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
      for (const k of [...(spec.initContainers ?? []), ...spec.containers]) {
        expect(k.securityContext).toEqual({
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          capabilities: { drop: ['ALL'] },
        });
        expect(k.volumeMounts).toContainEqual({ name: 'tmp', mountPath: '/tmp' });
      }
      expect(spec.volumes).toContainEqual({ name: 'tmp', emptyDir: { sizeLimit: '64Mi' } });
      // migrations: the sts-migrate Job (ops.test.ts), not an init container of every pod
      expect(spec.initContainers).toBeUndefined();
      const pdb = byKind('PodDisruptionBudget').find((p) => p.metadata.name === name);
      expect(pdb?.spec.selector.matchLabels).toEqual(deps.get(name)!.spec.selector.matchLabels);
    }
  });

  it('gives each service a grace period ≥ preStop + its stop deadline, and the deadline ≥ its drain', () => {
    const config = byKind('ConfigMap')[0]!.data!;
    const drainMs: Record<string, number> = {
      gateway: Number(config.SHUTDOWN_GRACE_MS),
      dashboard: Number(config.SHUTDOWN_GRACE_MS),
      'read-api': Number(config.SHUTDOWN_GRACE_MS),
      poller: Number(config.POLL_TIMEOUT_MS),
      'webhook-dispatcher': Number(config.DISPATCH_SHUTDOWN_GRACE_MS),
    };
    for (const [name, dep] of deployments(objects)) {
      const spec = dep.spec.template.spec;
      const c = spec.containers[0];
      const own = (c.env as { name: string; value: string }[]).find((e) => e.name === 'STOP_DEADLINE_MS');
      const deadlineMs = Number(own?.value ?? config.STOP_DEADLINE_MS);
      expect({ name, deadlineCoversDrain: deadlineMs >= drainMs[name]! }).toEqual({ name, deadlineCoversDrain: true });
      const preStop = c.lifecycle.preStop.exec.command as string[];
      expect(preStop[0]).toBe('sleep');
      const need = Number(preStop[1]) + deadlineMs / 1000;
      expect(Number.isFinite(need)).toBe(true);
      expect({ name, grace: spec.terminationGracePeriodSeconds >= need }).toEqual({ name, grace: true });
    }
    expect(deployments(objects).get('webhook-dispatcher')!.spec.template.spec.terminationGracePeriodSeconds).toBe(35);
  });

  it('uses the generated (hashed) ConfigMap in every Deployment', () => {
    const cms = byKind('ConfigMap').filter((c) => c.metadata.name.startsWith('sts-config'));
    expect(cms).toHaveLength(1);
    expect(cms[0]!.metadata.name).toMatch(/^sts-config-[a-z0-9]{10}$/);
    for (const dep of deployments(objects).values()) {
      expect(dep.spec.template.spec.containers[0].envFrom).toContainEqual({
        configMapRef: { name: cms[0]!.metadata.name },
      });
    }
  });

  it('exposes only gateway and dashboard through the Ingress, never an ops port', () => {
    for (const svc of byKind('Service')) expect(svc.spec.type).toBe('ClusterIP');
    const ing = byKind('Ingress');
    // an overlay routes with the Ingress component or the HTTPRoute one (ops.test.ts checks both)
    if (ing.length === 0) return expect(byKind('HTTPRoute')).toHaveLength(1);
    expect(ing).toHaveLength(1);
    const paths = ing[0]!.spec.rules.flatMap((r: { http: { paths: unknown[] } }) => r.http.paths);
    const routes = paths.map((p: { path: string; backend: { service: { name: string; port: { name: string } } } }) => [
      p.path,
      p.backend.service.name,
      p.backend.service.port.name,
    ]);
    expect(routes).toEqual([
      ['/api/v1', 'gateway', 'http'],
      ['/', 'dashboard', 'http'],
    ]);
    for (const svc of byKind('Service').filter((s) => s.metadata.name.endsWith('-ops'))) {
      expect(routes.map((r: string[]) => r[1])).not.toContain(svc.metadata.name);
    }
  });

  it('autoscales gateway, read-api and dashboard on CPU, the dispatcher on its queue depth', () => {
    expect(
      byKind('HorizontalPodAutoscaler')
        .map((h) => h.spec.scaleTargetRef.name)
        .sort(),
    ).toEqual(['dashboard', 'gateway', 'read-api']);
    const so = byKind('ScaledObject');
    expect(so).toHaveLength(1);
    expect(so[0]!.spec.scaleTargetRef.name).toBe('webhook-dispatcher');
    const trigger = so[0]!.spec.triggers[0];
    expect(trigger.type).toBe('rabbitmq');
    expect(trigger.metadata.queueName).toBe(DISPATCHER_QUEUE);
    const auth = byKind('TriggerAuthentication').find((t) => t.metadata.name === trigger.authenticationRef.name);
    expect(auth?.spec.secretTargetRef).toContainEqual({ parameter: 'host', name: 'sts-secrets', key: 'AMQP_URL' });
    // the autoscalers own the replica count: a Deployment value would reset it on every apply
    for (const name of ['dashboard', 'gateway', 'read-api', 'webhook-dispatcher']) {
      expect({ name, replicas: deployments(objects).get(name)!.spec.replicas }).toEqual({ name, replicas: undefined });
    }
  });

  it('denies by default and lets only the ingress controller reach gateway and dashboard', () => {
    const nps = byKind('NetworkPolicy');
    const deny = nps.find((n) => n.metadata.name === 'default-deny');
    expect(deny?.spec).toEqual({ podSelector: {}, policyTypes: ['Ingress', 'Egress'] });
    const ingressTo = (app: string) =>
      nps.filter((n) => n.spec.podSelector.matchLabels?.['app.kubernetes.io/name'] === app && n.spec.ingress);
    for (const app of ['gateway', 'dashboard']) {
      const from = ingressTo(app).flatMap((n) => n.spec.ingress.flatMap((r: { from: unknown[] }) => r.from));
      expect(from).toHaveLength(1);
      expect(Object.keys(from[0])).toEqual(['namespaceSelector']);
    }
    const readApiFrom = ingressTo('read-api').flatMap((n) =>
      n.spec.ingress.flatMap((r: { from: unknown[] }) => r.from),
    );
    expect(readApiFrom).toEqual([{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'gateway' } } }]);
    // the ops ports are open to the monitoring namespace only
    const anyPod = nps.filter((n) => Object.keys(n.spec.podSelector).length === 0 && n.spec.ingress);
    expect(anyPod.flatMap((n) => n.spec.ingress.flatMap((r: { ports: unknown[] }) => r.ports))).toEqual([
      { protocol: 'TCP', port: 'ops' },
    ]);
    // internet egress only for the services that call out
    const internet = nps
      .filter((n) => JSON.stringify(n.spec.egress ?? []).includes('0.0.0.0/0'))
      .map((n) => n.spec.podSelector.matchLabels['app.kubernetes.io/name'])
      .sort();
    // (the dashboard: the monitor preview's X calls)
    expect(internet).toEqual(['dashboard', 'poller', 'read-api', 'webhook-dispatcher']);
  });

  it('runs PgBouncer in transaction mode in front of PostgreSQL; only the poller, the dispatcher and the Job reach 5432', () => {
    const dep = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === PGBOUNCER)!;
    const spec = dep.spec.template.spec;
    const c = spec.containers[0];
    expect(c.image).toMatch(/^[^:]+:[^:]+$/);
    expect(c.image).not.toMatch(/:latest$/);
    expect(spec.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    expect(c.securityContext).toEqual({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
    expect(byKind('PodDisruptionBudget').find((p) => p.metadata.name === PGBOUNCER)?.spec.selector.matchLabels).toEqual(
      dep.spec.selector.matchLabels,
    );
    const cmName = (spec.volumes as { configMap?: { name: string } }[]).find((v) => v.configMap)!.configMap!.name;
    const ini = String(byKind('ConfigMap').find((m) => m.metadata.name === cmName)!.data!['pgbouncer.ini']);
    expect(ini).toMatch(/^pool_mode = transaction$/m);
    // the services send no startup parameter PgBouncer does not track (their timeout is the database's)
    expect(ini).toMatch(/^ignore_startup_parameters = extra_float_digits$/m);
    expect(spec.volumes).toContainEqual({
      name: 'secret',
      secret: { secretName: 'sts-pgbouncer', defaultMode: 0o440 },
    });
    const svc = byKind('Service').find((s) => s.metadata.name === PGBOUNCER)!;
    expect(svc.spec.ports).toEqual([{ name: 'postgres', port: 6432, targetPort: 'postgres' }]);
    // egress: every service to PgBouncer; PostgreSQL's 5432 only for the direct sessions (poller,
    // dispatcher), the Job and PgBouncer
    const nps = byKind('NetworkPolicy').filter((n) => n.spec.egress);
    const egressOf = (app: string) =>
      JSON.stringify(nps.filter((n) => n.spec.podSelector.matchLabels?.['app.kubernetes.io/name'] === app));
    for (const app of SERVICES)
      expect({ app, pgbouncer: egressOf(app).includes('"port":6432') }).toEqual({ app, pgbouncer: true });
    const direct = [...SERVICES, 'migrate', PGBOUNCER].filter((app) => egressOf(app).includes('"port":5432')).sort();
    expect(direct).toEqual(['migrate', PGBOUNCER, 'poller', 'webhook-dispatcher'].sort());
  });

  it('scrapes every ops port with a ServiceMonitor', () => {
    const sm = byKind('ServiceMonitor');
    expect(sm).toHaveLength(1);
    expect(byKind('PrometheusRule')).toHaveLength(1);
    expect(sm[0]!.spec.endpoints).toContainEqual(expect.objectContaining({ port: 'ops', path: '/metrics' }));
    const selected = byKind('Service').filter((s) =>
      Object.entries(sm[0]!.spec.selector.matchLabels as Record<string, string>).every(
        ([k, v]) => s.metadata.labels?.[k] === v,
      ),
    );
    expect(selected.map((s) => s.metadata.name).sort()).toEqual(SERVICES.map((s) => `${s}-ops`).sort());
  });
});

describeK8s('the schema validation', () => {
  it('rejects unknown fields and wrong types, naming the object', () => {
    if (!kubectl)
      throw new Error('kubectl is not installed (.ci/run sets STS_SKIP_KUBECTL=1 to skip when it is missing)');
    const { objects } = renderOverlay(kubectl, 'dev');
    const dep = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === 'gateway')!;
    dep.spec.template.spec.containers[0].readinesProbe = dep.spec.template.spec.containers[0].readinessProbe;
    const so = objects.find((o) => o.kind === 'ScaledObject')!;
    so.spec.cooldownPeriodSeconds = 10;
    const pdb = objects.find((o) => o.kind === 'PodDisruptionBudget')!;
    pdb.spec.maxUnavailable = { much: 1 };
    const dir = mkdtempSync(path.join(tmpdir(), 'sts-k8s-bad-'));
    try {
      const file = path.join(dir, 'bad.yaml');
      writeFileSync(file, objects.map((o) => JSON.stringify(o)).join('\n---\n'));
      let out = '';
      try {
        execFileSync(process.execPath, [path.join(__dirname, 'validate-k8s.mjs'), file], { encoding: 'utf8' });
      } catch (err) {
        out = String((err as { stdout?: string }).stdout);
      }
      expect(out).toMatch(/Deployment\/gateway: .*'"readinesProbe"' does not exist/);
      expect(out).toMatch(/ScaledObject\/webhook-dispatcher: .*'"cooldownPeriodSeconds"' does not exist/);
      expect(out).toMatch(/PodDisruptionBudget\/\S+: .*maxUnavailable/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
