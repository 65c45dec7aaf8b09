import { createDbClient } from '@sts/db';
import { createSocialUser } from '@sts/social';
import {
  createAccountWithKey,
  createTestDatabase,
  createTestRedis,
  rawRequest,
  spawnService,
  waitFor,
} from '@sts/testing';
import { gatewayEnv, listening, spawnReadApi } from '../test/processes';

const get = (port: number, path: string, headers: Record<string, string> = {}) =>
  rawRequest(port, 'GET', path, { headers }).then((r) => ({ status: r.status, body: r.text }));

describe('gateway main', () => {
  it('runs gateway and read-api as processes, serves a keyed call, ops only on OPS_PORT, exits 0 on SIGTERM', async () => {
    const dbHandle = await createTestDatabase();
    const redisHandle = createTestRedis();
    const db = createDbClient({ url: dbHandle.url, poolSize: 2 });
    const account = await createAccountWithKey(db, 'free');
    await createSocialUser(db, { username: 'mainuser', name: 'Main' });
    const { proc: readApi, url: readApiUrl } = await spawnReadApi(dbHandle.url);
    const gateway = spawnService('services/gateway/src/main.ts', {
      ...gatewayEnv({ dbUrl: dbHandle.url, redis: redisHandle, readApiUrl }),
      PLAN_FREE_MONTHLY_QUOTA: '5',
    });
    try {
      const { port, opsPort } = await listening(gateway, /gateway listening/);
      expect(opsPort).not.toBe(port);
      await waitFor(async () => (await get(opsPort, '/readyz')).status === 200, 10_000);
      // readiness names its dependencies with ok/failed only; the gateway's is no shared backend
      expect(JSON.parse((await get(opsPort, '/readyz')).body)).toEqual({ status: 'ok', checks: { migrations: 'ok' } });
      expect((await get(opsPort, '/healthz')).status).toBe(200);
      expect((await get(opsPort, '/metrics')).body).toContain('gateway_requests_total');
      for (const path of ['/healthz', '/readyz', '/metrics']) expect((await get(port, path)).status).toBe(404);
      const r = await get(port, '/api/v1/users/mainuser', { authorization: `Bearer ${account.key}` });
      expect(r.status).toBe(200);
      expect(JSON.parse(r.body)).toMatchObject({ data: { username: 'mainuser' } });
      gateway.child.kill('SIGTERM');
      expect(await gateway.exited).toBe(0);
      // the usage of the call was written through on the way out
      expect((await db.usageMonthly.findFirstOrThrow({ where: { accountId: account.accountId } })).used).toBe(1);
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
    const { key } = await createAccountWithKey(db, 'free');
    const gateway = spawnService(
      'services/gateway/src/main.ts',
      gatewayEnv({ dbUrl: dbHandle.url, redis: redisHandle }),
    );
    try {
      const { port, opsPort } = await listening(gateway, /gateway listening/);
      await waitFor(async () => (await get(opsPort, '/readyz')).status === 200, 10_000);
      const r = await get(port, '/api/v1/users/anyone', { authorization: `Bearer ${key}` });
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
