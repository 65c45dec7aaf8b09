import { generateApiKey } from '@sts/core';
import { createDbClient } from '@sts/db';
import { createSocialUser } from '@sts/social';
import { createTestDatabase, createTestRedis, rawRequest, spawnService, waitFor } from '@sts/testing';

const get = (port: number, path: string, headers: Record<string, string> = {}) =>
  rawRequest(port, 'GET', path, { headers }).then((r) => ({ status: r.status, body: r.text }));

const TOKEN = 'internal-token-for-tests-0123456789';

describe('gateway main', () => {
  it('runs gateway and read-api as processes, serves a keyed call, ops only on OPS_PORT, exits 0 on SIGTERM', async () => {
    const dbHandle = await createTestDatabase();
    const redisHandle = createTestRedis();
    const db = createDbClient({ url: dbHandle.url, poolSize: 2 });
    const account = await db.account.create({ data: { email: 'main@example.com', plan: 'free' } });
    const key = generateApiKey();
    await db.apiKey.create({ data: { accountId: account.id, keyHash: key.hash, prefix: key.prefix } });
    await createSocialUser(db, { username: 'mainuser', name: 'Main' });
    const common = { DATABASE_URL: dbHandle.url, INTERNAL_TOKEN: TOKEN, LOG_LEVEL: 'error' };
    const readApi = spawnService('services/read-api/src/main.ts', { ...common, READ_API_PORT: '0' });
    const readApiPort = (JSON.parse(await readApi.waitForLine(/read-api listening/)) as { port: number }).port;
    const gateway = spawnService('services/gateway/src/main.ts', {
      ...common,
      GATEWAY_PORT: '0',
      READ_API_URL: `http://127.0.0.1:${readApiPort}`,
      REDIS_URL: redisHandle.url,
      REDIS_KEY_PREFIX: redisHandle.prefix,
      PLAN_FREE_MONTHLY_QUOTA: '5',
    });
    try {
      const started = JSON.parse(await gateway.waitForLine(/gateway listening/)) as { port: number; opsPort: number };
      const { port, opsPort } = started;
      expect(opsPort).not.toBe(port);
      await waitFor(async () => (await get(opsPort, '/readyz')).status === 200, 10_000);
      // readiness names its dependencies with ok/failed only; the gateway's is no shared backend
      expect(JSON.parse((await get(opsPort, '/readyz')).body)).toEqual({ status: 'ok', checks: { migrations: 'ok' } });
      expect((await get(opsPort, '/healthz')).status).toBe(200);
      expect((await get(opsPort, '/metrics')).body).toContain('gateway_requests_total');
      for (const path of ['/healthz', '/readyz', '/metrics']) expect((await get(port, path)).status).toBe(404);
      const r = await get(port, '/api/v1/users/mainuser', { authorization: `Bearer ${key.key}` });
      expect(r.status).toBe(200);
      expect(JSON.parse(r.body)).toMatchObject({ data: { username: 'mainuser' } });
      gateway.child.kill('SIGTERM');
      expect(await gateway.exited).toBe(0);
      // the usage of the call was written through on the way out
      expect((await db.usageMonthly.findFirstOrThrow({ where: { accountId: account.id } })).used).toBe(1);
    } finally {
      gateway.child.kill('SIGKILL');
      readApi.child.kill('SIGTERM');
      await readApi.exited;
      await db.$disconnect();
      await redisHandle.cleanup();
      await dbHandle.drop();
    }
  });

  it('stays ready with read-api unreachable, answering clients with its JSON 503', async () => {
    const dbHandle = await createTestDatabase();
    const redisHandle = createTestRedis();
    const db = createDbClient({ url: dbHandle.url, poolSize: 2 });
    const account = await db.account.create({ data: { email: 'alone@example.com', plan: 'free' } });
    const key = generateApiKey();
    await db.apiKey.create({ data: { accountId: account.id, keyHash: key.hash, prefix: key.prefix } });
    const gateway = spawnService('services/gateway/src/main.ts', {
      DATABASE_URL: dbHandle.url,
      INTERNAL_TOKEN: TOKEN,
      LOG_LEVEL: 'error',
      GATEWAY_PORT: '0',
      READ_API_URL: 'http://127.0.0.1:1',
      REDIS_URL: redisHandle.url,
      REDIS_KEY_PREFIX: redisHandle.prefix,
    });
    try {
      const { port, opsPort } = JSON.parse(await gateway.waitForLine(/gateway listening/)) as {
        port: number;
        opsPort: number;
      };
      await waitFor(async () => (await get(opsPort, '/readyz')).status === 200, 10_000);
      const r = await get(port, '/api/v1/users/anyone', { authorization: `Bearer ${key.key}` });
      expect(r.status).toBe(503);
      expect(JSON.parse(r.body)).toMatchObject({ code: 'SERVICE_UNAVAILABLE' });
      expect((await get(opsPort, '/readyz')).status).toBe(200);
      gateway.child.kill('SIGTERM');
      expect(await gateway.exited).toBe(0);
    } finally {
      gateway.child.kill('SIGKILL');
      await db.$disconnect();
      await redisHandle.cleanup();
      await dbHandle.drop();
    }
  });

  it('refuses to start without INTERNAL_TOKEN, naming it, with exit code 2', async () => {
    const proc = spawnService('services/gateway/src/main.ts', { PLAN_FREE_PER_MINUTE: '-3' });
    expect(await proc.exited).toBe(2);
    expect(proc.lines.join('\n')).toMatch(/INTERNAL_TOKEN is required/);
    expect(proc.lines.join('\n')).toContain('PLAN_FREE_PER_MINUTE');
  });
});
