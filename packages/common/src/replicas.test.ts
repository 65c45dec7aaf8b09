/**
 * `npm start`'s replicas (POLLER_REPLICAS): real child processes. One that exits is started again
 * after the delay while the others keep running; stop() ends them all; a bad count is refused
 * naming the variable, and scripts/start.mjs exits 2 on it before starting anything.
 */
import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { ConfigError } from './env';
import { parseReplicaCount, replicaOpsPort, superviseReplicas } from './replicas';

const root = path.resolve(__dirname, '../../..');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('replicas', () => {
  it('parses the count: default 1, a whole number from 1 to 64, else an error naming the variable', () => {
    expect(parseReplicaCount('POLLER_REPLICAS', undefined)).toBe(1);
    expect(parseReplicaCount('POLLER_REPLICAS', '3')).toBe(3);
    for (const bad of ['0', 'abc', '-1', '1.5', '65', ' 2'])
      expect(() => parseReplicaCount('POLLER_REPLICAS', bad)).toThrow(/POLLER_REPLICAS: must be a whole number/);
    expect(() => parseReplicaCount('POLLER_REPLICAS', '0')).toThrow(ConfigError);
  });

  it('gives replica i the ops port base + 10 i (0: any free port for each)', () => {
    expect([0, 1, 2].map((i) => replicaOpsPort(3003, i))).toEqual([3003, 3013, 3023]);
    expect([0, 1].map((i) => replicaOpsPort(0, i))).toEqual([0, 0]);
  });

  it('starts an exited replica again after the delay while the others keep running', async () => {
    const exits: number[] = [];
    // replica 1 exits at once on its first start; every other start runs until stopped
    const set = superviseReplicas({
      count: 3,
      restartDelayMs: 300,
      spawn: (i) =>
        spawn(process.execPath, [
          '-e',
          i === 1 && exits.length === 0 ? 'process.exit(7)' : 'setInterval(() => {}, 1000)',
        ]),
      onExit: (i, code) => exits.push(i, code ?? -1),
    });
    try {
      const pids = set.children().map((c) => c?.pid);
      expect(pids.every((p) => typeof p === 'number')).toBe(true);
      for (let i = 0; i < 100 && set.starts()[1]! < 2; i++) await sleep(50);
      expect(exits).toEqual([1, 7]);
      expect(set.starts()).toEqual([1, 2, 1]);
      const now = set.children();
      expect(now[0]!.pid).toBe(pids[0]); // the others kept running
      expect(now[2]!.pid).toBe(pids[2]);
      expect(now[1]!.pid).not.toBe(pids[1]);
      expect(now.every((c) => c !== undefined && c.exitCode === null)).toBe(true);
    } finally {
      await set.stop();
    }
    expect(set.children()).toEqual([undefined, undefined, undefined]);
    await sleep(400);
    expect(set.starts()).toEqual([1, 2, 1]); // not started again after stop()
  });

  it.each(['0', 'abc'])('scripts/start.mjs with POLLER_REPLICAS=%s exits 2 naming the variable', (value) => {
    const r = spawnSync(process.execPath, [path.join(root, 'scripts/start.mjs')], {
      cwd: root,
      env: { PATH: process.env.PATH ?? '', POLLER_REPLICAS: value },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/POLLER_REPLICAS/);
    expect(r.stdout).not.toMatch(/applying migrations/);
  });
});
