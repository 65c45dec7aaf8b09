/**
 * The CLI obeys the shared use-cases' rules (plan monitor limits, interval floors) and exposes
 * the new commands: monitor list/pause/resume/delete, webhook remove, hits, key list, paging with
 * --cursor, and seed's DEMO_PASSWORD.
 */
import { randomBytes } from 'node:crypto';
import { createDbClient, type Db } from '@sts/db';
import { createUseCases, planConfigFromEnv } from '@sts/usecases';
import { createTestDatabase } from '@sts/testing';
import { runCli } from '../main';

describe('CLI over @sts/usecases', () => {
  let handle: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;
  let env: NodeJS.ProcessEnv;

  const json = async (...argv: string[]) => {
    const r = await runCli([...argv, '--json'], env);
    if (r.code !== 0) throw new Error(`exit ${r.code}: ${r.stderr}`);
    return JSON.parse(r.stdout) as Record<string, unknown>;
  };

  beforeAll(async () => {
    handle = await createTestDatabase();
    db = createDbClient({ url: handle.url, poolSize: 2 });
    env = {
      DATABASE_URL: handle.url,
      SECRETS_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
      REDIS_URL: 'redis://127.0.0.1:1',
    };
  });
  afterAll(async () => {
    await db.$disconnect();
    await handle.drop();
  });

  it('monitor create obeys the plan monitor limit, naming it and the upgrade path; nothing saved', async () => {
    const { id } = await json('account', 'create', '--email', 'limit@example.com');
    await json('monitor', 'create', '--account', id as string, '--target', 'one');
    const r = await runCli(['monitor', 'create', '--account', id as string, '--target', 'two'], env);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/the Free plan allows 1 monitor; .*upgrade to Starter \(3 monitors\)/);
    expect(await db.monitor.count({ where: { accountId: id as string } })).toBe(1);
    // the limit is configuration
    const roomy = await runCli(['monitor', 'create', '--account', id as string, '--target', 'two'], {
      ...env,
      PLAN_FREE_MONITORS: '2',
    });
    expect(roomy.code).toBe(0);
    const bad = await runCli(['monitor', 'create', '--account', id as string, '--target', 'x'], {
      ...env,
      PLAN_FREE_MONITORS: 'lots',
    });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/PLAN_FREE_MONITORS/);
  });

  it("monitor create obeys the plan's interval floor", async () => {
    const { id } = await json('account', 'create', '--email', 'interval@example.com');
    const r = await runCli(['monitor', 'create', '--account', id as string, '--target', 'x', '--interval', '120'], env);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--interval must be at least 300 seconds on the Free plan \(Starter checks every 60 s\)/);
    expect(await db.monitor.count({ where: { accountId: id as string } })).toBe(0);
  });

  it('lists, pauses, resumes and deletes monitors; removes a webhook', async () => {
    const { id } = await json('account', 'create', '--email', 'manage@example.com', '--plan', 'starter');
    const m = await json(
      'monitor',
      'create',
      '--account',
      id as string,
      '--target',
      'NASA',
      '--keywords',
      'launch',
      '--webhook-url',
      'https://discord.com/api/webhooks/1/secret-token',
    );
    const list = (await json('monitor', 'list', '--account', id as string)) as { data: Record<string, unknown>[] };
    expect(list.data).toHaveLength(1);
    expect(list.data[0]).toMatchObject({
      id: m.id,
      target_username: 'NASA',
      keywords: ['launch'],
      status: 'active',
      hit_count: 0,
      webhook: { kind: 'discord', is_broken: false },
    });
    expect(JSON.stringify(list)).not.toContain('secret-token');
    expect(JSON.stringify(list)).not.toContain(m.secret as string);
    expect(await json('monitor', 'pause', '--monitor', m.id as string)).toMatchObject({ status: 'paused' });
    expect((await runCli(['monitor', 'list', '--account', id as string], env)).stdout).toContain('paused');
    expect(await json('monitor', 'resume', '--monitor', m.id as string)).toMatchObject({ status: 'active' });
    await json('webhook', 'remove', '--monitor', m.id as string);
    expect(await db.webhookEndpoint.count({ where: { monitorId: m.id as string } })).toBe(0);
    await json('monitor', 'delete', '--monitor', m.id as string);
    expect(await db.monitor.count({ where: { id: m.id as string } })).toBe(0);
    const gone = await runCli(['monitor', 'pause', '--monitor', m.id as string], env);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toMatch(/no monitor with id/);
  });

  it('pages hits and deliveries with --cursor', async () => {
    const { id } = await json('account', 'create', '--email', 'pages@example.com', '--plan', 'starter');
    const m = await json('monitor', 'create', '--account', id as string, '--target', 'NASA');
    for (let i = 0; i < 5; i++) {
      await db.hit.create({
        data: {
          monitorId: m.id as string,
          tweetId: String(100 + i),
          tweetText: `post ${i}`,
          tweetAuthorId: '1',
          tweetAuthorUsername: 'NASA',
          tweetCreatedAt: new Date(),
          detectedAt: new Date(Date.now() - (10 - i) * 1000),
        },
      });
    }
    const p1 = (await json('hits', '--monitor', m.id as string, '--limit', '3')) as {
      data: { tweet_id: string; post_url: string }[];
      next_cursor: string;
    };
    expect(p1.data.map((h) => h.tweet_id)).toEqual(['104', '103', '102']);
    expect(p1.data[0]!.post_url).toBe('https://x.com/NASA/status/104');
    const p2 = (await json('hits', '--monitor', m.id as string, '--limit', '3', '--cursor', p1.next_cursor)) as {
      data: { tweet_id: string }[];
      next_cursor: string | null;
    };
    expect(p2.data.map((h) => h.tweet_id)).toEqual(['101', '100']);
    expect(p2.next_cursor).toBeNull();
    const text = await runCli(['hits', '--monitor', m.id as string, '--limit', '3'], env);
    expect(text.stdout).toContain(`--cursor ${p1.next_cursor}`);
    const bad = await runCli(['deliveries', '--monitor', m.id as string, '--cursor', 'zzz'], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--cursor is not a cursor this list handed out/);

    // --detail: the request as sent and the response's first bytes, as stored by the dispatcher
    const answer = Buffer.from([0x7b, 0xff, 0x00, 0x7d]);
    await db.deliveryAttempt.create({
      data: {
        monitorId: m.id as string,
        event: 'monitor.test',
        deliveryId: 'd-detail',
        url: 'https://hooks.example.com/in',
        outcome: 'failed',
        statusCode: 500,
        requestHeaders: [['X-Service-Event', 'monitor.test']],
        requestBody: '{"event":"monitor.test"}',
        responseHeaders: [['x-trace', 'a b']],
        responseBody: answer,
      },
    });
    const detailed = (await json('deliveries', '--monitor', m.id as string, '--detail')) as {
      data: { delivery_id: string; request: unknown; response: Record<string, unknown> }[];
    };
    expect(detailed.data[0]).toMatchObject({
      delivery_id: 'd-detail',
      request: {
        url: 'https://hooks.example.com/in',
        headers: [['X-Service-Event', 'monitor.test']],
        body: '{"event":"monitor.test"}',
      },
      response: { status: 500, headers: [['x-trace', 'a b']], body_base64: answer.toString('base64'), body_text: null },
    });
    const plain = (await json('deliveries', '--monitor', m.id as string)) as { data: Record<string, unknown>[] };
    expect(plain.data[0]).not.toHaveProperty('request');
  });

  it('key list shows prefixes, names and revocations, never the key', async () => {
    const { id } = await json('account', 'create', '--email', 'keys@example.com');
    const k = await json('key', 'create', '--account', id as string, '--name', 'ci');
    await json('key', 'revoke', '--prefix', k.prefix as string);
    const list = (await json('key', 'list', '--account', id as string)) as { data: Record<string, unknown>[] };
    expect(list.data).toHaveLength(1);
    expect(list.data[0]).toMatchObject({ prefix: k.prefix, name: 'ci', last_used_at: null });
    expect(list.data[0]!.revoked_at).toEqual(expect.any(String));
    expect(JSON.stringify(list)).not.toContain(k.key as string);
  });

  it('seed sets the demo login password from DEMO_PASSWORD; a weak one is refused before anything is written', async () => {
    const weak = await runCli(['seed'], { ...env, DEMO_PASSWORD: 'short' });
    expect(weak.code).toBe(2);
    expect(weak.stderr).toMatch(/DEMO_PASSWORD must be at least 10 characters/);
    expect(await db.account.count({ where: { email: 'demo@example.com' } })).toBe(0);
    const r = await runCli(['seed'], { ...env, DEMO_PASSWORD: 'demo password 123' });
    expect(r.code).toBe(0);
    const uc = createUseCases({ db, ...planConfigFromEnv({}) });
    const a = await uc.accounts.authenticate({ email: 'demo@example.com', password: 'demo password 123' });
    expect(a.effectivePlan).toBe('starter');
  });
});
