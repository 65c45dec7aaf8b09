/**
 * A real PgBouncer (Debian's /usr/sbin/pgbouncer, or PGBOUNCER_BIN) in front of the test run's
 * PostgreSQL, in transaction pool mode as production runs it: started on a free loopback port with
 * its config in a temporary directory, stopped by the caller. Every database of the upstream is
 * reachable through it under its own name (`* =` fallback), so a test database's URL through the
 * pooler is its direct URL with the pooler's host and port.
 *
 * Set up like the k8s and compose PgBouncer: `pool_mode = transaction`, and nothing but
 * `extra_float_digits` in `ignore_startup_parameters` (a client that sends any other startup
 * parameter is refused, as Debian's 1.18 refuses it).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, chmodSync, constants, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import path from 'node:path';
import { freePort } from './process';

export const PGBOUNCER_BIN = process.env.PGBOUNCER_BIN ?? '/usr/sbin/pgbouncer';

/** true when the PgBouncer binary is installed (Debian package `pgbouncer`) */
export function pgbouncerAvailable(): boolean {
  try {
    accessSync(PGBOUNCER_BIN, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

export interface PgBouncerOptions {
  /** a postgresql:// URL of the upstream server (its user and password are the pooler's logins) */
  upstream: string;
  /** server connections per database and user (`default_pool_size`); 10 unless given */
  poolSize?: number;
}

export interface PgBouncer {
  port: number;
  /** `url` (a database of the upstream) with the pooler's host and port */
  pooled(url: string): string;
  /** `url` through this pooler back to the upstream's host and port; any other URL as it is */
  direct(url: string): string;
  /** everything PgBouncer printed, one entry per line */
  lines: string[];
  stop(): Promise<void>;
}

/** the user PgBouncer becomes when started as root (it refuses to run as root): postgres, else nobody */
function unprivilegedUser(): string {
  return /^postgres:/m.test(readFileSync('/etc/passwd', 'utf8')) ? 'postgres' : 'nobody';
}

const quote = (s: string) => `"${s.replaceAll('"', '""')}"`;

/** Starts PgBouncer; resolves once it listens (rejects with its output when it exits first). */
export async function startPgBouncer(options: PgBouncerOptions): Promise<PgBouncer> {
  const upstream = new URL(options.upstream);
  const user = decodeURIComponent(upstream.username || 'postgres');
  const password = decodeURIComponent(upstream.password);
  const port = await freePort();
  const dir = mkdtempSync(path.join(tmpdir(), 'sts-pgbouncer-'));
  // PgBouncer refuses to run as root unless told which user to become; that user reads the files
  chmodSync(dir, 0o755);
  const server = [
    `host=${upstream.hostname}`,
    `port=${upstream.port || '5432'}`,
    `user=${user}`,
    ...(password ? [`password=${password}`] : []),
  ];
  const ini = [
    '[databases]',
    `* = ${server.join(' ')}`,
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    'unix_socket_dir =',
    'auth_type = trust',
    `auth_file = ${path.join(dir, 'users.txt')}`,
    'pool_mode = transaction',
    `default_pool_size = ${options.poolSize ?? 10}`,
    'max_client_conn = 2000',
    'ignore_startup_parameters = extra_float_digits',
    'server_idle_timeout = 10',
    'log_connections = 0',
    'log_disconnections = 0',
    ...(userInfo().uid === 0 ? [`user = ${unprivilegedUser()}`] : []),
  ];
  writeFileSync(path.join(dir, 'pgbouncer.ini'), `${ini.join('\n')}\n`, { mode: 0o644 });
  writeFileSync(path.join(dir, 'users.txt'), `${quote(user)} ${quote(password)}\n`, { mode: 0o644 });

  const child: ChildProcess = spawn(PGBOUNCER_BIN, [path.join(dir, 'pgbouncer.ini')], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const collect = (chunk: Buffer) => lines.push(...chunk.toString().split('\n').filter(Boolean));
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const cleanup = () => rmSync(dir, { recursive: true, force: true });

  const deadline = Date.now() + 10_000;
  while (!lines.some((l) => l.includes(`listening on 127.0.0.1:${port}`))) {
    if (child.exitCode !== null || child.signalCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      cleanup();
      throw new Error(`pgbouncer did not start:\n${lines.join('\n')}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }

  const withHost = (url: string, host: string, p: string) => {
    const u = new URL(url);
    u.hostname = host;
    u.port = p;
    return u.toString();
  };
  return {
    port,
    lines,
    pooled: (url) => withHost(url, '127.0.0.1', String(port)),
    direct: (url) => {
      const u = new URL(url);
      return u.hostname === '127.0.0.1' && u.port === String(port)
        ? withHost(url, upstream.hostname, upstream.port || '5432')
        : url;
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGINT'); // immediate shutdown
        const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(timer);
      }
      cleanup();
    },
  };
}
