import { Redis } from 'ioredis';
import { generateApiKey, hashApiKey, isWellFormedApiKey } from '@sts/core';
import { createDbClient, type Db } from '@sts/db';
import { createTestDatabase, createTestRedis } from '@sts/testing';
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

  it('sets a plan with a trial', async () => {
    const a = await db.account.create({ data: { email: 'trial@example.com' } });
    const r = await runCli(['plan', 'set', '--account', a.id, '--plan', 'free', '--trial-days', '30', '--json'], env);
    expect(r.code).toBe(0);
    const trialEndsAt = (await db.account.findUniqueOrThrow({ where: { id: a.id } })).trialEndsAt!;
    expect(Math.round((trialEndsAt.getTime() - Date.now()) / 86_400_000)).toBe(30);
    expect((await runCli(['plan', 'set', '--account', a.id, '--plan', 'free', '--trial-days', '0'], env)).code).toBe(2);
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
});
