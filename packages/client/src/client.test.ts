/**
 * The typed client against the running system (gateway and read-api processes on PostgreSQL,
 * Redis and RabbitMQ): its types are the served document's, its calls and typed errors work, and
 * the packed package installs in an empty project, type-checks there, and runs its README's example.
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sign } from '@sts/signing';
import { createSocialTweet, createSocialUser } from '@sts/social';
import { REPO_ROOT, startApiStack, type ApiStack } from '@sts/testing';
import { ApiError, createClient, isApiError, paginate, verifyWebhook, WebhookVerificationError } from './index';

let stack: ApiStack;

beforeAll(async () => {
  // example.com stands for the README's public endpoint (no DNS here)
  stack = await startApiStack({ readApiEnv: { WEBHOOK_ALLOW_PRIVATE_HOSTS: 'hooks.test,example.com' } });
  await createSocialUser(stack.db, { username: 'nasa', name: 'NASA', followersCount: 42, verified: true });
  for (let i = 0; i < 130; i++)
    await createSocialTweet(stack.db, {
      authorUsername: 'nasa',
      text: `launch update ${i}`,
      createdAt: new Date(Date.now() - (200 - i) * 1000),
    });
}, 90_000);

afterAll(async () => {
  await stack?.stop();
});

describe('@sts/client', () => {
  it('its types are generated from the document the gateway serves (regenerating changes nothing)', () => {
    // openapi-typescript is an ES module: it runs in its own process, as `npm run generate` runs it
    const out = execFileSync(
      process.execPath,
      [
        '--import',
        'tsx',
        'packages/client/scripts/generate.ts',
        '--from',
        `${stack.url}/api/v1/openapi.json`,
        '--check',
      ],
      { cwd: REPO_ROOT, encoding: 'utf8' },
    );
    expect(out).toContain('src/schema.ts matches the document');
  });

  it('reads, pages, manages and answers errors typed by the API’s code', async () => {
    const { key: manageKey } = await stack.account('starter', 'manage');
    const sts = createClient({ apiKey: manageKey, baseUrl: stack.url });
    expect(await sts.users.get('nasa')).toMatchObject({ username: 'nasa', name: 'NASA', followers_count: 42 });
    const all: string[] = [];
    for await (const t of paginate((cursor) => sts.users.tweets('nasa', { limit: 50, ...(cursor ? { cursor } : {}) })))
      all.push(t.text);
    expect(all).toHaveLength(130);
    expect(new Set(all).size).toBe(130);
    expect((await sts.search('update', { limit: 3 })).data).toHaveLength(3);

    const idem = randomUUID();
    const m = await sts.monitors.create({ target_username: 'nasa', keywords: ['launch'] }, { idempotencyKey: idem });
    expect(
      await sts.monitors.create({ target_username: 'nasa', keywords: ['launch'] }, { idempotencyKey: idem }),
    ).toEqual(m);
    const reused = await sts.monitors
      .create({ target_username: 'nasa', keywords: ['other'] }, { idempotencyKey: idem })
      .catch((e: unknown) => e);
    expect(isApiError(reused, 'IDEMPOTENCY_KEY_REUSED')).toBe(true);
    expect((await sts.monitors.pause(m.id)).status).toBe('paused');
    expect((await sts.monitors.update(m.id, { keywords: ['launch', 'orbit'] })).keywords).toEqual(['launch', 'orbit']);
    const hook = await sts.webhooks.set(m.id, 'https://hooks.test/in');
    expect(hook.webhook_secret).toMatch(/.{20,}/);
    const rotated = await sts.webhooks.rotate(m.id, { now: true });
    expect([rotated.webhook_secret === hook.webhook_secret, rotated.previous_secret_until]).toEqual([false, null]);
    expect((await sts.monitors.list()).data.map((x) => x.id)).toEqual([m.id]);
    expect((await sts.monitors.deliveries(m.id)).data).toEqual([]);
    // recover by window and outcome: nothing logged yet, nothing queued; until before since is named
    const since = new Date(Date.now() - 3600_000);
    expect(await sts.monitors.recover(m.id, { since, until: new Date(), outcomes: ['skipped'] })).toEqual({
      queued: 0,
      remaining: 0,
      delivery_ids: [],
      retry_after: null,
    });
    const backwards = await sts.monitors.recover(m.id, { since: new Date(), until: since }).catch((e: unknown) => e);
    expect(backwards).toMatchObject({ status: 400, code: 'INVALID_REQUEST', param: 'until' });
    expect(await sts.webhooks.enable(m.id)).toMatchObject({ monitor_id: m.id, health: 'ok', held_events: 0 });
    await sts.monitors.delete(m.id);

    const missing = await sts.monitors.get(randomUUID()).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(ApiError);
    expect(missing).toMatchObject({ status: 404, code: 'NOT_FOUND', requestId: expect.any(String) });
    const invalid = await sts.monitors
      .create({ target_username: 'nasa', keywords: ['x'.repeat(300)] })
      .catch((e: unknown) => e);
    expect(invalid).toMatchObject({ status: 400, code: 'INVALID_REQUEST', param: 'keywords.0' });

    const { key: readKey } = await stack.account('starter', 'read');
    const reader = createClient({ apiKey: readKey, baseUrl: stack.url });
    const refused = await reader.monitors.create({ target_username: 'nasa' }).catch((e: unknown) => e);
    expect(refused).toMatchObject({ status: 403, code: 'INSUFFICIENT_SCOPE' });
    const unknown = await createClient({ apiKey: 'sts_live_nope', baseUrl: stack.url })
      .users.get('nasa')
      .catch((e: unknown) => e);
    expect(unknown).toMatchObject({ status: 401, code: 'UNAUTHORIZED' });
  });

  it('monitors.events(id, { after }) pages a monitor’s events by sequence; a bad after is a typed INVALID_REQUEST', async () => {
    const { key } = await stack.account('starter', 'manage');
    const sts = createClient({ apiKey: key, baseUrl: stack.url });
    const m = await sts.monitors.create({ target_username: 'nasa' });
    for (let sequence = 1; sequence <= 5; sequence++)
      await stack.db.hit.create({
        data: {
          monitorId: m.id,
          tweetId: String(7_000_000 + sequence),
          tweetText: `update ${sequence}`,
          tweetAuthorId: '1',
          tweetAuthorUsername: 'nasa',
          tweetCreatedAt: new Date(Date.now() - 60_000),
          sequence: BigInt(sequence),
        },
      });
    // a receiver that saw 5 after 2 fills the gap
    const gap = await sts.monitors.events(m.id, { after: 2, limit: 2 });
    expect(gap.data.map((e) => [e.event, e.sequence])).toEqual([
      ['monitor.hit', 3],
      ['monitor.hit', 4],
    ]);
    const rest = await sts.monitors.events(m.id, { cursor: gap.meta.next_cursor! });
    expect(rest.data.map((e) => e.sequence)).toEqual([5]);
    expect(rest.meta.next_cursor).toBeNull();
    const all: number[] = [];
    for await (const e of paginate((cursor) => sts.monitors.events(m.id, { limit: 2, ...(cursor ? { cursor } : {}) })))
      all.push(e.sequence);
    expect(all).toEqual([1, 2, 3, 4, 5]);
    const bad = await sts.monitors.events(m.id, { after: -1 }).catch((e: unknown) => e);
    expect(isApiError(bad) && [bad.status, bad.code, bad.param]).toEqual([400, 'INVALID_REQUEST', 'after']);
  });

  it('re-exports the signing package’s verification', () => {
    const secret = 'whsec-test-secret';
    const body = '{"event":"monitor.test"}';
    const timestamp = Math.floor(Date.now() / 1000);
    const headers = { 'x-service-timestamp': String(timestamp), 'x-service-signature': sign(secret, timestamp, body) };
    expect(() => verifyWebhook({ secret, body, headers })).not.toThrow();
    expect(() => verifyWebhook({ secret: 'another', body, headers })).toThrow(WebhookVerificationError);
  });

  it('packs into a package a stranger installs: ESM with types, no workspace dependency, and the README example runs', async () => {
    const { key } = await stack.account('starter', 'manage');
    const work = mkdtempSync(path.join(os.tmpdir(), 'sts-client-'));
    try {
      const run = (cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env) => {
        try {
          return execFileSync(cmd, args, {
            cwd,
            env,
            encoding: 'utf8',
            stdio: ['ignore', 'pipe', 'pipe'],
            timeout: 240_000,
          });
        } catch (err) {
          const e = err as { stdout?: string; stderr?: string };
          throw new Error(`${cmd} ${args.join(' ')} failed:\n${e.stdout ?? ''}${e.stderr ?? ''}`);
        }
      };
      run(process.execPath, ['--import', 'tsx', 'packages/client/scripts/build.ts'], REPO_ROOT);
      run('npm', ['pack', path.join(REPO_ROOT, 'packages/client/dist'), '--pack-destination', work], work);
      const tarball = readdirSync(work).find((f) => f.endsWith('.tgz'))!;
      expect(tarball).toBe('sts-client-0.1.0.tgz');
      const listing = run('tar', ['-tzf', tarball], work).split('\n').filter(Boolean).sort();
      expect(listing).toEqual(
        [
          'package/README.md',
          'package/index.d.ts',
          'package/index.js',
          'package/package.json',
          'package/schema.d.ts',
          'package/errors.d.ts',
          'package/stream.d.ts',
          'package/signing/errors.d.ts',
          'package/signing/index.d.ts',
          'package/signing/middleware.d.ts',
          'package/signing/signature.d.ts',
        ].sort(),
      );

      const project = path.join(work, 'app');
      run('mkdir', ['-p', project], work);
      writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
      run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', path.join(work, tarball)], project);
      const installed = JSON.parse(
        readFileSync(path.join(project, 'node_modules/@sts/client/package.json'), 'utf8'),
      ) as Record<string, unknown>;
      expect(installed).toMatchObject({ type: 'module', dependencies: { 'openapi-fetch': expect.any(String) } });
      expect(Object.keys(installed.dependencies as object).sort()).toEqual(['eventsource-parser', 'openapi-fetch']);
      const bundle = readFileSync(path.join(project, 'node_modules/@sts/client/index.js'), 'utf8');
      expect(bundle).not.toMatch(/@sts\//);

      // the README's example, as written, against the running system
      const readme = readFileSync(path.join(REPO_ROOT, 'packages/client/README.md'), 'utf8');
      const example = /## Example[\s\S]*?```js\n([\s\S]*?)```/.exec(readme)![1]!;
      writeFileSync(path.join(project, 'example.mjs'), example);
      const out = run(process.execPath, ['example.mjs'], project, {
        PATH: process.env.PATH,
        STS_API_KEY: key,
        STS_BASE_URL: stack.url,
      });
      expect(out).toContain('NASA has 42 followers');
      expect(out).toContain('latest: launch update 129');
      expect(out).toContain('130 posts');
      expect(out).toMatch(/monitor [0-9a-f-]{36} watches @nasa; secret .{6}…/);
      expect(out).toContain('not found: monitor not found (request ');
      expect(out).toContain('stream ended');
      expect(await stack.db.monitor.count({ where: { targetUsername: 'nasa', isActive: false } })).toBeGreaterThan(0);

      // and its types check in a strict TypeScript project (a wrong code or field does not compile)
      writeFileSync(
        path.join(project, 'consumer.ts'),
        [
          "import { createClient, isApiError, type ApiErrorCode, type Monitor } from '@sts/client';",
          "const sts = createClient({ apiKey: 'k' });",
          "export const m: Promise<Monitor> = sts.monitors.get('x');",
          "export const code: ApiErrorCode = 'INSUFFICIENT_SCOPE';",
          "export const check = (e: unknown) => isApiError(e, 'PLAN_LIMIT') && e.retryAfter;",
          "export async function texts(): Promise<string[]> { const out: string[] = []; for await (const ev of sts.stream({ monitors: ['m'] })) out.push(ev.data.tweet.text); return out; }",
          '// @ts-expect-error -- not a field of the hit payload',
          'export const nope = async () => { for await (const ev of sts.stream()) return ev.data.colour; };',
          '// @ts-expect-error -- not a code of the API',
          "export const bad: ApiErrorCode = 'NOPE';",
          '// @ts-expect-error -- not a field of NewMonitor',
          "void sts.monitors.create({ target_username: 'a', colour: 'red' });",
        ].join('\n'),
      );
      run(
        process.execPath,
        [
          path.join(REPO_ROOT, 'node_modules/typescript/bin/tsc'),
          '--noEmit',
          '--strict',
          '--module',
          'nodenext',
          '--moduleResolution',
          'nodenext',
          '--target',
          'es2022',
          '--types',
          'node',
          '--typeRoots',
          path.join(REPO_ROOT, 'node_modules/@types'),
          'consumer.ts',
        ],
        project,
      );
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }, 300_000);
});
