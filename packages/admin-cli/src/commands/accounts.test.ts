import { Redis } from 'ioredis';
import { generateApiKey, hashApiKey, isWellFormedApiKey } from '@sts/core';
import { createDbClient, type Db } from '@sts/db';
import { createTestDatabase, createTestRedis } from '@sts/testing';
import { createUseCases, planConfigFromEnv } from '@sts/usecases';
import { runCli } from '../main';

describe('account, key, plan and seed commands', () => {
  let dbHandle: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;
  let redisHandle: ReturnType<typeof createTestRedis>;
  let env: NodeJS.ProcessEnv;

  beforeAll(async () => {
    dbHandle = await createTestDatabase();
    db = createDbClient({ url: dbHandle.url });
    redisHandle = createTestRedis();
    env = { DATABASE_URL: dbHandle.url, REDIS_URL: redisHandle.url, REDIS_KEY_PREFIX: redisHandle.prefix };
  });
  afterAll(async () => {
    await redisHandle.cleanup();
    await db.$disconnect();
    await dbHandle.drop();
  });

  it('prints usage for --help (exit 0) and for an unknown command (exit 2)', async () => {
    const help = await runCli(['--help'], env);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('account create');
    expect(help.stdout).toContain('redeliver');
    const unknown = await runCli(['acount', 'create'], env);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('unknown command "acount create"');
  });

  it('creates an account, refuses a duplicate or bad email, and creates a key shown once', async () => {
    const created = await runCli(
      ['account', 'create', '--email', 'Ops@Example.com', '--plan', 'starter', '--json'],
      env,
    );
    expect(created.code).toBe(0);
    const { id } = JSON.parse(created.stdout) as { id: string };
    expect((await db.account.findUniqueOrThrow({ where: { id } })).plan).toBe('starter');
    const dup = await runCli(['account', 'create', '--email', 'ops@example.com'], env);
    expect(dup.code).toBe(2);
    expect(dup.stderr).toContain('already exists');
    expect((await runCli(['account', 'create', '--email', 'not-an-email'], env)).code).toBe(2);
    expect((await runCli(['account', 'create', '--email', 'x@example.com', '--plan', 'gold'], env)).stderr).toContain(
      '--plan must be free or starter',
    );

    const key = await runCli(['key', 'create', '--account', id, '--json'], env);
    expect(key.code).toBe(0);
    const k = JSON.parse(key.stdout) as { key: string; prefix: string };
    expect(isWellFormedApiKey(k.key)).toBe(true);
    const row = await db.apiKey.findUniqueOrThrow({ where: { prefix: k.prefix } });
    expect(row.keyHash).toBe(hashApiKey(k.key));
    expect(JSON.stringify(row)).not.toContain(k.key);
    // scopes: read by default; --scope manage stores manage; anything else is a usage error, nothing made
    expect(row.scope).toBe('read');
    const manage = await runCli(['key', 'create', '--account', id, '--scope', 'manage', '--json'], env);
    expect(manage.code).toBe(0);
    const m = JSON.parse(manage.stdout) as { prefix: string; scope: string };
    expect(m.scope).toBe('manage');
    expect((await db.apiKey.findUniqueOrThrow({ where: { prefix: m.prefix } })).scope).toBe('manage');
    const bad = await runCli(['key', 'create', '--account', id, '--scope', 'admin'], env);
    expect([bad.code, bad.stderr]).toEqual([2, expect.stringContaining('--scope must be read or manage')]);
    expect(await db.apiKey.count({ where: { accountId: id } })).toBe(2);
    const listed = await runCli(['key', 'list', '--account', id, '--json'], env);
    expect((JSON.parse(listed.stdout) as { data: { scope: string }[] }).data.map((x) => x.scope).sort()).toEqual([
      'manage',
      'read',
    ]);
    expect((await runCli(['key', 'create', '--account', '00000000-0000-4000-8000-000000000000'], env)).code).toBe(2);
    expect((await runCli(['key', 'create', '--account', 'nope'], env)).stderr).toContain('must be an account id');
  });

  it('revokes a key and evicts its cached lookup from Redis', async () => {
    const a = await db.account.create({ data: { email: 'revoke@example.com' } });
    const k = generateApiKey();
    await db.apiKey.create({ data: { accountId: a.id, keyHash: k.hash, prefix: k.prefix } });
    const redis = new Redis(redisHandle.url, { keyPrefix: redisHandle.prefix });
    await redis.set(`apikey:${k.hash}`, JSON.stringify({ accountId: a.id }));
    const r = await runCli(['key', 'revoke', '--prefix', k.prefix, '--json'], env);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ prefix: k.prefix, cache_evicted: true });
    expect(await redis.get(`apikey:${k.hash}`)).toBeNull();
    redis.disconnect();
    expect((await db.apiKey.findUniqueOrThrow({ where: { prefix: k.prefix } })).revokedAt).toBeInstanceOf(Date);
    expect((await runCli(['key', 'revoke', '--prefix', 'sts_live_nothere'], env)).code).toBe(2);
  });

  it("revokes a key even when Redis is unreachable (the gateways' cache TTLs bound it)", async () => {
    const a = await db.account.create({ data: { email: 'revoke-offline@example.com' } });
    const k = generateApiKey();
    await db.apiKey.create({ data: { accountId: a.id, keyHash: k.hash, prefix: k.prefix } });
    const r = await runCli(['key', 'revoke', '--prefix', k.prefix, '--json'], {
      ...env,
      REDIS_URL: 'redis://127.0.0.1:1',
    });
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ prefix: k.prefix, cache_evicted: false });
    expect((await db.apiKey.findUniqueOrThrow({ where: { prefix: k.prefix } })).revokedAt).toBeInstanceOf(Date);
    const text = await runCli(['key', 'revoke', '--prefix', k.prefix], { ...env, REDIS_URL: 'redis://127.0.0.1:1' });
    expect(text.stdout).toContain('within 5 s');
  });

  it('sets a plan, starts a Starter trial and ends it', async () => {
    const a = await db.account.create({ data: { email: 'trial@example.com' } });
    const r = await runCli(['plan', 'set', '--account', a.id, '--plan', 'free', '--trial-days', '30', '--json'], env);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ id: a.id, plan: 'free', effective_plan: 'starter' });
    const trialEndsAt = (await db.account.findUniqueOrThrow({ where: { id: a.id } })).trialEndsAt!;
    expect(Math.round((trialEndsAt.getTime() - Date.now()) / 86_400_000)).toBe(30);

    const ended = await runCli(
      ['plan', 'set', '--account', a.id, '--plan', 'free', '--trial-days', '0', '--json'],
      env,
    );
    expect(JSON.parse(ended.stdout)).toMatchObject({ plan: 'free', trial_ends_at: null, effective_plan: 'free' });
    const upgraded = await runCli(['plan', 'set', '--account', a.id, '--plan', 'starter'], env);
    expect(upgraded.stdout).toContain('plan starter');
    expect((await db.account.findUniqueOrThrow({ where: { id: a.id } })).plan).toBe('starter');

    for (const bad of [
      ['--plan', 'free', '--trial-days', '-1'],
      ['--plan', 'free', '--trial-days', '1.5'],
      ['--plan', 'free', '--trial-days', '366'],
      ['--plan', 'gold'],
      [],
    ]) {
      expect([bad, (await runCli(['plan', 'set', '--account', a.id, ...bad], env)).code]).toEqual([bad, 2]);
    }
    const missing = await runCli(
      ['plan', 'set', '--account', '00000000-0000-4000-8000-000000000000', '--plan', 'free'],
      env,
    );
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('no account');
  });

  it('seeds the demo data idempotently, pinning DEMO_API_KEY', async () => {
    const pinned = generateApiKey().key;
    const first = await runCli(['seed', '--json'], { ...env, DEMO_API_KEY: pinned });
    expect(first.code).toBe(0);
    const out = JSON.parse(first.stdout) as { account_id: string; key: string; usernames: string[] };
    expect(out.key).toBe(pinned);
    expect(out.usernames).toContain('demo_news');
    const counts = async () => ({
      users: await db.socialUser.count(),
      tweets: await db.socialTweet.count(),
      monitors: await db.monitor.count({ where: { accountId: out.account_id } }),
      keys: await db.apiKey.count({ where: { accountId: out.account_id } }),
    });
    const before = await counts();
    expect(before.monitors).toBe(2);
    expect(before.tweets).toBeGreaterThanOrEqual(15);
    expect((await runCli(['seed', '--json'], { ...env, DEMO_API_KEY: pinned })).code).toBe(0);
    expect(await counts()).toEqual(before);
    expect((await runCli(['seed'], { ...env, DEMO_API_KEY: 'nonsense' })).code).toBe(2);
  });

  it('seeds the demo account verified (no mail reaches demo@example.com): it makes a key at once', async () => {
    const out = JSON.parse((await runCli(['seed', '--json'], env)).stdout) as { account_id: string };
    const verifiedAt = async () =>
      (await db.account.findUniqueOrThrow({ where: { id: out.account_id } })).emailVerifiedAt;
    expect(await verifiedAt()).toBeInstanceOf(Date);
    // a demo account seeded unverified by an earlier version is verified by the next seed
    await db.account.update({ where: { id: out.account_id }, data: { emailVerifiedAt: null } });
    expect((await runCli(['seed'], env)).code).toBe(0);
    expect(await verifiedAt()).toBeInstanceOf(Date);
    const key = await createUseCases({ db, ...planConfigFromEnv({}), requireVerifiedEmail: true }).keys.create(
      out.account_id,
      { name: 'mine' },
    );
    expect(isWellFormedApiKey(key.key)).toBe(true);
  });

  it('seed without DEMO_API_KEY shows a new key once, then never makes another', async () => {
    const fresh = await createTestDatabase();
    const freshDb = createDbClient({ url: fresh.url });
    try {
      const freshEnv = { ...env, DATABASE_URL: fresh.url };
      const first = await runCli(['seed', '--json'], freshEnv);
      expect(first.code).toBe(0);
      const out = JSON.parse(first.stdout) as { account_id: string; key: string; usernames: string[] };
      expect(isWellFormedApiKey(out.key)).toBe(true);
      const row = await freshDb.apiKey.findUniqueOrThrow({ where: { keyHash: hashApiKey(out.key) } });
      expect(row).toMatchObject({ accountId: out.account_id, revokedAt: null });
      const account = await freshDb.account.findUniqueOrThrow({ where: { id: out.account_id } });
      expect(account).toMatchObject({ email: 'demo@example.com', plan: 'starter' });
      // demo users: lower-case username keys, numeric ids, a few tweets each; monitors without webhooks
      const users = await freshDb.socialUser.findMany({ include: { _count: { select: { tweets: true } } } });
      expect(users).toHaveLength(out.usernames.length);
      for (const u of users) {
        expect(u.usernameKey).toBe(u.username.toLowerCase());
        expect(String(u.id)).toMatch(/^[1-9][0-9]*$/);
        expect(u._count.tweets).toBeGreaterThanOrEqual(3);
      }
      const monitors = await freshDb.monitor.findMany({
        where: { accountId: out.account_id },
        include: { webhook: true },
      });
      expect(monitors).toHaveLength(2);
      for (const m of monitors) {
        expect(m.webhook).toBeNull();
        expect(out.usernames).toContain(m.targetUsername);
      }

      const second = await runCli(['seed'], freshEnv);
      expect(second.code).toBe(0);
      expect(second.stdout).toContain('not shown again');
      expect(await freshDb.apiKey.count()).toBe(1);
    } finally {
      await freshDb.$disconnect();
      await fresh.drop();
    }
  });
});
