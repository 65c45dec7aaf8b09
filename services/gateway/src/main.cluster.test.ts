/**
 * Two gateway processes with REDIS_MODE=cluster on a real Redis Cluster (three masters started by
 * this test): concurrent keyed calls of several accounts through both gateways are admitted up to
 * exactly each account's monthly quota, the rest answered 429, and the usage is written through
 * on SIGTERM. A standalone REDIS_URL listing several nodes is a configuration error (exit 2).
 * Skips only when redis-server / redis-cli are not installed.
 */
import http from 'node:http';
import { generateApiKey } from '@sts/core';
import { createDbClient } from '@sts/db';
import { createSocialUser } from '@sts/social';
import {
  createTestDatabase,
  redisClusterAvailable,
  spawnService,
  startRedisCluster,
  waitFor,
  type ServiceProcess,
} from '@sts/testing';

const TOKEN = 'internal-token-for-tests-0123456789';
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

function get(port: number, path: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path, headers, agent }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      })
      .on('error', reject);
  });
}

(redisClusterAvailable() ? describe : describe.skip)('gateway main on a Redis Cluster', () => {
  afterAll(() => agent.destroy());

  it('two gateway processes admit exactly each quota of several accounts, the rest 429', async () => {
    const [cluster, dbHandle] = await Promise.all([startRedisCluster(), createTestDatabase()]);
    const db = createDbClient({ url: dbHandle.url, poolSize: 2 });
    const processes: ServiceProcess[] = [];
    try {
      await createSocialUser(db, { username: 'clusteruser', name: 'Cluster' });
      const accounts = await Promise.all(
        Array.from({ length: 4 }, async (_, i) => {
          const account = await db.account.create({ data: { email: `c${i}@example.com`, plan: 'free' } });
          const key = generateApiKey();
          await db.apiKey.create({ data: { accountId: account.id, keyHash: key.hash, prefix: key.prefix } });
          return { id: account.id, key: key.key };
        }),
      );
      const common = { DATABASE_URL: dbHandle.url, INTERNAL_TOKEN: TOKEN, LOG_LEVEL: 'error' };
      const readApi = spawnService('services/read-api/src/main.ts', { ...common, READ_API_PORT: '0' });
      processes.push(readApi);
      const readApiPort = (JSON.parse(await readApi.waitForLine(/read-api listening/)) as { port: number }).port;
      const gateways = [0, 1].map(() =>
        spawnService('services/gateway/src/main.ts', {
          ...common,
          GATEWAY_PORT: '0',
          READ_API_URL: `http://127.0.0.1:${readApiPort}`,
          REDIS_MODE: 'cluster',
          // one seed node is enough: the client discovers the other masters
          REDIS_URL: cluster.urls[1]!,
          PLAN_FREE_MONTHLY_QUOTA: '15',
          PLAN_FREE_PER_MINUTE: '1000',
        }),
      );
      processes.push(...gateways);
      const ports: number[] = [];
      for (const g of gateways) {
        const { port, opsPort } = JSON.parse(await g.waitForLine(/gateway listening/)) as {
          port: number;
          opsPort: number;
        };
        await waitFor(async () => (await get(opsPort, '/readyz')) === 200, 10_000);
        ports.push(port);
      }
      const CALLS = 45;
      const statuses = await Promise.all(
        accounts.flatMap((a) =>
          Array.from({ length: CALLS }, (_, i) =>
            get(ports[i % 2]!, '/api/v1/users/clusteruser', { authorization: `Bearer ${a.key}` }).then((s) => ({
              id: a.id,
              s,
            })),
          ),
        ),
      );
      for (const a of accounts) {
        const mine = statuses.filter((r) => r.id === a.id).map((r) => r.s);
        expect(mine.filter((s) => s === 200)).toHaveLength(15);
        expect(mine.filter((s) => s === 429)).toHaveLength(CALLS - 15);
      }
      for (const g of gateways) g.child.kill('SIGTERM');
      expect(await Promise.all(gateways.map((g) => g.exited))).toEqual([0, 0]);
      // the successful calls were written through on the way out: exactly the quota per account
      for (const a of accounts)
        expect((await db.usageMonthly.findFirstOrThrow({ where: { accountId: a.id } })).used).toBe(15);
    } finally {
      for (const p of processes) p.child.kill('SIGKILL');
      await Promise.all(processes.map((p) => p.exited));
      await db.$disconnect();
      await dbHandle.drop();
      await cluster.stop();
    }
  }, 120_000);

  it('a standalone REDIS_URL with several nodes, or a cluster URL with a database, exits 2 naming REDIS_URL', async () => {
    const base = { INTERNAL_TOKEN: TOKEN, LOG_LEVEL: 'error' };
    const several = spawnService('services/gateway/src/main.ts', {
      ...base,
      REDIS_URL: 'redis://:pw-not-shown@127.0.0.1:7000,redis://127.0.0.1:7001',
    });
    const database = spawnService('services/gateway/src/main.ts', {
      ...base,
      REDIS_MODE: 'cluster',
      REDIS_URL: 'redis://127.0.0.1:7000/3',
    });
    expect(await Promise.all([several.exited, database.exited])).toEqual([2, 2]);
    expect(several.lines.join('\n')).toMatch(/REDIS_URL: lists several addresses/);
    expect(several.lines.join('\n')).not.toContain('pw-not-shown');
    expect(database.lines.join('\n')).toMatch(/REDIS_URL: a Redis Cluster has only database 0/);
  });
});
