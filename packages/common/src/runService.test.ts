/**
 * runService as services run: child processes (`node --import tsx runService.fixture.ts`) sent
 * real signals. Exit codes: 0 stopped, 1 start or stop failed, 2 configuration, 3 stop deadline.
 */
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT, spawnService, waitFor, type ServiceProcess } from '@sts/testing';
import { EXIT_CODES } from './runService';

const FIXTURE = path.relative(path.resolve(__dirname, '../../..'), path.join(__dirname, 'runService.fixture.ts'));

function run(fixture: string, env: Record<string, string> = {}): ServiceProcess {
  return spawnService(FIXTURE, { NEEDED: 'yes', FIXTURE: fixture, STOP_DEADLINE_MS: '1500', ...env });
}

async function opsGet(port: number, p: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`http://127.0.0.1:${port}${p}`);
  return { status: res.status, body: await res.text() };
}

const started = async (proc: ServiceProcess) =>
  JSON.parse(await proc.waitForLine(/"fixture started"/)) as { port: number; opsPort: number };

describe('runService', () => {
  const procs: ServiceProcess[] = [];
  const track = (p: ServiceProcess) => (procs.push(p), p);
  afterEach(() => {
    for (const p of procs.splice(0)) p.child.kill('SIGKILL');
  });

  it('a configuration error names the variable, no stack, exit 2', async () => {
    const proc = track(spawnService(FIXTURE, { FIXTURE: 'ok', OPS_PORT: 'x' }));
    expect(await proc.exited).toBe(EXIT_CODES.config);
    const out = proc.lines.join('\n');
    expect(out).toContain('NEEDED is required but not set');
    expect(out).toMatch(/OPS_PORT: /);
    expect(out).not.toMatch(/\n\s+at /);
  });

  it('serves ops while starting and when started, stops gracefully on SIGTERM, exit 0', async () => {
    const proc = track(run('ok'));
    const line = await started(proc);
    expect(line.port).toBe(1234);
    expect(await opsGet(line.opsPort, '/healthz')).toEqual({ status: 200, body: '{"status":"ok"}' });
    expect(await opsGet(line.opsPort, '/readyz')).toEqual({
      status: 200,
      body: '{"status":"ok","checks":{"backend":"ok"}}',
    });
    expect((await opsGet(line.opsPort, '/metrics')).body).toContain('service="fixture"');
    proc.child.kill('SIGTERM');
    expect(await proc.exited).toBe(EXIT_CODES.stopped);
    const out = proc.lines.join('\n');
    expect(out).toContain('fixture work finished');
    expect(out.indexOf('"fixture stopping"')).toBeLessThan(out.indexOf('"fixture stopped"'));
  });

  it('readiness fails per dependency with no error text (the text goes to the log)', async () => {
    const proc = track(run('ok', { FIXTURE_CHECK: 'failed', LOG_LEVEL: 'warn' }));
    const { opsPort } = await started(proc);
    expect(await opsGet(opsPort, '/readyz')).toEqual({
      status: 503,
      body: '{"status":"unavailable","checks":{"backend":"failed"}}',
    });
    await waitFor(() => proc.lines.some((l) => l.includes('readiness check failed') && l.includes('refused')));
    proc.child.kill('SIGINT');
    expect(await proc.exited).toBe(EXIT_CODES.stopped);
  });

  it('SIGTERM while start still waits on a backend: not ready meanwhile, then exit 0 at once', async () => {
    const proc = track(run('hang-start', { STOP_DEADLINE_MS: '60000' }));
    const { opsPort } = JSON.parse(await proc.waitForLine(/"fixture starting"/)) as { opsPort: number };
    await proc.waitForLine(/fixture building/);
    expect(await opsGet(opsPort, '/healthz')).toEqual({ status: 200, body: '{"status":"ok"}' });
    expect(await opsGet(opsPort, '/readyz')).toEqual({ status: 503, body: '{"status":"starting","checks":{}}' });
    proc.child.kill('SIGTERM');
    expect(await proc.exited).toBe(EXIT_CODES.stopped);
    expect(proc.lines.some((l) => l.includes('"fixture stopped"'))).toBe(true);
    expect(proc.lines.some((l) => l.includes('fixture started'))).toBe(false);
  });

  // PID 1 (a container without an init) ignores every signal it has no handler for: the handlers
  // installed before start are what let SIGTERM through. Needs a PID namespace (root, unshare).
  const canUnshare = spawnSync('unshare', ['--pid', '--fork', 'true']).status === 0;
  (canUnshare ? it : it.skip)('as PID 1, SIGTERM during a start waiting on a backend still stops it', async () => {
    const child = spawn('unshare', ['--pid', '--fork', '--mount-proc', process.execPath, '--import', 'tsx', FIXTURE], {
      cwd: REPO_ROOT,
      env: { PATH: process.env.PATH ?? '', NEEDED: 'yes', FIXTURE: 'hang-start', OPS_PORT: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      await waitFor(() => out.includes('fixture building'), 30_000);
      // the node process: unshare's child, PID 1 inside its namespace
      const [pid] = readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, 'utf8').trim().split(' ');
      expect(readFileSync(`/proc/${pid}/status`, 'utf8')).toMatch(/^NSpid:\s+\d+\s+1$/m);
      process.kill(Number(pid), 'SIGTERM');
      expect(await exited).toBe(EXIT_CODES.stopped);
      expect(out).toContain('"fixture stopped"');
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('a start that ignores the stop is cut at STOP_DEADLINE_MS, exit 3', async () => {
    const proc = track(run('hang-start-ignoring'));
    await proc.waitForLine(/fixture building/);
    proc.child.kill('SIGTERM');
    expect(await proc.exited).toBe(EXIT_CODES.stopDeadline);
    expect(proc.lines.join('\n')).toContain('did not stop within 1500 ms');
  });

  it('a stop that does not finish within STOP_DEADLINE_MS exits 3', async () => {
    const proc = track(run('slow-stop'));
    await started(proc);
    proc.child.kill('SIGTERM');
    expect(await proc.exited).toBe(EXIT_CODES.stopDeadline);
  });

  it('a start failure prints the reason and exits 1; so does a failed stop', async () => {
    const failing = track(run('fail-start'));
    expect(await failing.exited).toBe(EXIT_CODES.failed);
    expect(failing.lines.join('\n')).toContain('fixture failed to start: backend refused the connection');
    const stopFails = track(run('fail-stop'));
    await started(stopFails);
    stopFails.child.kill('SIGTERM');
    expect(await stopFails.exited).toBe(EXIT_CODES.failed);
  });

  it('an ops port already taken is a start failure, exit 1', async () => {
    const first = track(run('ok'));
    const { opsPort } = await started(first);
    const second = track(run('ok', { OPS_PORT: String(opsPort) }));
    expect(await second.exited).toBe(EXIT_CODES.failed);
    expect(second.lines.join('\n')).toMatch(/fixture failed to start: .*EADDRINUSE/);
  });
});
