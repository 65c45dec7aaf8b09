/**
 * The dispatcher's own test support (the general helpers are @sts/testing's): the service as a
 * child process, as it runs in production, so tests can SIGKILL or SIGTERM it.
 */
import { spawnService, type ServiceProcess } from '@sts/testing';

/** Starts src/main.ts with `env`; resolves once it consumes (its "started" line is printed). */
export async function spawnDispatcher(env: Record<string, string>, timeoutMs = 30_000): Promise<ServiceProcess> {
  const p = spawnService('services/webhook-dispatcher/src/main.ts', env);
  try {
    await p.waitForLine(/webhook-dispatcher started/, timeoutMs);
  } catch (err) {
    p.child.kill('SIGKILL');
    throw err;
  }
  return p;
}

/** The ops port the process printed at start. */
export function opsPort(p: ServiceProcess): number {
  const line = p.lines.find((l) => l.includes('webhook-dispatcher started'));
  const port = line === undefined ? undefined : (JSON.parse(line) as { opsPort?: number }).opsPort;
  if (!port) throw new Error('the dispatcher printed no ops port');
  return port;
}
