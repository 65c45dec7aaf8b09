/**
 * Test support: the dispatcher as a child process (`node --import tsx src/main.ts`), as it runs
 * in production, so tests can SIGKILL or SIGTERM it. Not used by the service itself.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';

const root = path.resolve(__dirname, '../../..');

export interface DispatcherProcess {
  child: ChildProcess;
  /** everything the process printed (JSON log lines) */
  output: string[];
  /** resolves with the exit code (or the signal name) */
  exited: Promise<number | string>;
}

/** Starts src/main.ts with `env` (added to this process's environment); resolves once it consumes. */
export async function spawnDispatcher(env: Record<string, string>, timeoutMs = 30_000): Promise<DispatcherProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'services/webhook-dispatcher/src/main.ts'], {
    cwd: root,
    env: { ...process.env, OPS_PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  let partial = '';
  const onData = (chunk: Buffer) => {
    partial += chunk.toString('utf8');
    const lines = partial.split('\n');
    partial = lines.pop() ?? '';
    output.push(...lines.filter(Boolean));
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const exited = new Promise<number | string>((resolve) =>
    child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')),
  );
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (output.some((l) => l.includes('webhook-dispatcher started'))) break;
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`dispatcher exited before it started:\n${output.join('\n')}`);
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`dispatcher did not start within ${timeoutMs} ms:\n${output.join('\n')}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return { child, output, exited };
}

/** The ops port the process logged at start. */
export function opsPort(p: DispatcherProcess): number {
  for (const line of p.output) {
    if (!line.includes('webhook-dispatcher started')) continue;
    const parsed = JSON.parse(line) as { opsPort?: number };
    if (parsed.opsPort) return parsed.opsPort;
  }
  throw new Error('the dispatcher logged no port');
}
