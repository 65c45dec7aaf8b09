/**
 * The admin CLI with REDIS_MODE=cluster on a real Redis Cluster (three masters started by this
 * test): `key revoke` evicts the key's cached lookup from the cluster; a bad Redis setting is
 * named before anything changes. Skips only when redis-server / redis-cli are not installed.
 */
import { createRedis, type RedisClient } from '@sts/common';
import { generateApiKey } from '@sts/core';
import { createDbClient, type Db } from '@sts/db';
import { createTestDatabase, redisClusterAvailable, startRedisCluster, type RedisClusterHandle } from '@sts/testing';
import { runCli } from '../main';

(redisClusterAvailable() ? describe : describe.skip)('admin CLI on a Redis Cluster', () => {
  let cluster: RedisClusterHandle;
  let dbHandle: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;
  let redis: RedisClient;
  let env: NodeJS.ProcessEnv;

  beforeAll(async () => {
    [cluster, dbHandle] = await Promise.all([startRedisCluster(), createTestDatabase()]);
    db = createDbClient({ url: dbHandle.url });
    env = { DATABASE_URL: dbHandle.url, REDIS_MODE: 'cluster', REDIS_URL: cluster.url, REDIS_KEY_PREFIX: 'sts:' };
    redis = createRedis(env);
  }, 120_000);

  afterAll(async () => {
    redis?.disconnect();
    await db?.$disconnect();
    await dbHandle?.drop();
    await cluster?.stop();
  });

  async function cachedKey() {
    const a = await db.account.create({ data: { email: `${Math.random().toString(36).slice(2)}@example.com` } });
    const k = generateApiKey();
    await db.apiKey.create({ data: { accountId: a.id, keyHash: k.hash, prefix: k.prefix } });
    await redis.set(`apikey:${k.hash}`, JSON.stringify({ accountId: a.id }));
    return k;
  }

  it('revokes a key and evicts its cached lookup from the cluster', async () => {
    const k = await cachedKey();
    const r = await runCli(['key', 'revoke', '--prefix', k.prefix, '--json'], env);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ prefix: k.prefix, cache_evicted: true });
    expect(await redis.get(`apikey:${k.hash}`)).toBeNull();
  });

  it('names a bad Redis setting and changes nothing', async () => {
    const k = await cachedKey();
    const r = await runCli(['key', 'revoke', '--prefix', k.prefix], { ...env, REDIS_URL: `${cluster.urls[0]}/2` });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('REDIS_URL: a Redis Cluster has only database 0');
    expect((await db.apiKey.findUniqueOrThrow({ where: { prefix: k.prefix } })).revokedAt).toBeNull();
    expect(await redis.get(`apikey:${k.hash}`)).not.toBeNull();
  });
});
