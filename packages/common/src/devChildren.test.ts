/**
 * `npm start`'s record of its children (devChildren.ts) with real processes: a child left running
 * by a start that was killed outright is stopped by the next start, and only while it is still
 * that child — a process of another checkout under the same recorded pid and arguments, one with
 * other arguments, and a pid that is gone are left alone.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { childRecordFile, isRecordedChild, stopLeftoverChildren, writeChildRecord } from './devChildren';

const dirs: string[] = [];
const procs: ChildProcess[] = [];

afterEach(() => {
  for (const p of procs.splice(0)) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** a checkout-like directory with a service that runs until stopped (it ignores SIGTERM when `stubborn`) */
function checkout(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'dev-children-'));
  dirs.push(dir);
  writeFileSync(
    path.join(dir, 'svc.js'),
    "if (process.argv[2] === 'stubborn') process.on('SIGTERM', () => {});\nsetInterval(() => {}, 1000);\nprocess.stdout.write('ready\\n');\n",
  );
  return dir;
}

/** runs `svc.js ...args` in `cwd` as start.mjs runs a service; resolves once it runs (its handlers set) */
async function service(cwd: string, ...args: string[]): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['svc.js', ...args], { cwd, stdio: ['ignore', 'pipe', 'inherit'] });
  procs.push(child);
  await new Promise((resolve, reject) => child.stdout.once('data', resolve).once('error', reject));
  return child;
}

const exited = (c: ChildProcess) =>
  c.exitCode !== null || c.signalCode !== null
    ? Promise.resolve()
    : new Promise<void>((resolve) => c.once('exit', () => resolve()));

const onLinux = process.platform === 'linux' ? describe : describe.skip;

onLinux('npm start: children left running by a killed start', () => {
  it('stops a recorded child that is still this checkout’s, saying so, and removes the record', async () => {
    const root = checkout();
    const child = await service(root);
    const stubborn = await service(root, 'stubborn');
    writeChildRecord(root, [
      { pid: child.pid!, args: ['svc.js'] },
      { pid: stubborn.pid!, args: ['svc.js', 'stubborn'] },
    ]);
    expect(isRecordedChild(root, { pid: child.pid!, args: ['svc.js'] })).toBe(true);

    const lines: string[] = [];
    const stopped = await stopLeftoverChildren(root, { log: (l) => lines.push(l), graceMs: 500 });
    await Promise.all([exited(child), exited(stubborn)]);
    expect(child.signalCode).toBe('SIGTERM');
    expect(stubborn.signalCode).toBe('SIGKILL'); // it ignored SIGTERM past the grace
    expect(stopped.map((c) => c.pid)).toEqual([child.pid, stubborn.pid]);
    expect(lines.join('\n')).toContain(`stopping svc.js (pid ${child.pid})`);
    expect(lines.join('\n')).toContain(`pid ${stubborn.pid} did not stop in time`);
    expect(existsSync(childRecordFile(root))).toBe(false);
  });

  it('leaves alone another checkout’s process, a pid running something else, and a pid that is gone', async () => {
    const root = checkout();
    const other = await service(checkout()); // the same file name, another directory
    const different = await service(root, 'other-args');
    const gone = await service(root);
    gone.kill('SIGKILL');
    await exited(gone);
    writeChildRecord(root, [
      { pid: other.pid!, args: ['svc.js'] },
      { pid: different.pid!, args: ['svc.js', 'stubborn'] },
      { pid: gone.pid!, args: ['svc.js'] },
      { pid: process.pid, args: ['svc.js'] },
    ]);

    const lines: string[] = [];
    expect(await stopLeftoverChildren(root, { log: (l) => lines.push(l), graceMs: 500 })).toEqual([]);
    expect(lines).toEqual([]);
    expect(other.exitCode === null && other.signalCode === null).toBe(true);
    expect(different.exitCode === null && different.signalCode === null).toBe(true);
    expect(existsSync(childRecordFile(root))).toBe(false);
  });

  it('reads a missing or damaged record as no children', async () => {
    const root = checkout();
    expect(await stopLeftoverChildren(root, { log: () => {} })).toEqual([]);
    writeChildRecord(root, [{ pid: 1234, args: ['svc.js'] }]);
    writeFileSync(childRecordFile(root), '[{"pid": 12');
    expect(await stopLeftoverChildren(root, { log: () => {} })).toEqual([]);
  });
});
