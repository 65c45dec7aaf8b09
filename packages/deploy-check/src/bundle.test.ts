/**
 * The production image's JavaScript, run the way the image runs it: scripts/build.mjs bundles
 * every entry into a directory outside the repository (so no node_modules can be found above
 * it), and the bundles run with plain node (no tsx):
 * - each service bundle loads all its code and rejects a bad environment, naming the variable;
 * - the migration bundle runs against a migrated test database (it finds its SQL files);
 * - read-api's bundle serves /healthz with 200 on its ops port (OPS_PORT when its env schema has
 *   it, else READ_API_PORT) and a real database-backed route, and stops with 0 on SIGTERM.
 * It also prints the bytes the image adds to its base (the figures in k8s/README.md).
 */
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createTestDatabase, freePort } from '@sts/testing';
import { readApiEnvSchema } from '../../../services/read-api/src/env';
import { entrypointNodeFlags, REPO_ROOT } from './deploy';

const TOKEN = 'bundle-test-internal-token-0123456789';
const SERVICES = ['gateway', 'read-api', 'poller', 'webhook-dispatcher', 'dashboard'];

let image: string;
let testDb: Awaited<ReturnType<typeof createTestDatabase>>;

beforeAll(async () => {
  // the image's /app: dist/ plus the two scripts the Dockerfile copies
  image = mkdtempSync(path.join(tmpdir(), 'sts-image-'));
  execFileSync(process.execPath, [path.join(REPO_ROOT, 'scripts/build.mjs'), '--outdir', path.join(image, 'dist')], {
    stdio: 'pipe',
  });
  for (const f of ['docker-entrypoint.sh', 'docker-healthcheck.cjs'])
    cpSync(path.join(REPO_ROOT, 'scripts', f), path.join(image, f));
  testDb = await createTestDatabase();
}, 180_000);

afterAll(async () => {
  if (image) rmSync(image, { recursive: true, force: true });
  await testDb?.drop();
});

/** A bundle run with plain node and the image's flags for it, from the image directory and only the given environment. */
function run(entry: string, env: Record<string, string>, args: string[] = []) {
  const child = spawn(
    process.execPath,
    [...entrypointNodeFlags(entry), path.join(image, 'dist/bin', `${entry}.js`), ...args],
    {
      cwd: image,
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, exited, output: () => output };
}

async function waitFor200(url: string, timeoutMs: number): Promise<{ status: number; body: string }> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer';
  while (Date.now() < deadline) {
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
      const body = await res.text();
      if (res.status === 200) return { status: 200, body };
      last = `${res.status} ${body}`;
    } catch (err) {
      last = err instanceof Error ? err.message : String(err);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${url} did not answer 200 within ${timeoutMs} ms (last: ${last})`);
}

describe('production bundles', () => {
  it('are built for every service present, with the migrations beside them', () => {
    const bins = readdirSync(path.join(image, 'dist/bin'));
    for (const s of SERVICES.filter((s) => statSync(path.join(REPO_ROOT, 'services', s), { throwIfNoEntry: false })))
      expect(bins).toContain(`${s}.js`);
    expect(bins).toEqual(expect.arrayContaining(['migrate.js', 'cli.js']));
    expect(readdirSync(path.join(image, 'dist/prisma/migrations')).length).toBeGreaterThan(0);
    // the dashboard's static files, where its bundle looks for them (PUBLIC_DIR = ../public)
    if (existsSync(path.join(REPO_ROOT, 'services/dashboard/public')))
      expect(readdirSync(path.join(image, 'dist/public')).length).toBeGreaterThan(0);
    // what the run stage copies on top of the base image
    const bytes = (dir: string): number =>
      readdirSync(dir, { withFileTypes: true }).reduce(
        (n, e) => n + (e.isDirectory() ? bytes(path.join(dir, e.name)) : statSync(path.join(dir, e.name)).size),
        0,
      );
    console.log(`deploy-check: the image adds ${(bytes(image) / 1e6).toFixed(1)} MB of application files`);
  });

  it.each(SERVICES.filter((s) => statSync(path.join(REPO_ROOT, 'services', s), { throwIfNoEntry: false })))(
    '%s loads and rejects a bad environment, naming the variable',
    async (service) => {
      const p = run(service, { LOG_LEVEL: 'not-a-level', DATABASE_URL: 'not-a-url' });
      // 2 by convention; the webhook-dispatcher exits 1 on a configuration error today
      expect([1, 2]).toContain(await p.exited);
      expect(p.output()).toContain('invalid configuration');
      expect(p.output()).toContain('LOG_LEVEL');
    },
  );

  it('migrate finds its SQL and reports the test database as up to date', async () => {
    const p = run('migrate', { DATABASE_URL: testDb.url }, ['deploy']);
    expect(await p.exited).toBe(0);
    expect(p.output()).toMatch(/0 migration\(s\) applied, [1-9]\d* already applied/);
  });

  it('read-api serves its health endpoint and the database, and stops with 0 on SIGTERM', async () => {
    const hasOps = 'OPS_PORT' in readApiEnvSchema.shape;
    const publicPort = await freePort();
    const opsPort = hasOps ? await freePort() : publicPort;
    const env: Record<string, string> = {
      DATABASE_URL: testDb.url,
      INTERNAL_TOKEN: TOKEN,
      READ_API_PORT: String(publicPort),
      READ_API_HOST: '127.0.0.1',
      LOG_LEVEL: 'error',
    };
    if (hasOps) env.OPS_PORT = String(opsPort);
    const p = run('read-api', env);
    try {
      const health = await waitFor200(`http://127.0.0.1:${opsPort}/healthz`, 60_000);
      expect(health.status).toBe(200);
      const res = await fetch(`http://127.0.0.1:${publicPort}/api/v1/users/nobody_here`, {
        headers: { 'x-internal-token': TOKEN },
      });
      expect(res.status).toBe(404);
      expect(((await res.json()) as { code: string }).code).toBe('USER_NOT_FOUND');
      // the image's HEALTHCHECK script, as compose runs it: healthy now, unhealthy once stopped
      const check = (probe: string) =>
        new Promise<number | null>((resolve) => {
          const c = spawn(process.execPath, [path.join(image, 'docker-healthcheck.cjs'), probe, 'read-api'], {
            env: { PATH: process.env.PATH ?? '', OPS_PORT: String(opsPort) },
            stdio: 'ignore',
          });
          c.on('exit', (code) => resolve(code));
        });
      expect(await check('/healthz')).toBe(0);
      expect(await check('/readyz')).toBe(0);
      p.child.kill('SIGTERM');
      expect(await p.exited).toBe(0);
      expect(await check('/healthz')).toBe(1);
    } finally {
      p.child.kill('SIGKILL');
    }
  });
});
