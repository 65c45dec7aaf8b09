/**
 * A private Redis Cluster for a test: three `redis-server --cluster-enabled yes` masters on free
 * ports in a temporary directory (no persistence), joined by `redis-cli --cluster create` with no
 * replicas, ready once every node reports `cluster_state:ok`. stop() ends the three processes and
 * removes the directory. Nothing touches the shared Redis.
 */
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export interface RedisClusterHandle {
  /** the masters' ports */
  ports: number[];
  /** one redis:// URL per master */
  urls: string[];
  /** REDIS_URL for REDIS_MODE=cluster: the masters' URLs, comma-separated */
  url: string;
  /** runs a redis-cli command against one node (redirections not followed: a key elsewhere answers MOVED) */
  cli(port: number, ...args: string[]): Promise<string>;
  stop(): Promise<void>;
}

function which(bin: string): string | null {
  try {
    return execFileSync('sh', ['-c', `command -v ${bin}`], { encoding: 'utf8' }).trim() || null;
  } catch {
    return null;
  }
}

/** true when redis-server and redis-cli are installed (the cluster tests skip only when they are not) */
export function redisClusterAvailable(): boolean {
  return which('redis-server') !== null && which('redis-cli') !== null;
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/** a port whose cluster bus port (port + 10000) is free too */
async function freeClusterPort(taken: Set<number>): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const port = 20_000 + Math.floor(Math.random() * 25_000);
    if (taken.has(port) || taken.has(port + 10_000)) continue;
    if ((await portFree(port)) && (await portFree(port + 10_000))) return port;
  }
  throw new Error('no free port pair for a Redis Cluster node');
}

function cli(port: number, args: string[], timeoutMs = 30_000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('redis-cli', ['-p', String(port), ...args], { timeout: timeoutMs }, (err, stdout, stderr) => {
      if (err) reject(new Error(`redis-cli ${args.join(' ')}: ${err.message}\n${stdout}${stderr}`));
      else resolve(stdout);
    });
  });
}

async function until(check: () => Promise<boolean>, what: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`Redis Cluster: ${what} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

/** Starts a three-master Redis Cluster on free local ports; call stop() when done. */
export async function startRedisCluster(opts: { masters?: number } = {}): Promise<RedisClusterHandle> {
  const masters = opts.masters ?? 3;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sts-redis-cluster-'));
  const children: ChildProcess[] = [];
  const output: string[] = [];
  const killAll = () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  };
  // a test worker that exits without stop() leaves no server behind
  process.once('exit', killAll);
  const stop = async () => {
    await Promise.all(children.map(stopProcess));
    process.removeListener('exit', killAll);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const ports: number[] = [];
    const taken = new Set<number>();
    for (let i = 0; i < masters; i++) {
      const port = await freeClusterPort(taken);
      taken.add(port);
      taken.add(port + 10_000);
      ports.push(port);
    }
    for (const port of ports) {
      // each node's nodes.conf goes in its own file in the temporary directory
      const child = spawn(
        'redis-server',
        [
          '--port', String(port),
          '--bind', '127.0.0.1',
          '--cluster-enabled', 'yes',
          '--cluster-config-file', `nodes-${port}.conf`,
          '--cluster-node-timeout', '5000',
          '--dir', dir,
          '--save', '',
          '--appendonly', 'no',
          '--protected-mode', 'no',
          '--daemonize', 'no',
          '--loglevel', 'warning',
        ], // prettier-ignore
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      child.stdout?.on('data', (b: Buffer) => output.push(b.toString()));
      child.stderr?.on('data', (b: Buffer) => output.push(b.toString()));
      children.push(child);
    }
    for (const port of ports) await until(async () => (await cli(port, ['ping'])).trim() === 'PONG', 'node up', 15_000);
    await cli(
      ports[0]!,
      ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes'],
      60_000,
    );
    for (const port of ports)
      await until(
        async () => (await cli(port, ['cluster', 'info'])).includes('cluster_state:ok'),
        'cluster_state:ok',
        30_000,
      );
    const urls = ports.map((p) => `redis://127.0.0.1:${p}`);
    return {
      ports,
      urls,
      url: urls.join(','),
      cli: (port, ...args) => cli(port, args),
      stop,
    };
  } catch (err) {
    await stop();
    throw new Error(
      `${err instanceof Error ? err.message : String(err)}\nredis-server output:\n${output.join('').slice(-2000)}`,
    );
  }
}
