#!/usr/bin/env node
// `npm start`: the whole system on this machine. Applies the migrations, seeds the demo account,
// then runs every service (read-api, gateway, poller, webhook-dispatcher, dashboard, and the demo
// tweet generator `npm run cli -- demo run`) with their output prefixed by name. Ctrl-C stops them
// all gracefully. Each service serves /healthz, /readyz and /metrics on its own OPS_PORT default
// (gateway 3100, dashboard 3101, read-api 3102, poller 3003, dispatcher 3004); setting OPS_PORT=0
// gives each a free one.
//
// POLLER_REPLICAS (default 1) pollers run at once, as a Deployment's pods would: replica i's ops
// port is POLLER_OPS_PORT (default 3003, or 0 with OPS_PORT=0: any free one) + 10·i (3003, 3013, …);
// one that exits is started again after a second while the others keep running
// (packages/common/src/replicas.ts). A bad count exits 2 naming the variable, before anything runs.
//
// Configuration comes from the environment (docs/configuration.md). Secrets that a developer has not set
// (INTERNAL_TOKEN, SECRETS_ENCRYPTION_KEY) are generated once and kept in .tmp/dev.env, which git
// ignores, so restarts can still decrypt stored webhook secrets.
//
// The children's pids are kept in .tmp/start-children.json while they run: a start after one that
// was killed outright (SIGKILL, a closed terminal), whose children kept running and their ports
// held, first stops those still running as this checkout's services, saying so
// (packages/common/src/devChildren.ts); no other process is touched.
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { tsImport } from 'tsx/esm/api';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const tsx = ['--import', 'tsx'];

const { parseReplicaCount, replicaOpsPort, superviseReplicas } = await tsImport(
  '../packages/common/src/replicas.ts',
  import.meta.url,
);
const pollers = (() => {
  try {
    const count = parseReplicaCount('POLLER_REPLICAS', process.env.POLLER_REPLICAS);
    // POLLER_OPS_PORT wins; else OPS_PORT=0 (any free port) applies to the pollers too
    const raw = process.env.POLLER_OPS_PORT || (process.env.OPS_PORT === '0' ? '0' : '3003');
    const base = Number(raw);
    if (!/^[0-9]{1,5}$/.test(raw) || replicaOpsPort(base, count - 1) > 65535)
      throw new Error(`POLLER_OPS_PORT: must be a port that leaves room for ${count} replicas 10 apart`);
    return { count, base };
  } catch (err) {
    console.error(`start: invalid configuration: ${err.message}`);
    process.exit(2);
  }
})();

const { stopLeftoverChildren, writeChildRecord } = await tsImport(
  '../packages/common/src/devChildren.ts',
  import.meta.url,
);
await stopLeftoverChildren(root, { log: (line) => console.log(`start: ${line}`) });
/** the running children and their arguments, as recorded in .tmp/start-children.json */
const recorded = new Map();
function record(child, args) {
  if (!child.pid) return;
  recorded.set(child, args);
  writeChildRecord(
    root,
    [...recorded].map(([c, a]) => ({ pid: c.pid, args: a })),
  );
  child.once('exit', () => {
    recorded.delete(child);
    writeChildRecord(
      root,
      [...recorded].map(([c, a]) => ({ pid: c.pid, args: a })),
    );
  });
}

function devSecrets() {
  const file = path.join(root, '.tmp', 'dev.env');
  const saved = existsSync(file)
    ? Object.fromEntries(
        readFileSync(file, 'utf8')
          .split('\n')
          .filter((l) => l.includes('='))
          .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
      )
    : {};
  const wanted = {
    INTERNAL_TOKEN: () => randomBytes(24).toString('base64url'),
    SECRETS_ENCRYPTION_KEY: () => randomBytes(32).toString('base64'),
    // a well-formed key (prefix + checksum), pinned so every start prints the same demo key
    DEMO_API_KEY: () =>
      spawnSync(
        process.execPath,
        [...tsx, '-e', "process.stdout.write(require('./packages/core/src/apiKeys.ts').generateApiKey().key)"],
        {
          cwd: root,
          encoding: 'utf8',
        },
      ).stdout.trim(),
  };
  let changed = false;
  for (const [name, make] of Object.entries(wanted)) {
    if (!saved[name]) {
      saved[name] = make();
      changed = true;
    }
  }
  if (changed) {
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(
      file,
      Object.entries(saved)
        .map(([k, v]) => `${k}=${v}\n`)
        .join(''),
      { mode: 0o600 },
    );
  }
  return saved;
}

const env = {
  DATABASE_URL: 'postgresql://postgres@127.0.0.1:5432/sts',
  REDIS_URL: 'redis://127.0.0.1:6379',
  AMQP_URL: 'amqp://guest:guest@127.0.0.1:5672',
  READ_API_URL: `http://127.0.0.1:${process.env.READ_API_PORT ?? 3002}`,
  ...devSecrets(),
  ...Object.fromEntries(Object.entries(process.env).filter(([, v]) => v !== undefined && v !== '')),
};

// --- dashboard (services/dashboard) -------------------------------------------------------------
// Its session-signing secret and the demo login's password are generated once and kept in
// .tmp/dev.env like the secrets above (the environment still wins); the demo account gets the
// password after the seed, below, and the URL and login are printed at the end.
const dashboard = (() => {
  const file = path.join(root, '.tmp', 'dev.env');
  const text = existsSync(file) ? readFileSync(file, 'utf8') : '';
  const has = (name) => new RegExp(`^${name}=.+$`, 'm').test(text);
  const extra = {
    SESSION_SECRET: () => randomBytes(32).toString('base64url'),
    DEMO_DASHBOARD_PASSWORD: () => randomBytes(9).toString('base64url'),
  };
  let added = '';
  for (const [name, make] of Object.entries(extra)) if (!has(name)) added += `${name}=${make()}\n`;
  if (added) {
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, (text && !text.endsWith('\n') ? `${text}\n` : text) + added, { mode: 0o600 });
  }
  const saved = Object.fromEntries(
    readFileSync(file, 'utf8')
      .split('\n')
      .filter((l) => l.includes('='))
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  );
  for (const name of Object.keys(extra)) env[name] ||= saved[name];
  return { url: `http://127.0.0.1:${env.DASHBOARD_PORT ?? 3001}`, email: '' };
})();
// --- end dashboard ---------------------------------------------------------------------------------

function runOnce(label, args) {
  const r = spawnSync(process.execPath, [...tsx, ...args], { cwd: root, env, encoding: 'utf8' });
  if (r.status !== 0) {
    process.stderr.write(r.stdout ?? '');
    process.stderr.write(r.stderr ?? '');
    console.error(`start: ${label} failed`);
    process.exit(1);
  }
  return r.stdout;
}

// --- maintenance: how often the storage maintenance step runs (see the end of this file) ----------
const maintenanceEvery = Number(env.MAINTENANCE_INTERVAL_SECONDS ?? 3600);
if (!Number.isInteger(maintenanceEvery) || maintenanceEvery < 1 || maintenanceEvery > 86_400) {
  console.error('start: MAINTENANCE_INTERVAL_SECONDS must be a whole number of seconds from 1 to 86400');
  process.exit(2);
}
// --- end maintenance -------------------------------------------------------------------------------

console.log('start: applying migrations');
process.stdout.write(runOnce('migrations', ['packages/db/src/cli.ts', 'deploy']));
// Consumer queues are quorum queues since the delivery work; a broker that still has the classic
// queues of earlier versions gets them moved (idempotent, and nothing consumes them yet here).
console.log('start: checking the RabbitMQ queues');
process.stdout.write(runOnce('queues', ['packages/admin-cli/src/main.ts', 'queues', 'migrate']));
console.log('start: seeding the demo account');
let seed = {};
try {
  seed = JSON.parse(runOnce('seed', ['packages/admin-cli/src/main.ts', 'seed', '--json']).trim().split('\n').pop());
} catch {
  console.error('start: the seed printed no JSON');
}

// --- dashboard: the demo account's dashboard password -----------------------------------------------
if (seed.account_id) {
  try {
    dashboard.email = JSON.parse(
      runOnce('dashboard demo login', ['services/dashboard/src/demoLogin.ts', seed.account_id])
        .trim()
        .split('\n')
        .pop(),
    ).email;
  } catch {
    console.error('start: the dashboard demo login printed no JSON');
  }
}
// --- end dashboard ---------------------------------------------------------------------------------

// --- mail: without SMTP_URL a local SMTP sink prints each mail's subject and links ----------------
const mailSink = !env.SMTP_URL;
if (mailSink) env.SMTP_URL = `smtp://127.0.0.1:${env.MAIL_SINK_PORT ?? 2525}`;
env.DASHBOARD_PUBLIC_URL ??= `http://127.0.0.1:${env.DASHBOARD_PORT ?? 3001}`;
// --- end mail --------------------------------------------------------------------------------------

const services = [
  ...(mailSink ? [['mail', 'services/dashboard/src/mail/devSinkMain.ts']] : []),
  ['read-api', 'services/read-api/src/main.ts'],
  ['gateway', 'services/gateway/src/main.ts'],
  ['dispatcher', 'services/webhook-dispatcher/src/main.ts'],
  ['dashboard', 'services/dashboard/src/main.ts'],
  ['demo', 'packages/admin-cli/src/main.ts', 'demo', 'run'],
].filter(([, file]) => existsSync(path.join(root, file)));

const children = new Map();
let stopping = false;
const pollerNames = Array.from({ length: pollers.count }, (_, i) =>
  pollers.count === 1 ? 'poller' : `poller-${i + 1}`,
);
const width = Math.max(...services.map(([n]) => n.length), ...pollerNames.map((n) => n.length));
/** the poller replicas, supervised (started below) */
let pollerSet;

function prefixed(name, stream, out) {
  let buf = '';
  stream.on('data', (chunk) => {
    buf += chunk.toString();
    const lines = buf.split('\n');
    buf = lines.pop() ?? '';
    for (const line of lines) out.write(`${name.padEnd(width)} | ${line}\n`);
  });
}

function stopAll(code) {
  if (stopping) return;
  stopping = true;
  for (const child of children.values()) child.kill('SIGTERM');
  const pollersStopped = pollerSet ? pollerSet.stop('SIGTERM') : Promise.resolve();
  const force = setTimeout(() => {
    for (const child of children.values()) child.kill('SIGKILL');
    for (const child of pollerSet?.children() ?? []) child?.kill('SIGKILL');
  }, 15_000);
  force.unref();
  void pollersStopped.then(() => {
    const check = setInterval(() => {
      if ([...children.values()].every((c) => c.exitCode !== null || c.signalCode !== null)) {
        clearInterval(check);
        process.exit(code);
      }
    }, 100);
  });
}

for (const [name, file, ...args] of services) {
  const child = spawn(process.execPath, [...tsx, file, ...args], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  record(child, [file, ...args]);
  children.set(name, child);
  prefixed(name, child.stdout, process.stdout);
  prefixed(name, child.stderr, process.stderr);
  child.on('exit', (code, signal) => {
    if (!stopping) {
      console.error(`start: ${name} exited (${signal ?? code}); stopping everything`);
      stopAll(1);
    }
  });
}

if (existsSync(path.join(root, 'services/poller/src/main.ts'))) {
  pollerSet = superviseReplicas({
    count: pollers.count,
    spawn: (i) => {
      const opsPort = String(replicaOpsPort(pollers.base, i));
      const child = spawn(process.execPath, [...tsx, 'services/poller/src/main.ts'], {
        cwd: root,
        env: { ...env, OPS_PORT: opsPort },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      record(child, ['services/poller/src/main.ts']);
      prefixed(pollerNames[i], child.stdout, process.stdout);
      prefixed(pollerNames[i], child.stderr, process.stderr);
      return child;
    },
    onExit: (i, code, signal) =>
      console.error(`start: ${pollerNames[i]} exited (${signal ?? code}); starting it again in 1 s`),
  });
}

process.on('SIGINT', () => stopAll(0));
process.on('SIGTERM', () => stopAll(0));

const gateway = `http://127.0.0.1:${env.GATEWAY_PORT ?? 3000}`;
console.log(`start: running ${[...services.map(([n]) => n), ...(pollerSet ? pollerNames : [])].join(', ')}`);
if (seed.key) {
  console.log(`start: demo account: ${seed.account_id}`);
  console.log(`start: demo API key: ${seed.key}`);
  console.log(
    `start: try  curl -H "Authorization: Bearer ${seed.key}" ${gateway}/api/v1/users/${seed.usernames?.[0] ?? 'demo_news'}`,
  );
}
// --- dashboard: where to sign in ------------------------------------------------------------------
console.log(`start: dashboard: ${dashboard.url}`);
if (dashboard.email)
  console.log(
    `start: dashboard demo login: ${dashboard.email} / ${env.DEMO_DASHBOARD_PASSWORD} (kept in .tmp/dev.env)`,
  );
// --- end dashboard ---------------------------------------------------------------------------------

// --- maintenance: `cli maintenance run` at start and every MAINTENANCE_INTERVAL_SECONDS (default an
// hour), as the k8s CronJob runs it: week partitions ahead and past retention, finished rows pruned
// in batches (docs/retention.md). A failed run is logged and retried at the next tick; it never
// stops the services.
let maintenanceChild = null;
function runMaintenance() {
  if (stopping || maintenanceChild) return;
  const child = spawn(process.execPath, [...tsx, 'packages/admin-cli/src/main.ts', 'maintenance', 'run'], {
    cwd: root,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  maintenanceChild = child;
  record(child, ['packages/admin-cli/src/main.ts', 'maintenance', 'run']);
  prefixed('maintenance', child.stdout, process.stdout);
  prefixed('maintenance', child.stderr, process.stderr);
  child.on('exit', (code) => {
    maintenanceChild = null;
    if (code !== 0 && !stopping)
      console.error(`start: maintenance failed (${code}); next run in ${maintenanceEvery} s`);
  });
}
runMaintenance();
setInterval(runMaintenance, maintenanceEvery * 1000).unref();
process.on('exit', () => maintenanceChild?.kill('SIGTERM'));
// --- end maintenance -------------------------------------------------------------------------------
