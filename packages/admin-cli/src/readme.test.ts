/**
 * The root README's command lines, run as a new user runs them: a fresh `git clone` of this
 * repository's committed HEAD (uncommitted changes are not part of it), `npm start` in it (which
 * installs the workspace from pnpm's local store — a few seconds — generates the Prisma client,
 * migrates, seeds and starts every service), then, as in a second terminal, every `curl` and
 * `npm run` line of the README's shell blocks: the curl lines through fetch, the npm lines through
 * `sh -c` exactly as written. The second terminal sets no secrets: the CLI must find the ones
 * `npm start` generated in `.tmp/dev.env`.
 *
 * Isolation: its own empty database (named with the run id so the run's teardown drops it too),
 * vhost, Redis key prefix, free API ports and OPS_PORT=0. Substitutions, the only ones: `$KEY` is
 * the demo key `npm start` prints and `$MANAGE_KEY` the key the README's `key create --scope
 * manage` line printed; `<id>` after `--account` the printed demo account, or the account the
 * README's `account create` line made once it ran; `<id>` after `--monitor` the monitor the
 * README's `monitor create` line made; `localhost:3000` the gateway's port. The `npm pack` line
 * runs too, and the ```js block (the typed client) runs with node against the package the
 * README's `npm run build:client` line built.
 * Not run: `npm start`/`npm test` themselves (the test is inside one), lint/typecheck lines and the
 * benches (minutes of full load; they pick free ports and their own database, vhost and prefix).
 * `npm run cli -- listen` runs until Ctrl-C: it is started in its own process group and left
 * running while the next lines run; it must show the hit of the README's `social tweet`, then
 * SIGINT to its group (Ctrl-C) must end it with exit 0.
 *
 * The dashboard demo login `npm start` prints works at once: signed in with it, the demo account
 * (verified at seed time) makes an API key, and its overview says what it has (no trial offer).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { createTestRedis, createTestVhost, freePort, REPO_ROOT, testServiceUrls, waitFor } from '@sts/testing';

/** The logical lines of the README's ```sh blocks: continuations joined, comments dropped. */
export function readmeCommands(readme: string): string[] {
  const lines: string[] = [];
  for (const block of readme.matchAll(/```sh\n([\s\S]*?)```/g)) {
    const joined = block[1]!.replace(/\\\n\s*/g, '');
    for (const raw of joined.split('\n')) {
      const line = stripComment(raw).trim();
      if (line) lines.push(line);
    }
  }
  return lines;
}

function stripComment(line: string): string {
  let quote = '';
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (quote) {
      if (c === quote) quote = '';
    } else if (c === '"' || c === "'") quote = c;
    else if (c === '#' && (i === 0 || /\s/.test(line[i - 1]!))) return line.slice(0, i);
  }
  return line;
}

/** Shell words of a simple command line (double and single quotes, no escapes or expansions). */
function words(line: string): string[] {
  return [...line.matchAll(/"([^"]*)"|'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2] ?? m[3]!);
}

/** `curl [-X METHOD] [-H "Name: value"]... [-d BODY] URL` as fetch; `$NAME` expanded from `vars`. */
async function curl(line: string, vars: Record<string, string>): Promise<{ status: number; body: string }> {
  const args = words(line)
    .slice(1)
    .map((w) => w.replace(/\$(\w+)/g, (_, name: string) => vars[name] ?? ''));
  const headers: Record<string, string> = {};
  let url = '';
  let method = 'GET';
  let body: string | undefined;
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '-H') {
      const h = args[++i]!;
      headers[h.slice(0, h.indexOf(':')).trim()] = h.slice(h.indexOf(':') + 1).trim();
    } else if (args[i] === '-X') method = args[++i]!;
    else if (args[i] === '-d') body = args[++i]!;
    else if (args[i]!.startsWith('-')) throw new Error(`the test does not know curl's ${args[i]} (in: ${line})`);
    else url = args[i]!;
  }
  const res = await fetch(/^https?:/.test(url) ? url : `http://${url}`, { method, headers, body });
  return { status: res.status, body: await res.text() };
}

/** The README's ```js block (the typed client), importing the package `npm run build:client` made. */
function clientExample(readme: string, dist: string): string {
  const block = /```js\n([\s\S]*?)```/.exec(readme)?.[1];
  if (!block) throw new Error('the README has no ```js block');
  return block.replace("from '@sts/client'", `from '${path.join(dist, 'index.js')}'`);
}

/** A line that runs until Ctrl-C, started in its own process group. */
interface Background {
  child: ChildProcess;
  out: string[];
  exited: Promise<number | null>;
}

function background(line: string, cwd: string, env: NodeJS.ProcessEnv): Background {
  const child = spawn('sh', ['-c', line], { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  const out: string[] = [];
  child.stdout.on('data', (c: Buffer) => out.push(c.toString()));
  child.stderr.on('data', (c: Buffer) => out.push(c.toString()));
  return { child, out, exited: new Promise((resolve) => child.on('exit', (code) => resolve(code))) };
}

/** Signs in to the dashboard at `base` with the printed demo login and makes a key there. */
async function dashboardDemo(
  base: string,
  email: string,
  password: string,
): Promise<{ keys: string; overview: string }> {
  const jar = new Map<string, string>();
  const req = async (path: string, form?: Record<string, string>) => {
    const res = await fetch(base + path, {
      method: form ? 'POST' : 'GET',
      redirect: 'manual',
      headers: {
        cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; '),
        ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
      },
      body: form ? new URLSearchParams(form).toString() : undefined,
    });
    for (const c of res.headers.getSetCookie()) {
      const pair = c.split(';')[0]!;
      jar.set(pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1));
    }
    return { status: res.status, location: res.headers.get('location'), text: await res.text() };
  };
  const csrf = (html: string) => /name="_csrf" value="([^"]+)"/.exec(html)?.[1] ?? '';
  const signin = await req('/signin');
  const signedIn = await req('/signin', { _csrf: csrf(signin.text), email, password });
  expect({ status: signedIn.status, location: signedIn.location }).toEqual({ status: 303, location: '/' });
  const keysPage = await req('/keys');
  const made = await req('/keys', { _csrf: csrf(keysPage.text), name: 'from the readme test' });
  expect({ status: made.status, text: made.text.slice(0, 300) }).toMatchObject({ status: 303 });
  return { keys: (await req('/keys')).text, overview: (await req('/')).text };
}

function sh(line: string, cwd: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn('sh', ['-c', line], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    child.on('exit', (code) => resolve({ code, out }));
  });
}

describe('the README, from a fresh clone next to npm start', () => {
  it('reads the command lines of the shell blocks: continuations joined, comments dropped, quotes kept', () => {
    const readme = [
      'text `npm run not-in-a-block`',
      '```sh',
      'KEY=...   # printed by npm start',
      'curl -H "Authorization: Bearer $KEY" localhost:3000/x   # a comment',
      'npm run cli -- a --k "x # not a comment" \\',
      '  --json  # trailing',
      '```',
      '```json',
      '{"npm run": "ignored"}',
      '```',
    ].join('\n');
    expect(readmeCommands(readme)).toEqual([
      'KEY=...',
      'curl -H "Authorization: Bearer $KEY" localhost:3000/x',
      'npm run cli -- a --k "x # not a comment" --json',
    ]);
  });

  it('every curl and npm run line works as written', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'sts-readme-'));
    const clone = spawnSync('git', ['clone', '--quiet', REPO_ROOT, dir], { encoding: 'utf8' });
    expect(clone.stderr).toBe('');
    const vhost = await createTestVhost();
    const redis = createTestRedis();
    const dbUrl = new URL(testServiceUrls().postgres);
    dbUrl.pathname = `/sts_t_${process.env.STS_TEST_RUN_ID}_readme_${randomBytes(3).toString('hex')}`;
    const [gatewayPort, readApiPort, dashboardPort] = [await freePort(), await freePort(), await freePort()];
    // what a developer's shell holds: connection settings, no secrets, no NODE_ENV
    const shellEnv: NodeJS.ProcessEnv = { ...process.env };
    for (const name of ['NODE_ENV', 'INTERNAL_TOKEN', 'SECRETS_ENCRYPTION_KEY', 'DEMO_API_KEY', 'JEST_WORKER_ID'])
      delete shellEnv[name];
    Object.assign(shellEnv, {
      DATABASE_URL: dbUrl.toString(),
      AMQP_URL: vhost.url,
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: redis.prefix,
      GATEWAY_PORT: String(gatewayPort),
      READ_API_PORT: String(readApiPort),
      DASHBOARD_PORT: String(dashboardPort), // the dashboard's public port, once it exists
      OPS_PORT: '0',
      LOG_LEVEL: 'warn',
    });
    let start: ChildProcess | undefined;
    let listen: Background | undefined;
    const output: string[] = [];
    try {
      start = spawn('npm', ['start'], { cwd: dir, env: shellEnv, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
      start.stdout!.on('data', (c: Buffer) => output.push(c.toString()));
      start.stderr!.on('data', (c: Buffer) => output.push(c.toString()));
      const printed = (re: RegExp) => re.exec(output.join(''))?.[1];
      const key = await waitFor(() => {
        if (start!.exitCode !== null) throw new Error(`npm start exited:\n${output.join('')}`);
        return printed(/demo API key: (\S+)/);
      }, 150_000);
      const account = printed(/demo account: (\S+)/);
      expect(account).toBeDefined();
      expect(existsSync(path.join(dir, '.tmp/dev.env'))).toBe(true);
      const dashboard = await waitFor(() => printed(/dashboard: (http\S+)/), 60_000);
      const login = await waitFor(() => /dashboard demo login: (\S+) \/ (\S+)/.exec(output.join('')), 60_000);
      await waitFor(
        async () => {
          const r = await fetch(`http://127.0.0.1:${gatewayPort}/api/v1/users/demo_news`, {
            headers: { authorization: `Bearer ${key}` },
          }).catch(() => null);
          return r?.status === 200;
        },
        60_000,
        250,
      ).catch((err: unknown) => {
        throw new Error(`the gateway did not answer the demo key: ${String(err)}\n${output.join('').slice(-3000)}`);
      });

      const readme = readFileSync(path.join(dir, 'README.md'), 'utf8').replaceAll(
        'localhost:3000',
        `localhost:${gatewayPort}`,
      );
      const commands = readmeCommands(readme).filter(
        (l) =>
          l.startsWith('curl ') ||
          l.startsWith('npm pack ') ||
          (l.startsWith('npm run ') &&
            !/^npm run (bench|lint|typecheck|format)/.test(l) &&
            !l.startsWith('npm run test')),
      );
      // the printed demo login, as a newcomer uses it: no "verify your email", a key at once
      await waitFor(async () => (await fetch(`${dashboard}/signin`).catch(() => null))?.status === 200, 60_000, 250);
      const demo = await dashboardDemo(dashboard, login[1]!, login[2]!);
      expect(demo.keys).not.toMatch(/Verify your email/);
      expect(demo.keys).toMatch(/API key from the readme test/);
      expect(demo.overview).toMatch(/On Starter since/);
      expect(demo.overview).not.toMatch(/trial is available/);

      const ran: string[] = [];
      let monitorId = '';
      let postedId = '';
      let accountId = account!;
      const vars: Record<string, string> = { KEY: key };
      const posts: { line: string; status: number; body: string }[] = [];
      for (const line of commands) {
        if (line.startsWith('curl ')) {
          const r = await curl(line, vars);
          expect({ line, status: r.status, body: r.body.slice(0, 300) }).toMatchObject({
            status: line.includes('-X POST') ? 201 : 200,
          });
          if (line.includes('-X POST')) posts.push({ line, ...r });
          ran.push('curl');
          continue;
        }
        const written = line
          .replace('--account <id>', `--account ${accountId}`)
          .replace('--monitor <id>', `--monitor ${monitorId}`);
        if (line.startsWith('npm run cli -- listen')) {
          listen = background(written, dir, shellEnv);
          await waitFor(() => {
            if (listen!.child.exitCode !== null) throw new Error(`listen exited:\n${listen!.out.join('')}`);
            return listen!.out.join('').includes('listening for hits') || null;
          }, 60_000);
          ran.push(line);
          continue;
        }
        const r = await sh(written, dir, shellEnv);
        expect({ line, code: r.code, out: r.code === 0 ? '' : r.out }).toMatchObject({ code: 0 });
        if (line.includes('monitor create')) {
          const created = JSON.parse(r.out.trim().split('\n').pop()!) as { id: string; secret?: string };
          expect(created.secret).toMatch(/\S{16,}/); // a webhook was set: its signing secret, printed once
          monitorId = created.id;
        }
        if (line.startsWith('npm run cli -- social tweet')) postedId = /tweet (\d+) by/.exec(r.out)?.[1] ?? '';
        if (line.startsWith('npm run cli -- account create')) accountId = /account (\S+) \(/.exec(r.out)?.[1] ?? '';
        if (line.startsWith('npm run cli -- key create') && line.includes('--scope manage'))
          vars.MANAGE_KEY = /(sts_\S+)/.exec(r.out)?.[1] ?? '';
        ran.push(line);
      }
      // listen showed the README's own post (the demo account watches demo_news), then Ctrl-C ends it
      expect(listen).toBeDefined();
      expect(postedId).not.toBe('');
      await waitFor(
        () =>
          listen!.out
            .join('')
            .split('\n')
            .find((l) => l.includes(`tweet ${postedId},`)) ?? null,
        60_000,
      );
      // Ctrl-C: SIGINT to the group. npm itself then ends by the interrupt, as it does for every
      // script; the CLI under it closes its connection, prints its count and exits 0
      process.kill(-listen!.child.pid!, 'SIGINT');
      await listen!.exited;
      expect(listen!.out.join('')).toMatch(/\d+ hit\(s\) shown\n$/);
      // the README still has the lines this test is about
      expect(ran.filter((r) => r === 'curl').length).toBeGreaterThanOrEqual(3);
      expect(commands.some((l) => /^npm run cli -- monitor create .*--webhook-url /.test(l))).toBe(true);
      expect(commands.some((l) => l.startsWith('npm run cli -- deliveries --monitor <id>'))).toBe(true);
      expect(commands.some((l) => l === 'npm run migrate')).toBe(true);
      expect(monitorId).not.toBe('');

      // the monitor made through the API with the manage key: its secret shown once, and the same
      // POST again (same Idempotency-Key) answers the first answer, not a second monitor
      expect(posts).toHaveLength(1);
      expect(posts[0]!.line).toMatch(/-H "Idempotency-Key: [0-9a-f-]{36}"/);
      type Created = { data: { id: string; webhook_secret: string; target_username: string } };
      const made = (JSON.parse(posts[0]!.body) as Created).data;
      expect(made).toMatchObject({ target_username: 'demo_dev', webhook_secret: expect.stringMatching(/\S{16,}/) });
      const again = await curl(posts[0]!.line, vars);
      expect({ status: again.status, id: (JSON.parse(again.body) as Created).data.id }).toEqual({
        status: 201,
        id: made.id,
      });

      // the client's build and pack lines made the package; the README's client lines run against it
      expect(ran).toEqual(expect.arrayContaining(['npm run build:client', 'npm pack packages/client/dist']));
      expect(existsSync(path.join(dir, 'sts-client-0.1.0.tgz'))).toBe(true);
      const example = path.join(dir, '.tmp/readme-client.mjs');
      writeFileSync(example, clientExample(readme, path.join(dir, 'packages/client/dist')));
      const client = await sh(`node ${example}`, dir, { ...shellEnv, STS_API_KEY: key });
      expect({ code: client.code, out: client.out }).toEqual({
        code: 0,
        out: expect.stringMatching(/^.+: \d+ followers; 3 monitors\n$/),
      });
    } finally {
      if (listen?.child.pid && listen.child.exitCode === null && listen.child.signalCode === null)
        process.kill(-listen.child.pid, 'SIGKILL');
      if (start?.pid && start.exitCode === null) {
        process.kill(-start.pid, 'SIGINT');
        const stopped = await waitFor(() => start!.exitCode !== null || start!.signalCode !== null, 30_000).catch(
          () => false,
        );
        if (!stopped) process.kill(-start.pid, 'SIGKILL');
      }
      await redis.cleanup();
      const admin = new Client({ connectionString: testServiceUrls().postgres });
      await admin.connect();
      await admin.query(`DROP DATABASE IF EXISTS "${dbUrl.pathname.slice(1)}" WITH (FORCE)`).finally(() => admin.end());
      rmSync(dir, { recursive: true, force: true });
    }
  }, 600_000);
});
