/**
 * Several copies of one service on this machine, as a Kubernetes Deployment runs its pods:
 * `npm start` runs POLLER_REPLICAS pollers through this (scripts/start.mjs). Replica i gets its
 * own ops port (base + 10·i: 3003, 3013, 3023, …); one that exits is started again after
 * `restartDelayMs` while the others keep running; stop() ends them all.
 */
import type { ChildProcess } from 'node:child_process';
import { ConfigError } from './env';

/** POLLER_REPLICAS-like counts: a whole number from 1 to 64 (unset: `fallback`). */
export function parseReplicaCount(name: string, raw: string | undefined, fallback = 1): number {
  if (raw === undefined || raw === '') return fallback;
  if (!/^[0-9]{1,3}$/.test(raw) || Number(raw) < 1 || Number(raw) > 64)
    throw new ConfigError([`${name}: must be a whole number from 1 to 64 (got ${JSON.stringify(raw.slice(0, 20))})`]);
  return Number(raw);
}

/** Replica i's ops port: base + 10·i, or 0 (any free port) for every replica when base is 0. */
export function replicaOpsPort(base: number, index: number): number {
  return base === 0 ? 0 : base + 10 * index;
}

export interface ReplicaSet {
  /** the live child of each replica (undefined while it waits to be started again) */
  children(): (ChildProcess | undefined)[];
  /** how many times each replica was started */
  starts(): number[];
  /** stops restarting, sends `signal` to every replica and waits for all of them to exit */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

export function superviseReplicas(opts: {
  count: number;
  /** starts replica `index` (its name, port and output are the caller's) */
  spawn: (index: number) => ChildProcess;
  /** how long an exited replica waits before it is started again (default 1 s) */
  restartDelayMs?: number;
  /** a replica exited while the set was running (it will be started again) */
  onExit?: (index: number, code: number | null, signal: NodeJS.Signals | null) => void;
}): ReplicaSet {
  const delay = opts.restartDelayMs ?? 1000;
  const live: (ChildProcess | undefined)[] = Array.from({ length: opts.count }, () => undefined);
  const started = Array.from({ length: opts.count }, () => 0);
  const exited: Promise<void>[] = [];
  const timers = new Set<NodeJS.Timeout>();
  let stopping = false;

  function start(index: number): void {
    const child = opts.spawn(index);
    live[index] = child;
    started[index]!++;
    exited[index] = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        live[index] = undefined;
        resolve();
        if (stopping) return;
        opts.onExit?.(index, code, signal);
        const timer = setTimeout(() => {
          timers.delete(timer);
          if (!stopping) start(index);
        }, delay);
        timers.add(timer);
      });
    });
  }

  for (let i = 0; i < opts.count; i++) start(i);

  return {
    children: () => [...live],
    starts: () => [...started],
    async stop(signal = 'SIGTERM') {
      stopping = true;
      for (const t of timers) clearTimeout(t);
      timers.clear();
      for (const child of live) child?.kill(signal);
      await Promise.all(exited);
    },
  };
}
