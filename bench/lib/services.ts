/**
 * The set-up every bench main repeats: where the shared services are, a database of its own
 * (created, migrated, dropped afterwards), its Redis keys under a prefix, the test CA for HTTPS
 * receivers, and stopping the service processes it started.
 *
 * Where the benches find the services: BENCH_POSTGRES_URL (the admin URL, database `postgres`) and
 * BENCH_REDIS_URL, else the local defaults; the benches that also use RabbitMQ read the test run's
 * TEST_* variables too (`serviceUrls`).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { Redis } from 'ioredis';
import { Client } from 'pg';
import { ensureDatabase, migrate } from '../../packages/db/src';
import { entrypointNodeFlags } from '../../packages/deploy-check/src/deploy';
import { ensureTestCa, testCaTrusted } from '../../packages/testing/src/https';
import { LOCAL_DEFAULTS, urlsFromEnv, type ServiceUrls } from '../../packages/testing/src/services';

/** the repository root: service files are started from here */
export const root = path.resolve(__dirname, '../..');

/**
 * How the benches run a service: BENCH_RUNTIME `bundle` (default) as the image does, the bundle of
 * scripts/build.mjs with the node flags of its line in scripts/docker-entrypoint.sh; `tsx` as in
 * development (`npm start`), the TypeScript sources through tsx, no flags.
 */
export const RUNTIME = process.env.BENCH_RUNTIME ?? 'bundle';

/** node's arguments that run service `name` from its TypeScript sources, as in development */
export const tsxEntry = (name: string): string[] => ['--import', 'tsx', `services/${name}/src/main.ts`];

/** node's arguments after the bench's own flags that run service `name` (e.g. `webhook-dispatcher`) */
function serviceEntry(name: string): string[] {
  if (RUNTIME === 'tsx') return tsxEntry(name);
  if (RUNTIME !== 'bundle') throw new Error(`BENCH_RUNTIME must be bundle or tsx, not ${RUNTIME}`);
  const outdir = path.join(root, '.tmp', 'bench-dist', name);
  execFileSync(process.execPath, [path.join(root, 'scripts/build.mjs'), '--outdir', outdir, '--entry', name], {
    stdio: 'pipe',
  });
  return [...entrypointNodeFlags(name), path.join(outdir, 'bin', `${name}.js`)];
}

/** PostgreSQL's admin URL: BENCH_POSTGRES_URL, else the local server. */
export function postgresAdminUrl(): string {
  return process.env.BENCH_POSTGRES_URL ?? LOCAL_DEFAULTS.postgres;
}

/** Redis: BENCH_REDIS_URL, else the local server. */
export function redisUrl(): string {
  return process.env.BENCH_REDIS_URL ?? LOCAL_DEFAULTS.redis;
}

/** PostgreSQL, Redis and RabbitMQ as the tests find them (TEST_*), BENCH_POSTGRES_URL first for PostgreSQL. */
export function serviceUrls(): ServiceUrls {
  const urls: ServiceUrls = { ...LOCAL_DEFAULTS, ...urlsFromEnv() };
  if (process.env.BENCH_POSTGRES_URL) urls.postgres = process.env.BENCH_POSTGRES_URL;
  return urls;
}

/** Creates database `name` next to `adminUrl` and applies the migrations; returns its URL. */
export async function createDatabase(adminUrl: string, name: string): Promise<string> {
  const url = databaseUrl(adminUrl, name);
  await ensureDatabase(url);
  await migrate(url);
  return url;
}

/** The URL of database `name` on the server of `adminUrl`. */
export function databaseUrl(adminUrl: string, name: string): string {
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/** Drops database `name` (closing its connections). */
export async function dropDatabase(adminUrl: string, name: string): Promise<void> {
  const c = new Client({ connectionString: adminUrl });
  await c.connect();
  try {
    await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  } finally {
    await c.end();
  }
}

/** Deletes every Redis key that starts with `prefix`. */
export async function deleteKeys(url: string, prefix: string): Promise<void> {
  const redis = new Redis(url);
  try {
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length) await redis.del(...keys);
  } finally {
    redis.disconnect();
  }
}

/**
 * HTTPS receivers use the test CA (packages/testing/src/https.ts); Node trusts it only through
 * NODE_EXTRA_CA_CERTS at start, so a bench that needs it makes the CA and runs `file` (its own
 * __filename) again with it set, exiting with that run's code.
 */
export async function trustTestCa(file: string): Promise<void> {
  if (testCaTrusted()) return;
  const ca = await ensureTestCa();
  const child = spawn(process.execPath, ['--import', 'tsx', file, ...process.argv.slice(2)], {
    cwd: root,
    stdio: 'inherit',
    env: { ...process.env, NODE_EXTRA_CA_CERTS: ca.certPath },
  });
  const code = await new Promise<number>((resolve) => child.on('exit', (c) => resolve(c ?? 1)));
  process.exit(code);
}

/** Stops a child with SIGTERM and waits for its exit (SIGKILL after `killAfterMs`). */
export async function stopChild(child: ChildProcess | undefined, killAfterMs = 30_000): Promise<void> {
  if (!child || child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
  await exited;
  clearTimeout(timer);
}

export interface StartOptions {
  /** node's arguments that run the service (default serviceEntry(name), as BENCH_RUNTIME says) */
  entry?: string[];
  /** node flags before the entry (e.g. `--cpu-prof`) */
  nodeArgs?: string[];
  /** the line that says it is ready (default `<name> started`) */
  ready?: RegExp;
  /** how long it may take to be ready (default 60 s); then it is killed */
  timeoutMs?: number;
}

export interface StartedService {
  child: ChildProcess;
  /** the ready line, parsed (the service's JSON log line: its `port`, `opsPort`) */
  line: { port?: number; opsPort?: number };
}

/**
 * Starts service `name` (e.g. `webhook-dispatcher`) as a child process with `env`; resolves once it
 * logged its ready line. Its stdout is read until then and drained after (the caller may listen);
 * stderr is the bench's. Rejects with its last output if it exits or takes too long first.
 */
export async function startService(
  name: string,
  env: NodeJS.ProcessEnv,
  o: StartOptions = {},
): Promise<StartedService> {
  const args = [...(o.nodeArgs ?? []), ...(o.entry ?? serviceEntry(name))];
  const child = spawn(process.execPath, args, { cwd: root, env, stdio: ['ignore', 'pipe', 'inherit'] });
  const ready = o.ready ?? new RegExp(`${name} started`);
  const timeoutMs = o.timeoutMs ?? 60_000;
  let buf = '';
  const line = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${name} did not start within ${timeoutMs / 1000} s:\n${buf.slice(-3000)}`));
    }, timeoutMs);
    const onExit = (code: number | null) =>
      reject(new Error(`${name} exited with ${code} before it started:\n${buf.slice(-3000)}`));
    const onData = (chunk: Buffer) => {
      buf += chunk.toString('utf8');
      // whole lines only: a chunk may end inside the ready line
      const found = buf
        .split('\n')
        .slice(0, -1)
        .find((l) => ready.test(l));
      if (found === undefined) return;
      clearTimeout(timer);
      child.stdout.off('data', onData);
      child.off('exit', onExit);
      child.stdout.resume();
      resolve(found);
    };
    child.stdout.on('data', onData);
    child.once('exit', onExit);
  });
  let parsed: StartedService['line'] = {};
  try {
    parsed = JSON.parse(line) as StartedService['line'];
  } catch {
    // a plain-text ready line carries no fields
  }
  return { child, line: parsed };
}

/** The webhook-dispatcher's environment on a bench's database, vhost and secrets key, ops on a spare port. */
export function dispatcherEnv(o: { dbUrl: string; amqpUrl: string; key: string; logLevel: string }): NodeJS.ProcessEnv {
  return {
    ...process.env,
    DATABASE_URL: o.dbUrl,
    AMQP_URL: o.amqpUrl,
    SECRETS_ENCRYPTION_KEY: o.key,
    WEBHOOK_ALLOW_PRIVATE_HOSTS: 'localhost',
    OPS_PORT: '0',
    LOG_LEVEL: o.logLevel,
  };
}
