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
  'STREAM_MAX_LIFETIME_S',
  'USER_CACHE_TTL_MS',
  'DB_POOL_SIZE',
  'DISPATCH_DB_POOL_SIZE',
  'DISPATCH_PREFETCH',
  'WEBHOOK_MAX_CONCURRENCY_PER_ENDPOINT',
  'WEBHOOK_ALLOW_PRIVATE_HOSTS',
  'WEBHOOK_ALLOWED_PORTS',
  'POLL_INTERVAL_SECONDS',
  'POLL_CONCURRENCY',
  'POLL_CLAIM_LIMIT',
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
  'KEY_FILTER_REBUILD_MS',
  'KEY_FILTER_SYNC_MS',
  'PREVIEW_MAX_PER_MIN',
  'PREVIEW_MAX_PER_DAY',
  'REDELIVERY_MAX_PER_HOUR',
  'GATEWAY_TRUSTED_PROXY_HOPS',
  'SESSION_MAX_AGE_SEC',
  'MAIL_RETRY_BASE_MS',
  'MAIL_RETRY_MAX_MS',
  'MAIL_POLL_MS',
  'MAIL_DIGEST_MINUTES',
  'TARGET_FLAP_SHARE',
  'TARGET_FLAP_WINDOW_SEC',
  'TARGET_FLAP_MIN',
  'VERIFY_RESEND_MAX_PER_HOUR',
  'RESET_MAX_PER_HOUR',
  // set only during a key rotation (docs/security.md)
  'SECRETS_ENCRYPTION_KEYS_OLD',
  'LIVE_REFRESH_MS',
]);

/** Placeholder values for the Secret template's keys, so the rendered env can be parsed. */
export const SECRET_PLACEHOLDERS: Record<string, string> = {
  DATABASE_URL: 'postgresql://sts:secret@pgbouncer:6432/sts',
  DATABASE_DIRECT_URL: 'postgresql://sts:secret@postgres.example:5432/sts',
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
  image?: string;
  profiles?: string[];
  environment?: Record<string, string | number | null>;
  healthcheck?: { test: string[] };
  depends_on?: Record<string, { condition: string }>;
  ports?: (string | number | ComposePortObject)[];
  restart?: string;
}

interface ComposePortObject {
  target: number | string;
  published?: number | string;
  host_ip?: string;
}

/** The services users reach: published on every interface. Anything else published is a developer tool. */
export const PUBLIC_SERVICES = new Set(['gateway', 'dashboard']);

/** Loopback host addresses: a port bound to one of these is reachable from the host only. */
const LOOPBACK = new Set(['127.0.0.1', '::1', '[::1]', 'localhost']);

export interface PublishedPort {
  spec: string;
  /** the host address it binds ('' = every interface) */
  hostIp: string;
  loopbackOnly: boolean;
}

/**
 * The host ports a service publishes, from compose's short syntax (`[HOST_IP:]HOST:CONTAINER[/proto]`,
 * IPv6 host addresses in brackets) or long syntax (`{ target, published, host_ip }`). A bare
 * container port (`"8025"`) publishes on a random host port on every interface.
 */
export function publishedPorts(svc: ComposeService): PublishedPort[] {
  return (svc.ports ?? []).map((p) => {
    if (typeof p === 'object') {
      const hostIp = p.host_ip ?? '';
      return { spec: JSON.stringify(p), hostIp, loopbackOnly: LOOPBACK.has(hostIp) };
    }
    const spec = String(p);
    const bracketed = /^\[([^\]]+)\]:/.exec(spec);
    const parts = spec.split(':');
    const hostIp = bracketed ? bracketed[1]! : parts.length === 3 ? parts[0]! : '';
    return { spec, hostIp, loopbackOnly: LOOPBACK.has(hostIp) };
  });
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

/**
 * The node flags the image runs `entry` with: the flags of its `exec node` line in
 * scripts/docker-entrypoint.sh (the case whose patterns name it).
 */
export function entrypointNodeFlags(entry: string): string[] {
  const script = readFileSync(path.join(REPO_ROOT, 'scripts/docker-entrypoint.sh'), 'utf8');
  for (const line of script.split('\n')) {
    const m = /^\s*([\w|-]+)\)\s*(?:shift;\s*)?exec node ((?:--[\w-]+(?:=\S+)?\s+)*)/.exec(line);
    if (m && m[1]!.split('|').includes(entry)) return m[2]!.trim().split(/\s+/).filter(Boolean);
  }
  throw new Error(`scripts/docker-entrypoint.sh runs no node for ${entry}`);
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
 * PostgreSQL connections a pod opens besides its DB_POOL_SIZE pool, straight to PostgreSQL
 * (DATABASE_DIRECT_URL, never through PgBouncer): the poller's one direct session, which carries
 * every LISTEN (outbox relay, push) and the metrics reporter's advisory lock, and the dispatcher's,
 * which LISTENs for monitor changes (packages/db/src/directSession.ts). k8s/README.md, "Database
 * connection budget".
 */
const SESSION_CONNECTIONS: Record<string, number> = { poller: 1, 'webhook-dispatcher': 1 };

/** The Deployment of the base's PgBouncer (k8s/base/pgbouncer.yaml). */
export const PGBOUNCER = 'pgbouncer';
function expect1(ok: boolean, message: string): void {
  if (!ok) throw new Error(message);
}

/** The default of DB_MAX_CONNECTIONS_BUDGET: PostgreSQL's max_connections 100 less 10 for admins. */
export const DEFAULT_DB_BUDGET = 90;

export interface DbBudget {
  rows: { name: string; pool: number; session: number; min: number; max: number }[];
  /** PgBouncer in front: its pods, server connections per pod (max_db_connections), client limit per pod */
  pooler: { replicas: number; perPod: number; maxClientConn: number; clientsMin: number; clientsMax: number } | null;
  /** PostgreSQL connections at minimum and maximum scale */
  min: number;
  max: number;
}

/** `key = value` of an ini text's [pgbouncer] section, as a number (NaN when absent) */
function iniNumber(ini: string, key: string): number {
  const m = new RegExp(`^\\s*${key}\\s*=\\s*(\\d+)\\s*$`, 'm').exec(ini);
  return m ? Number(m[1]) : NaN;
}

/**
 * Connections of every Deployment (and the migration Job) at minimum and at maximum scale. With
 * the base's PgBouncer the services' pools are its clients, and PostgreSQL sees PgBouncer's
 * replicas × max_db_connections plus the direct sessions (poller, migration Job); without it,
 * every pool connects to PostgreSQL.
 */
/* eslint-disable @typescript-eslint/no-unsafe-member-access -- rendered YAML, fields checked by the tests */
export function dbBudget(objects: K8sObject[]): DbBudget {
  const of = (kind: string) => objects.filter((o) => o.kind === kind);
  const rows: DbBudget['rows'] = [];
  let pooler: DbBudget['pooler'] = null;
  for (const dep of of('Deployment')) {
    const name = dep.metadata.name;
    const hpa = of('HorizontalPodAutoscaler').find((h) => h.spec.scaleTargetRef.name === name);
    const so = of('ScaledObject').find((s) => s.spec.scaleTargetRef.name === name);
    const min = Number(hpa?.spec.minReplicas ?? so?.spec.minReplicaCount ?? dep.spec.replicas ?? 1);
    const max = Number(hpa?.spec.maxReplicas ?? so?.spec.maxReplicaCount ?? dep.spec.replicas ?? 1);
    if (name === PGBOUNCER) {
      const volume = (dep.spec.template.spec.volumes as { configMap?: { name: string } }[]).find((v) => v.configMap);
      const cm = of('ConfigMap').find((c) => c.metadata.name === volume?.configMap?.name);
      const ini = cm?.data?.['pgbouncer.ini'] ?? '';
      pooler = {
        replicas: max,
        perPod: iniNumber(ini, 'max_db_connections'),
        maxClientConn: iniNumber(ini, 'max_client_conn'),
        clientsMin: 0,
        clientsMax: 0,
      };
      continue;
    }
    const env = (dep.spec.template.spec.containers[0].env ?? []) as { name: string; value?: string }[];
    const pool = Number(env.find((e) => e.name === 'DB_POOL_SIZE')?.value);
    rows.push({ name, pool, session: SESSION_CONNECTIONS[name] ?? 0, min, max });
  }
  // the migration runner holds one connection while the Job runs
  for (const job of of('Job')) rows.push({ name: `job/${job.metadata.name}`, pool: 1, session: 0, min: 1, max: 1 });
  // the maintenance CronJob (the admin CLI's pool of 2, through DATABASE_URL) runs at most once at a
  // time (Forbid), not always
  for (const cron of of('CronJob')) {
    expect1(cron.spec.concurrencyPolicy === 'Forbid', `CronJob ${cron.metadata.name} must forbid overlapping runs`);
    rows.push({ name: `cronjob/${cron.metadata.name}`, pool: 2, session: 0, min: 0, max: 1 });
  }
  const jobs = (r: DbBudget['rows'][number]) => r.name.startsWith('job/');
  const sum = (k: 'min' | 'max', f: (r: DbBudget['rows'][number]) => number) =>
    rows.reduce((n, r) => n + r[k] * f(r), 0);
  if (!pooler) {
    const all = (r: DbBudget['rows'][number]) => r.pool + r.session;
    return { rows, pooler, min: sum('min', all), max: sum('max', all) };
  }
  // through PgBouncer: the pools are its clients; the sessions and the Job go to PostgreSQL
  const p: NonNullable<DbBudget['pooler']> = pooler;
  p.clientsMin = sum('min', (r) => (jobs(r) ? 0 : r.pool));
  p.clientsMax = sum('max', (r) => (jobs(r) ? 0 : r.pool));
  const direct = (r: DbBudget['rows'][number]) => (jobs(r) ? r.pool : r.session);
  const server = p.replicas * p.perPod;
  return { rows, pooler: p, min: server + sum('min', direct), max: server + sum('max', direct) };
}
/* eslint-enable @typescript-eslint/no-unsafe-member-access */
