/* eslint-disable @typescript-eslint/no-unsafe-call, @typescript-eslint/no-unsafe-return --
   the rendered YAML is untyped; every field used is checked by an assertion */
/**
 * From the rendered overlays as an ops team would read them: pinned images (after
 * `kustomize edit set image`), the database connection budget, per-service Secret keys, the
 * migration Job and its opt-in init container, PDBs that never block a drain, Ingress or HTTPRoute,
 * namespaces from one place, the PrometheusRule (promtool check + unit tests, runbooks), the
 * Grafana dashboard, and histogram buckets that reach past every alert threshold.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import client from 'prom-client';
import { parse, stringify } from 'yaml';
import { createGatewayMetrics } from '../../../services/gateway/src/metrics';
import { createMetrics as createDispatcherMetrics } from '../../../services/webhook-dispatcher/src/metrics';
import {
  dbBudget,
  DEFAULT_DB_BUDGET,
  hasDefault,
  IMAGE_NAME,
  kubectlPath,
  OVERLAYS,
  PGBOUNCER,
  promtoolPath,
  readEnvFile,
  renderDir,
  REPO_ROOT,
  serviceEnvSchemas,
  setImage,
  type K8sObject,
  type ServiceEnv,
} from './deploy';
import { exportedMetricNames, queriedMetrics } from './metrics';

const kubectl = kubectlPath();
const skip = process.env.STS_SKIP_KUBECTL === '1';
if (skip) console.warn('deploy-check: STS_SKIP_KUBECTL=1 (no kubectl with kustomize v5): THE OPS CHECKS ARE SKIPPED');
const describeK8s = skip ? describe.skip : describe;
const K8S = path.join(REPO_ROOT, 'k8s');
const README = readFileSync(path.join(K8S, 'README.md'), 'utf8');
const secretKeys = Object.keys(readEnvFile(path.join(K8S, 'secret.example.env')));

/** A scratch copy of k8s/ (overlays refer to ../../base), removed by the caller. */
function scratchCopy(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'sts-k8s-ops-'));
  cpSync(K8S, path.join(dir, 'k8s'), { recursive: true });
  return dir;
}

function render(overlay: string): K8sObject[] {
  if (!kubectl)
    throw new Error('kubectl is not installed (.ci/run sets STS_SKIP_KUBECTL=1 to skip when it is missing)');
  return renderDir(kubectl, path.join(K8S, 'overlays', overlay));
}

/** the pods of the project's image: every Deployment but PgBouncer's, the Job and the CronJob */
const podSpecs = (objects: K8sObject[]) =>
  objects
    .filter(
      (o) => (o.kind === 'Deployment' && o.metadata.name !== PGBOUNCER) || o.kind === 'Job' || o.kind === 'CronJob',
    )
    .map((o) => ({
      name: `${o.kind}/${o.metadata.name}`,
      spec: o.kind === 'CronJob' ? o.spec.jobTemplate.spec.template.spec : o.spec.template.spec,
    }));

describeK8s.each(OVERLAYS)('overlay %s: images', (overlay) => {
  it('pins every container, init containers included, after `kustomize edit set image`', () => {
    const dir = scratchCopy();
    try {
      const ov = path.join(dir, 'k8s/overlays', overlay);
      const ref = `registry.example.com/sts/social-timeline-service:9.8.7-${overlay}`;
      setImage(ov, IMAGE_NAME, ref);
      // with the opt-in init container too
      const kust = parse(readFileSync(path.join(ov, 'kustomization.yaml'), 'utf8')) as { components: string[] };
      kust.components.push('../../components/migrate-init-container');
      writeFileSync(path.join(ov, 'kustomization.yaml'), stringify(kust));
      const specs = podSpecs(renderDir(kubectl!, ov));
      expect(specs.length).toBe(7); // five Deployments, the migration Job and the maintenance CronJob
      for (const { name, spec } of specs) {
        const containers = [...(spec.initContainers ?? []), ...spec.containers];
        expect({ name, images: containers.map((c: { image: string }) => c.image) }).toEqual({
          name,
          images: containers.map(() => ref),
        });
        if (name.startsWith('Deployment/')) expect(spec.initContainers[0]).toMatchObject({ name: 'migrate' });
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('leaves the base image name unset (only the overlay pins it)', () => {
    const base = parse(readFileSync(path.join(K8S, 'base/kustomization.yaml'), 'utf8')) as { images?: unknown };
    expect(base.images).toBeUndefined();
    for (const { name, spec } of podSpecs(render(overlay))) {
      for (const c of spec.containers)
        expect({ name, latest: /:latest$|^[^:]+$/.test(c.image) }).toEqual({ name, latest: false });
    }
  });
});

describeK8s.each(OVERLAYS)('overlay %s: operations', (overlay) => {
  let objects: K8sObject[];
  let services: ServiceEnv[];
  beforeAll(async () => {
    objects = render(overlay);
    services = await serviceEnvSchemas();
  });
  const byKind = (kind: string) => objects.filter((o) => o.kind === kind);

  it('keeps the PostgreSQL connections at maximum scale under DB_MAX_CONNECTIONS_BUDGET', () => {
    const budget = Number(process.env.DB_MAX_CONNECTIONS_BUDGET ?? DEFAULT_DB_BUDGET);
    const b = dbBudget(objects);
    for (const r of b.rows)
      expect({ name: r.name, pool: Number.isInteger(r.pool) && r.pool > 0 }).toEqual({ name: r.name, pool: true });
    // the pools go through PgBouncer: PostgreSQL sees its pods × max_db_connections plus the
    // direct sessions, and one PgBouncer pod alone takes every pool at maximum scale
    const pooler = b.pooler!;
    expect(pooler).not.toBeNull();
    expect(Number.isInteger(pooler.perPod) && pooler.perPod > 0).toBe(true);
    expect(pooler.clientsMax).toBeLessThanOrEqual(pooler.maxClientConn);
    const direct = b.rows.reduce((n, r) => n + r.max * (r.name.startsWith('job/') ? r.pool : r.session), 0);
    expect(b.max).toBe(pooler.replicas * pooler.perPod + direct);
    console.log(
      `${overlay}: PostgreSQL connections ${b.min} at minimum scale, ${b.max} at maximum (budget ${budget}): ` +
        `PgBouncer ${pooler.replicas} × ${pooler.perPod} + ${direct} direct; ${pooler.clientsMax} client connections to PgBouncer at maximum`,
    );
    expect(b.max).toBeLessThanOrEqual(budget);
    // k8s/README.md reports the same figures
    expect(README).toMatch(new RegExp(`^\\| ${overlay} +\\| ${b.min} +\\| ${b.max} +\\|$`, 'm'));
  });

  it('gives each service only the Secret keys its env schema reads', () => {
    for (const svc of services) {
      const dep = byKind('Deployment').find((d) => d.metadata.name === svc.name)!;
      const c = dep.spec.template.spec.containers[0];
      expect((c.envFrom ?? []).filter((f: { secretRef?: unknown }) => f.secretRef)).toEqual([]);
      const refs = (c.env as { name: string; valueFrom?: { secretKeyRef?: { key: string; optional?: boolean } } }[])
        .filter((e) => e.valueFrom?.secretKeyRef)
        .map((e) => ({ key: e.valueFrom!.secretKeyRef!.key, optional: e.valueFrom!.secretKeyRef!.optional === true }));
      const wanted = secretKeys
        .filter((k) => k in svc.schema.shape)
        .map((key) => ({ key, optional: key === 'X_BEARER_TOKEN' || hasDefault(svc.schema, key) }));
      // required keys must not be optional; X_BEARER_TOKEN (SOCIAL_SOURCE=x only) is optional
      expect({ service: svc.name, keys: refs.map((r) => r.key).sort() }).toEqual({
        service: svc.name,
        keys: wanted.map((w) => w.key).sort(),
      });
      for (const r of refs) if (r.optional) expect(wanted.find((w) => w.key === r.key)?.optional).toBe(true);
    }
    const gateway = JSON.stringify(byKind('Deployment').find((d) => d.metadata.name === 'gateway'));
    expect(gateway).not.toContain('SECRETS_ENCRYPTION_KEY');
    expect(gateway).not.toContain('SESSION_SECRET');
  });

  it('runs migrations as a Job, not in every pod, and never lets a backend outage block a drain', () => {
    const jobs = byKind('Job');
    expect(jobs.map((j) => j.metadata.name)).toEqual(['sts-migrate']);
    const job = jobs[0]!.spec.template.spec;
    const gateway = byKind('Deployment').find((d) => d.metadata.name === 'gateway')!.spec.template.spec;
    expect(job.containers[0]).toMatchObject({ args: ['migrate'], image: gateway.containers[0].image });
    expect(job.restartPolicy).toBe('Never');
    expect(job.containers[0].env).toEqual([
      { name: 'DATABASE_URL', valueFrom: { secretKeyRef: { name: 'sts-secrets', key: 'DATABASE_URL' } } },
      {
        name: 'DATABASE_DIRECT_URL',
        valueFrom: { secretKeyRef: { name: 'sts-secrets', key: 'DATABASE_DIRECT_URL' } },
      },
    ]);
    for (const dep of byKind('Deployment')) expect(dep.spec.template.spec.initContainers).toBeUndefined();
    // and each service's /readyz refuses while migrations are pending (the pods of a release wait for its Job)
    for (const svc of services) {
      const main = readFileSync(path.join(REPO_ROOT, 'services', svc.name, 'src/main.ts'), 'utf8');
      expect({ service: svc.name, checksMigrations: /migrations: migrationsCheck\(/.test(main) }).toEqual({
        service: svc.name,
        checksMigrations: true,
      });
    }
    for (const pdb of byKind('PodDisruptionBudget')) {
      expect({ pdb: pdb.metadata.name, policy: pdb.spec.unhealthyPodEvictionPolicy }).toEqual({
        pdb: pdb.metadata.name,
        policy: 'AlwaysAllow',
      });
    }
  });

  it("runs the maintenance step hourly as a CronJob with the services' settings, one run at a time", () => {
    const crons = byKind('CronJob');
    expect(crons.map((c) => c.metadata.name)).toEqual(['sts-maintenance']);
    const cron = crons[0]!;
    expect(cron.spec.concurrencyPolicy).toBe('Forbid');
    expect(cron.spec.schedule).toMatch(/^\d+ \* \* \* \*$/);
    const pod = cron.spec.jobTemplate.spec.template.spec;
    const gateway = byKind('Deployment').find((d) => d.metadata.name === 'gateway')!.spec.template.spec;
    expect(pod.containers[0]).toMatchObject({
      args: ['cli', 'maintenance', 'run', '--json'],
      image: gateway.containers[0].image,
    });
    expect(pod.restartPolicy).toBe('Never');
    // the same (hashed) ConfigMap as the services, so retention settings agree with the read-api's windows
    expect(pod.containers[0].envFrom).toEqual(gateway.containers[0].envFrom);
    const config = objects.find(
      (o) => o.kind === 'ConfigMap' && o.metadata.name === gateway.containers[0].envFrom[0].configMapRef.name,
    )!;
    for (const k of ['PLAN_FREE_HIT_RETENTION_DAYS', 'PLAN_STARTER_HIT_RETENTION_DAYS'])
      expect((config.data as Record<string, string>)[k]).toMatch(/^\d+$/);
    expect(pod.containers[0].env).toEqual([
      { name: 'DATABASE_URL', valueFrom: { secretKeyRef: { name: 'sts-secrets', key: 'DATABASE_URL' } } },
    ]);
    // it reaches PostgreSQL through its own egress rule
    const egress = byKind('NetworkPolicy').find((n) => n.metadata.name === 'maintenance-egress')!;
    expect(egress.spec.podSelector.matchLabels).toEqual({ 'app.kubernetes.io/name': 'maintenance' });
    expect(cron.spec.jobTemplate.spec.template.metadata.labels['app.kubernetes.io/name']).toBe('maintenance');
  });

  it('routes through an Ingress or an HTTPRoute (never an ops port), namespaces from cluster.yaml', () => {
    const cluster = parse(readFileSync(path.join(K8S, 'overlays', overlay, 'cluster.yaml'), 'utf8')) as {
      data: Record<string, string>;
    };
    const routes = [
      ...byKind('Ingress').flatMap((i) =>
        i.spec.rules.flatMap((r: { http: { paths: { path: string; backend: { service: { name: string } } }[] } }) =>
          r.http.paths.map((p) => [p.path, p.backend.service.name]),
        ),
      ),
      ...byKind('HTTPRoute').flatMap((h) =>
        h.spec.rules.map(
          (r: { matches: { path: { value: string } }[]; backendRefs: { name: string; port: number }[] }) => [
            r.matches[0]!.path.value,
            r.backendRefs[0]!.name,
          ],
        ),
      ),
    ];
    expect(routes).toEqual([
      ['/api/v1', 'gateway'],
      ['/', 'dashboard'],
    ]);
    expect(byKind('Ingress').length + byKind('HTTPRoute').length).toBe(1);
    for (const h of byKind('HTTPRoute')) {
      expect(h.spec.parentRefs).toEqual([{ name: cluster.data.gatewayName, namespace: cluster.data.gatewayNamespace }]);
    }
    const nsOf = (name: string) =>
      objects.find((o) => o.kind === 'NetworkPolicy' && o.metadata.name === name)!.spec.ingress[0].from[0]
        .namespaceSelector.matchLabels['kubernetes.io/metadata.name'];
    expect(nsOf('gateway-from-ingress')).toBe(cluster.data.ingressNamespace);
    expect(nsOf('dashboard-from-ingress')).toBe(cluster.data.ingressNamespace);
    expect(nsOf('allow-metrics-scrape')).toBe(cluster.data.monitoringNamespace);
    expect(JSON.stringify(objects)).not.toMatch(/INGRESS_NAMESPACE|MONITORING_NAMESPACE|GATEWAY_NAME/);
  });
});

describeK8s('dev and prod', () => {
  it('live in different namespaces, so both fit one cluster', () => {
    const namespaces = OVERLAYS.map((o) => {
      const objects = render(o);
      const ns = objects.filter((x) => x.kind === 'Namespace').map((x) => x.metadata.name);
      expect(ns).toHaveLength(1);
      for (const x of objects.filter((x) => x.kind !== 'Namespace')) expect(x.metadata.namespace).toBe(ns[0]);
      return ns[0];
    });
    expect(new Set(namespaces).size).toBe(OVERLAYS.length);
  });
});

describeK8s('the PrometheusRule', () => {
  let rule: K8sObject;
  beforeAll(() => {
    rule = render('prod').find((o) => o.kind === 'PrometheusRule')!;
  });
  const alerts = () => (rule.spec.groups as { rules: { alert: string; expr: string }[] }[]).flatMap((g) => g.rules);

  it("passes `promtool check rules` and every alert's `promtool test rules` cases", () => {
    const promtool = promtoolPath();
    if (!promtool) {
      console.warn(
        'deploy-check: NO promtool (Debian package prometheus; .ci/run installs it): PROMTOOL CHECKS SKIPPED',
      );
      return;
    }
    const dir = mkdtempSync(path.join(tmpdir(), 'sts-promtool-'));
    try {
      writeFileSync(path.join(dir, 'rules.yaml'), stringify({ groups: rule.spec.groups }));
      const tests = readFileSync(path.join(K8S, 'base/prometheus/rules.test.yaml'), 'utf8');
      writeFileSync(path.join(dir, 'rules.test.yaml'), tests);
      expect(execFileSync(promtool, ['check', 'rules', 'rules.yaml'], { cwd: dir, encoding: 'utf8' })).toContain(
        `SUCCESS: ${alerts().length} rules found`,
      );
      execFileSync(promtool, ['test', 'rules', 'rules.test.yaml'], { cwd: dir, encoding: 'utf8' });
      // every alert has a firing case in the unit tests
      const tested = (
        parse(tests) as { tests: { alert_rule_test: { alertname: string; exp_alerts: unknown[] }[] }[] }
      ).tests
        .flatMap((t) => t.alert_rule_test)
        .filter((t) => t.exp_alerts.length > 0)
        .map((t) => t.alertname);
      for (const a of alerts()) expect(tested).toContain(a.alert);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('has the alerts the READMEs describe, each with a runbook section in k8s/README.md', () => {
    const names = alerts().map((a) => a.alert);
    expect(names.sort()).toEqual(
      [
        'DeadLetterQueueNotEmpty',
        'GatewayHigh5xxRate',
        'GatewayQuotaRejectionSpike',
        'GatewaySlowRequests',
        'PollerLagMetricsAbsent',
        'PollerOutboxStuck',
        'PollerPollLagHigh',
        'PollerSourceReportsTargetsUnavailable',
        'WebhookDeliveryFailureRate',
        'WebhookHitAgeHigh',
        'WebhookMonitorCacheOff',
        'XStreamDisconnected',
      ].sort(),
    );
    for (const name of names) expect(README).toMatch(new RegExp(`^#### ${name}$`, 'm'));
  });

  it('queries only metrics the code exports, like the Grafana dashboard', () => {
    const exported = exportedMetricNames();
    const dashboard = readFileSync(path.join(K8S, 'base/grafana/sts-overview.json'), 'utf8');
    const exprs = [
      ...alerts().map((a) => a.expr),
      ...(JSON.parse(dashboard) as { panels: { targets?: { expr: string }[] }[] }).panels.flatMap((p) =>
        (p.targets ?? []).map((t) => t.expr),
      ),
    ];
    const unknown = [...queriedMetrics(exprs)].filter((m) => !exported.has(m));
    expect(unknown).toEqual([]);
  });
});

describe('histogram buckets', () => {
  /** finite `le` bounds of a histogram as exported */
  const bounds = (text: string, metric: string) =>
    [...text.matchAll(new RegExp(`^${metric}_bucket\\{[^}]*le="([^"]+)"`, 'gm'))]
      .map((m) => Number(m[1]))
      .filter(Number.isFinite);

  it('reach past every threshold an alert puts on a quantile', async () => {
    const registry = new client.Registry();
    // the gateway's series exist once a call was answered
    createGatewayMetrics(registry).answered('/api/v1/no-such-route', 200, performance.now());
    createDispatcherMetrics(registry);
    const text = await registry.metrics();
    const rules = parse(readFileSync(path.join(K8S, 'base/prometheusrule.yaml'), 'utf8')) as {
      spec: { groups: { rules: { alert: string; expr: string }[] }[] };
    };
    const checked: string[] = [];
    for (const r of rules.spec.groups.flatMap((g) => g.rules)) {
      const m = /histogram_quantile\([^,]+,[\s\S]*?\(([a-z_]+)_bucket[\s\S]*\)\s*>\s*([\d.]+)\s*$/.exec(r.expr.trim());
      if (!m) continue;
      const top = Math.max(...bounds(text, m[1]!));
      expect({ alert: r.alert, topBucketAboveThreshold: top > Number(m[2]) }).toEqual({
        alert: r.alert,
        topBucketAboveThreshold: true,
      });
      checked.push(r.alert);
    }
    expect(checked.sort()).toEqual(['GatewaySlowRequests', 'WebhookHitAgeHigh']);
  });
});
