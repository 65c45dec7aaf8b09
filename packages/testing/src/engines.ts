/**
 * Private engines for tests that restart, flush or kill them: a PostgreSQL cluster (initdb +
 * pg_ctl), a Redis server and a RabbitMQ node of their own, on spare ports, in a temporary
 * directory, so such a test never touches the shared services other tests use.
 *
 * - PostgreSQL: `initdb` with trust auth into <tmp>/pg, `pg_ctl start` on 127.0.0.1:<port> with
 *   its socket in <tmp>; as root everything runs as the `postgres` user (initdb refuses root).
 * - Redis: `redis-server --save "" --appendonly no` on 127.0.0.1:<port> (nothing survives a restart).
 * - RabbitMQ: a second node `sts-test-<random>@localhost` with its own data, logs, config file,
 *   env file (so /etc/rabbitmq/rabbitmq-env.conf and rabbitmq.conf, which name the shared node
 *   and its port, are not read), an empty plugin list and its own Erlang cookie in its own HOME
 *   (so its CLI calls cannot reach the shared node either). As root it runs as `rabbitmq`.
 *
 * Ports are picked at random in 20000-32000 and checked free: below Linux's ephemeral range,
 * where a client socket can hold a port a server then fails to bind (seen with RabbitMQ).
 * Binaries: PG_BIN_DIR (else the newest /usr/lib/postgresql/<v>/bin, else PATH), redis-server on
 * PATH, RABBITMQ_BIN_DIR (else /usr/lib/rabbitmq/bin, else PATH).
 */
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const isRoot = process.getuid?.() === 0;

/** a port in 20000-32000 that 127.0.0.1 can bind now */
export async function sparePort(): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    const free = await new Promise<boolean>((resolve) => {
      const s = createServer();
      s.once('error', () => resolve(false));
      s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
    });
    if (free) return port;
  }
  throw new Error('no spare port found in 20000-32000');
}

/** a temporary directory, owned by `user` when running as root */
function tempDir(prefix: string, user?: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  if (isRoot && user) chownTo(dir, user);
  return dir;
}

function chownTo(file: string, user: string): void {
  const { uid, gid } = userIds(user);
  chownSync(file, uid, gid);
}

const idCache = new Map<string, { uid: number; gid: number }>();
function userIds(user: string): { uid: number; gid: number } {
  const cached = idCache.get(user);
  if (cached) return cached;
  // /etc/passwd: name:x:uid:gid:...
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`${user}:`));
  if (!line) throw new Error(`no user ${user} on this machine`);
  const [, , uid, gid] = line.split(':');
  const ids = { uid: Number(uid), gid: Number(gid) };
  idCache.set(user, ids);
  return ids;
}

/** runs `file args` (as `user` when root), with `env` added; rejects with its output on failure */
async function exec(
  user: string | undefined,
  file: string,
  args: string[],
  env: Record<string, string> = {},
  timeoutMs = 120_000,
): Promise<string> {
  const [cmd, argv] =
    isRoot && user ? ['runuser', ['-u', user, '--', 'env', ...envArgs(env), file, ...args]] : [file, args];
  try {
    const { stdout } = await run(cmd, argv, {
      env: { ...process.env, ...env },
      timeout: timeoutMs,
      cwd: os.tmpdir(),
    });
    return stdout;
  } catch (err) {
    const e = err as { message: string; stdout?: string; stderr?: string };
    throw new Error(
      `${path.basename(file)} ${args.join(' ')} failed: ${e.message}\n${e.stdout ?? ''}${e.stderr ?? ''}`,
    );
  }
}

function envArgs(env: Record<string, string>): string[] {
  return Object.entries(env).map(([k, v]) => `${k}=${v}`);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---- PostgreSQL ----

export interface PrivatePostgres {
  port: number;
  /** URL of database `name` (default postgres) */
  url(name?: string): string;
  /** pg_ctl restart: `fast` rolls back open transactions and closes connections; `immediate` is a crash (recovery at start) */
  restart(mode?: 'fast' | 'immediate'): Promise<void>;
  /** stops the cluster and removes its directory */
  stop(): Promise<void>;
}

function pgBinDir(): string | undefined {
  if (process.env.PG_BIN_DIR) return process.env.PG_BIN_DIR;
  const base = '/usr/lib/postgresql';
  if (!existsSync(base)) return undefined;
  const versions = readdirSync(base)
    .filter((v) => existsSync(path.join(base, v, 'bin', 'pg_ctl')))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] ? path.join(base, versions[0], 'bin') : undefined;
}

export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const bin = pgBinDir();
  const tool = (name: string) => (bin ? path.join(bin, name) : name);
  const dir = tempDir('sts-pg-', 'postgres');
  const data = path.join(dir, 'data');
  const port = await sparePort();
  const opts = `-k ${dir} -p ${port} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`;
  const ctl = (args: string[]) =>
    exec('postgres', tool('pg_ctl'), ['-D', data, '-l', path.join(dir, 'log'), '-w', '-t', '60', ...args]);
  try {
    await exec('postgres', tool('initdb'), ['-D', data, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--no-sync']);
    await ctl(['-o', opts, 'start']);
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    port,
    url: (name = 'postgres') => `postgresql://postgres@127.0.0.1:${port}/${name}`,
    async restart(mode = 'fast') {
      await ctl(['-m', mode, '-o', opts, 'restart']);
    },
    async stop() {
      await ctl(['-m', 'immediate', 'stop']).catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

// ---- Redis ----

export interface PrivateRedis {
  port: number;
  url: string;
  /** FLUSHALL, then SHUTDOWN NOSAVE, then a new server on the same port (empty: nothing is persisted) */
  flushAndRestart(): Promise<void>;
  stop(): Promise<void>;
}

export async function startPrivateRedis(): Promise<PrivateRedis> {
  const dir = tempDir('sts-redis-');
  const port = await sparePort();
  let child: ReturnType<typeof spawn> | undefined;
  const cli = (...args: string[]) => exec(undefined, 'redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args]);
  const start = async () => {
    const c = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
      { stdio: 'ignore' },
    );
    child = c;
    for (let i = 0; ; i++) {
      if (c.exitCode !== null) throw new Error(`redis-server on port ${port} exited with ${c.exitCode}`);
      if ((await cli('ping').catch(() => '')).trim() === 'PONG') return;
      if (i > 100) throw new Error(`redis-server on port ${port} did not answer`);
      await sleep(100);
    }
  };
  const stopServer = async () => {
    const c = child;
    if (!c || c.exitCode !== null) return;
    const exited = new Promise((r) => c.once('exit', r));
    await cli('shutdown', 'nosave').catch(() => undefined);
    await Promise.race([exited, sleep(5000)]);
    if (c.exitCode === null) c.kill('SIGKILL');
  };
  await start();
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    async flushAndRestart() {
      await cli('flushall');
      await stopServer();
      await start();
    },
    async stop() {
      await stopServer();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

// ---- RabbitMQ ----

export interface PrivateRabbitMq {
  nodename: string;
  port: number;
  /** amqp://guest:guest@127.0.0.1:<port> (the default vhost) */
  url: string;
  /** `rabbitmqctl stop` (the whole node), then starts it again on the same data and waits until it runs */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

function rabbitBin(name: string): string {
  const dir = process.env.RABBITMQ_BIN_DIR ?? '/usr/lib/rabbitmq/bin';
  return existsSync(path.join(dir, name)) ? path.join(dir, name) : name;
}

export async function startPrivateRabbitMq(): Promise<PrivateRabbitMq> {
  const user = 'rabbitmq';
  const dir = tempDir('sts-rabbit-', user);
  const nodename = `sts-test-${randomBytes(4).toString('hex')}@localhost`;
  const port = await sparePort();
  let distPort = await sparePort();
  while (distPort === port) distPort = await sparePort();
  const files: Record<string, string> = {
    'rabbitmq.conf': 'loopback_users.guest = true\n',
    'rabbitmq-env.conf': '',
    enabled_plugins: '[].\n',
    '.erlang.cookie': randomBytes(20).toString('hex').toUpperCase(),
  };
  for (const [name, text] of Object.entries(files)) {
    const file = path.join(dir, name);
    writeFileSync(file, text, { mode: name === '.erlang.cookie' ? 0o400 : 0o644 });
    if (isRoot) chownTo(file, user);
  }
  const env: Record<string, string> = {
    HOME: dir, // its own Erlang cookie: CLI calls reach this node only
    RABBITMQ_CONF_ENV_FILE: path.join(dir, 'rabbitmq-env.conf'),
    RABBITMQ_CONFIG_FILE: path.join(dir, 'rabbitmq.conf'),
    RABBITMQ_ENABLED_PLUGINS_FILE: path.join(dir, 'enabled_plugins'),
    RABBITMQ_NODENAME: nodename,
    RABBITMQ_NODE_IP_ADDRESS: '127.0.0.1',
    RABBITMQ_NODE_PORT: String(port),
    RABBITMQ_DIST_PORT: String(distPort),
    RABBITMQ_MNESIA_BASE: path.join(dir, 'mnesia'),
    RABBITMQ_LOG_BASE: path.join(dir, 'log'),
    RABBITMQ_PID_FILE: path.join(dir, 'pid'),
    ERL_EPMD_ADDRESS: '127.0.0.1',
    ERL_FLAGS: '-kernel inet_dist_use_interface {127,0,0,1}',
  };
  const ctl = (...args: string[]) => exec(user, rabbitBin('rabbitmqctl'), ['-n', nodename, ...args], env);
  const start = async () => {
    await exec(user, rabbitBin('rabbitmq-server'), ['-detached'], env);
    // waits for the pid file, the node, then the rabbit application (no await_startup: that is
    // another CLI start, seconds on a busy machine, for what `wait` already waited for)
    await ctl('wait', env.RABBITMQ_PID_FILE!, '--timeout', '90');
  };
  const stopNode = () => ctl('stop');
  try {
    await start();
  } catch (err) {
    await stopNode().catch(() => undefined);
    let log = '';
    try {
      log = readFileSync(path.join(dir, 'log', `${nodename}.log`), 'utf8')
        .split('\n')
        .slice(-40)
        .join('\n');
    } catch {
      // no log yet
    }
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`${err instanceof Error ? err.message : String(err)}\n${log}`);
  }
  return {
    nodename,
    port,
    url: `amqp://guest:guest@127.0.0.1:${port}`,
    async restart() {
      await stopNode();
      await start();
    },
    async stop() {
      await stopNode().catch(() => {
        // the node does not answer: end its OS process (only ours: its pid file)
        let pid = NaN;
        try {
          pid = Number(readFileSync(env.RABBITMQ_PID_FILE!, 'utf8').trim());
        } catch {
          // no pid file: the node never started
        }
        if (Number.isInteger(pid) && pid > 0) process.kill(pid, 'SIGKILL');
      });
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
