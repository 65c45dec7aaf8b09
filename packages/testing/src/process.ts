/**
 * Runs a service's composition root the way `npm start` and Kubernetes do, as a child process
 * (`node --import tsx <file>`), collecting its output lines; and finds free ports for processes
 * that must be told theirs.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { directTestDatabaseUrl } from './isolation';

export const REPO_ROOT = path.resolve(__dirname, '../../..');

export interface ServiceProcess {
  child: ChildProcess;
  /** everything the process printed (stdout and stderr), one entry per line */
  lines: string[];
  /** resolves (once its output is all read) with the exit code, or the name of the signal that ended it */
  exited: Promise<number | NodeJS.Signals>;
  /**
   * Resolves with the first output line matching `re`; rejects (with the output) when the
   * process exits first or after `timeoutMs`.
   */
  waitForLine(re: RegExp, timeoutMs?: number): Promise<string>;
}

/**
 * Starts `file` (relative to the repository root) with `env` and nothing else of this process's
 * environment but PATH and NODE_EXTRA_CA_CERTS (so it trusts the test CA as the test does).
 * OPS_PORT is 0 (a free port, printed as opsPort) unless `env` names one. A DATABASE_URL through
 * the run's PgBouncer (STS_VIA_PGBOUNCER=1) comes with DATABASE_DIRECT_URL, the same database
 * direct, unless `env` names one.
 */
export function spawnService(file: string, env: Record<string, string>): ServiceProcess {
  const inherited: Record<string, string> = { PATH: process.env.PATH ?? '' };
  if (process.env.NODE_EXTRA_CA_CERTS) inherited.NODE_EXTRA_CA_CERTS = process.env.NODE_EXTRA_CA_CERTS;
  const direct =
    env.DATABASE_URL && env.DATABASE_DIRECT_URL === undefined ? directTestDatabaseUrl(env.DATABASE_URL) : undefined;
  if (direct !== undefined && direct !== env.DATABASE_URL) inherited.DATABASE_DIRECT_URL = direct;
  const child = spawn(process.execPath, ['--import', 'tsx', file], {
    cwd: REPO_ROOT,
    env: { ...inherited, OPS_PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  let buffered = '';
  const collect = (chunk: Buffer) => {
    buffered += chunk.toString();
    const parts = buffered.split('\n');
    buffered = parts.pop() ?? '';
    lines.push(...parts.filter(Boolean));
  };
  child.stdout.on('data', collect);
  child.stderr.on('data', collect);
  const exited = new Promise<number | NodeJS.Signals>((resolve) =>
    child.on('close', (code, signal) => resolve(code ?? signal ?? 'SIGKILL')),
  );
  return {
    child,
    lines,
    exited,
    async waitForLine(re, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const line = lines.find((l) => re.test(l));
        if (line) return line;
        if (child.exitCode !== null || child.signalCode !== null)
          throw new Error(`the process exited before printing ${String(re)}:\n${lines.join('\n')}`);
        if (Date.now() > deadline) throw new Error(`no line matching ${String(re)} in:\n${lines.join('\n')}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
  };
}

/** A TCP port free on 127.0.0.1 right now (for a process that must be told its port). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
