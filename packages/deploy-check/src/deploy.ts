/**
 * What the deployment checks read: the rendered overlays (kubectl kustomize), the compose file,
 * the Secret template, and each service's zod env schema.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parse, parseAllDocuments, parseDocument } from 'yaml';
import type { z } from 'zod';

export const REPO_ROOT = path.resolve(__dirname, '../../..');
export const OVERLAYS = ['dev', 'prod'];

/** The public port variable of each service that has one (the Service `http` port). */
export const PUBLIC_PORT_VAR: Record<string, string> = {
  gateway: 'GATEWAY_PORT',
  dashboard: 'DASHBOARD_PORT',
  'read-api': 'READ_API_PORT',
};

/**
 * Variables that may stay unset in compose and k8s because their default is right in production
 * (tuning knobs, bind hosts, test-only switches). Anything else a service reads must be set
 * explicitly. WEBHOOK_ALLOW_PRIVATE_HOSTS must stay unset in production (it disables the
 * private-address check). Listed in k8s/README.md ("Configuration").
 */
export const OPTIONAL_WITH_DEFAULTS = new Set([
  'GATEWAY_HOST',
  'READ_API_HOST',
  'DASHBOARD_HOST',
  'UPSTREAM_TIMEOUT_MS',
  'UPSTREAM_CONNECT_TIMEOUT_MS',
  'UPSTREAM_MAX_SOCKETS',
  'UPSTREAM_PIPELINE_DEPTH',
  'UPSTREAM_PIPELINE_MAX_MS',
  'KEY_CACHE_TTL_MS',
  'USAGE_FLUSH_MS',
  'STREAM_MAX_PER_ACCOUNT',
  'STREAM_MAX_PER_PROCESS',
  'STREAM_HEARTBEAT_MS',
  'STREAM_MAX_UNSENT_BYTES',
  'USER_CACHE_TTL_MS',
  'DB_POOL_SIZE',
  'DISPATCH_DB_POOL_SIZE',
  'DISPATCH_PREFETCH',
  'WEBHOOK_MAX_CONCURRENCY_PER_ENDPOINT',
  'WEBHOOK_ALLOW_PRIVATE_HOSTS',
  'WEBHOOK_ALLOWED_PORTS',
  'POLL_INTERVAL_SECONDS',
  'POLL_CONCURRENCY',
  'POLL_BATCH_SIZE',
  'X_TIMEOUT_MS',
  'X_USER_CACHE_TTL_SECONDS',
  'X_LOW_PRIORITY_RESERVE_PERCENT',
  'X_RATE_LIMITS',
  'READ_CACHE_PROFILE_TTL_MS',
  'READ_CACHE_TIMELINE_TTL_MS',
  'READ_CACHE_TWEET_TTL_MS',
  'READ_CACHE_SEARCH_TTL_MS',
  'X_QUERY_MAX_LENGTH',
  'OTEL_EXPORTER_OTLP_ENDPOINT',
  'POLLER_PORT',
  'DISPATCHER_PORT',
  'OPS_HOST',
  'SESSION_KEY_PREFIX',
  'SESSION_TTL_SEC',
  'COOKIE_SECURE',
  'SIGNIN_MAX_PER_EMAIL',
  'SIGNIN_MAX_PER_ADDRESS',
  'SIGNIN_WINDOW_SEC',
  'SIGNIN_MAX_PER_EMAIL_HOURLY',
  'WEBHOOK_TEST_MAX_PER_MIN',
  'UNKNOWN_KEY_MAX_PER_MIN',
  'GATEWAY_TRUSTED_PROXY_HOPS',
  'SESSION_MAX_AGE_SEC',
  'MAIL_RETRY_BASE_MS',
  'MAIL_RETRY_MAX_MS',
  'MAIL_POLL_MS',
  'VERIFY_RESEND_MAX_PER_HOUR',
  'LIVE_REFRESH_MS',
]);

/** Placeholder values for the Secret template's keys, so the rendered env can be parsed. */
export const SECRET_PLACEHOLDERS: Record<string, string> = {
  DATABASE_URL: 'postgresql://sts:secret@postgres.example:5432/sts',
  REDIS_URL: 'redis://:secret@redis.example:6379',
  AMQP_URL: 'amqp://sts:secret@rabbitmq.example:5672/sts',
  INTERNAL_TOKEN: 'placeholder-internal-token-0123456789',
  SECRETS_ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64'),
  SESSION_SECRET: 'placeholder-session-secret-0123456789abcdefghijklmnopqrstuvwxyz',
  X_BEARER_TOKEN: '',
  SMTP_URL: 'smtp://mailer:secret@smtp.example:587',
};

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- rendered YAML, checked field by field by the tests
  spec?: any;
  data?: Record<string, string>;
}

/** kubectl, or null when it is not installed (KUBECTL overrides the path). */
export function kubectlPath(): string | null {
  const candidates = [process.env.KUBECTL, '/usr/bin/kubectl', '/usr/local/bin/kubectl'].filter(Boolean) as string[];
  for (const c of candidates) if (existsSync(c)) return c;
  try {
    return execFileSync('sh', ['-c', 'command -v kubectl'], { encoding: 'utf8' }).trim() || null;
  } catch {
    return null;
  }
}

export function renderOverlay(kubectl: string, overlay: string): { yaml: string; objects: K8sObject[] } {
  const yaml = execFileSync(kubectl, ['kustomize', path.join(REPO_ROOT, 'k8s/overlays', overlay)], {
    encoding: 'utf8',
    maxBuffer: 32 * 1024 * 1024,
  });
  const objects = parseAllDocuments(yaml)
    .map((d) => d.toJS() as K8sObject | null)
    .filter((o): o is K8sObject => o !== null);
  return { yaml, objects };
}

/** KEY=value lines of an env file (comments and blanks skipped). */
export function readEnvFile(file: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const t = line.trim();
    if (!t || t.startsWith('#')) continue;
    const i = t.indexOf('=');
    if (i > 0) out[t.slice(0, i)] = t.slice(i + 1);
  }
  return out;
}

/** The compose file with its `<<` merge keys resolved. */
export function readCompose(): { raw: unknown; services: Record<string, ComposeService> } {
  const raw = parse(readFileSync(path.join(REPO_ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
    services: Record<string, ComposeService>;
  };
  return { raw, services: raw.services };
}

export interface ComposeService {
  command?: string[];
  environment?: Record<string, string | number | null>;
  healthcheck?: { test: string[] };
  depends_on?: Record<string, { condition: string }>;
  ports?: string[];
  restart?: string;
}

/**
 * `${VAR:-default}` / `${VAR}` as compose resolves them with an empty environment; a required
 * `${VAR:?message}` (the secrets) as if the operator had set it, to its SECRET_PLACEHOLDERS value.
 */
export function composeValue(v: unknown): string {
  return String(v)
    .replace(/\$\{([A-Z0-9_]+):\?[^}]*\}/g, (_m, name: string) => SECRET_PLACEHOLDERS[name] ?? '')
    .replace(/\$\{([A-Z0-9_]+)(?::?-([^}]*))?\}/g, (_m, _name: string, def?: string) => def ?? '');
}

export interface ServiceEnv {
  name: string;
  schema: z.ZodObject;
}

/** Every service with a src/env.ts, with the zod object schema it exports (…EnvSchema). */
export async function serviceEnvSchemas(): Promise<ServiceEnv[]> {
  const dir = path.join(REPO_ROOT, 'services');
  const out: ServiceEnv[] = [];
  for (const name of readdirSync(dir).sort()) {
    const file = path.join(dir, name, 'src/env.ts');
    if (!existsSync(file)) continue;
    const mod = (await import(file)) as Record<string, unknown>;
    const entry = Object.entries(mod).find(
      ([k, v]) => /EnvSchema$/.test(k) && typeof v === 'object' && v !== null && 'shape' in v,
    );
    if (!entry) throw new Error(`services/${name}/src/env.ts exports no …EnvSchema zod object`);
    out.push({ name, schema: entry[1] as z.ZodObject });
  }
  return out;
}

/** True when the variable may be left unset (it has a default or is optional). */
export function hasDefault(schema: z.ZodObject, key: string): boolean {
  const field = schema.shape[key] as z.ZodType | undefined;
  return field ? field.safeParse(undefined).success : false;
}

/** Renders a kustomization directory (an overlay or a scratch copy of one). */
export function renderDir(kubectl: string, dir: string): K8sObject[] {
  const yaml = execFileSync(kubectl, ['kustomize', dir], { encoding: 'utf8', maxBuffer: 32 * 1024 * 1024 });
  return parseAllDocuments(yaml)
    .map((d) => d.toJS() as K8sObject | null)
    .filter((o): o is K8sObject => o !== null);
}

/** The image name the base uses; each overlay's `images:` entry of this name pins it. */
export const IMAGE_NAME = 'social-timeline-service';

/**
 * `kustomize edit set image NAME=REF` in `dir`: the kustomize binary when there is one (KUSTOMIZE
 * or on PATH), else the same edit done on the file (the entry named NAME gets newName/newTag, or
 * digest; a missing entry is added), so the check runs where only kubectl is installed.
 */
export function setImage(dir: string, name: string, ref: string): void {
  const bin = process.env.KUSTOMIZE ?? commandPath('kustomize');
  if (bin) {
    execFileSync(bin, ['edit', 'set', 'image', `${name}=${ref}`], { cwd: dir });
    return;
  }
  const file = path.join(dir, 'kustomization.yaml');
  const doc = parseDocument(readFileSync(file, 'utf8'));
  const at = ref.lastIndexOf('@') > 0 ? ref.lastIndexOf('@') : -1;
  const colon = ref.lastIndexOf(':');
  const entry: Record<string, string> = { name };
  if (at > 0) Object.assign(entry, { newName: ref.slice(0, at), digest: ref.slice(at + 1) });
  else if (colon > ref.lastIndexOf('/'))
    Object.assign(entry, { newName: ref.slice(0, colon), newTag: ref.slice(colon + 1) });
  else entry.newName = ref;
  const images = ((doc.toJS() as { images?: Record<string, string>[] }).images ?? []).filter((i) => i.name !== name);
  doc.set('images', [...images, entry]);
  writeFileSync(file, doc.toString());
}

function commandPath(cmd: string): string | null {
  try {
    return execFileSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' }).trim() || null;
  } catch {
    return null;
  }
}

/** promtool (Debian's prometheus package; .ci/run installs it), or null. PROMTOOL overrides. */
export function promtoolPath(): string | null {
  if (process.env.PROMTOOL && existsSync(process.env.PROMTOOL)) return process.env.PROMTOOL;
  return commandPath('promtool');
}

/**
 * PostgreSQL connections a pod opens besides its DB_POOL_SIZE pool, each a session of its own
 * (never through a transaction-mode PgBouncer): the poller's outbox relay LISTEN, its metrics
 * reporter's advisory lock, the schedule wake-up LISTEN and the X stream leader's advisory lock.
 * k8s/README.md, "Database connection budget".
 */
const SESSION_CONNECTIONS: Record<string, number> = { poller: 4 };

/** The default of DB_MAX_CONNECTIONS_BUDGET: PostgreSQL's max_connections 100 less 10 for admins. */
export const DEFAULT_DB_BUDGET = 90;

export interface DbBudget {
  rows: { name: string; pool: number; session: number; min: number; max: number }[];
  min: number;
  max: number;
}

/** Connections of every Deployment (and the migration Job) at minimum and at maximum scale. */
/* eslint-disable @typescript-eslint/no-unsafe-member-access -- rendered YAML, fields checked by the tests */
export function dbBudget(objects: K8sObject[]): DbBudget {
  const of = (kind: string) => objects.filter((o) => o.kind === kind);
  const rows: DbBudget['rows'] = [];
  for (const dep of of('Deployment')) {
    const name = dep.metadata.name;
    const env = (dep.spec.template.spec.containers[0].env ?? []) as { name: string; value?: string }[];
    const pool = Number(env.find((e) => e.name === 'DB_POOL_SIZE')?.value);
    const hpa = of('HorizontalPodAutoscaler').find((h) => h.spec.scaleTargetRef.name === name);
    const so = of('ScaledObject').find((s) => s.spec.scaleTargetRef.name === name);
    const min = Number(hpa?.spec.minReplicas ?? so?.spec.minReplicaCount ?? dep.spec.replicas ?? 1);
    const max = Number(hpa?.spec.maxReplicas ?? so?.spec.maxReplicaCount ?? dep.spec.replicas ?? 1);
    rows.push({ name, pool, session: SESSION_CONNECTIONS[name] ?? 0, min, max });
  }
  // the migration runner holds one connection while the Job runs
  for (const job of of('Job')) rows.push({ name: `job/${job.metadata.name}`, pool: 1, session: 0, min: 1, max: 1 });
  const total = (k: 'min' | 'max') => rows.reduce((n, r) => n + r[k] * (r.pool + r.session), 0);
  return { rows, min: total('min'), max: total('max') };
}
/* eslint-enable @typescript-eslint/no-unsafe-member-access */
