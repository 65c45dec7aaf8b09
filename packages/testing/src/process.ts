/**
 * Runs a service's composition root the way `npm start` and Kubernetes do, as a child process
 * (`node --import tsx <file>`), collecting its output lines.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';

export const REPO_ROOT = path.resolve(__dirname, '../../..');

export interface ServiceProcess {
  child: ChildProcess;
  lines: string[];
  exited: Promise<number | null>;
  /** resolves with the first output line matching `re` */
  waitForLine(re: RegExp, timeoutMs?: number): Promise<string>;
}

export function spawnService(file: string, env: Record<string, string>): ServiceProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', file], {
    cwd: REPO_ROOT,
    // OPS_PORT 0: a free ops port unless the test names one (services print it as opsPort)
    env: { PATH: process.env.PATH ?? '', OPS_PORT: '0', ...env },
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
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return {
    child,
    lines,
    exited,
    async waitForLine(re, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const line = lines.find((l) => re.test(l));
        if (line) return line;
        if (Date.now() > deadline) throw new Error(`no line matching ${String(re)} in:\n${lines.join('\n')}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
  };
}
