/**
 * Leased quota against a real Redis Cluster (three masters started by this test) through the
 * REDIS_MODE=cluster client: exact monthly quota and per-minute limit with several gateway
 * processes (stores, each on its own Cluster client) and accounts whose keys live on different
 * masters; the counter rebuilt when it disappears; an older gateway's counter read at rebuild.
 * Skips only when redis-server / redis-cli are not installed.
 */
import { createRedis, type RedisClient } from '@sts/common';
import { createDbClient, type Db } from '@sts/db';
import {
  createAccount,
  createTestDatabase,
  redisClusterAvailable,
  startRedisCluster,
  type RedisClusterHandle,
} from '@sts/testing';
import { createQuotaStore, minuteKey, monthKey, type QuotaStore } from './leasedQuota';

const PERIOD = '2026-11';
const MINUTE = 29_000_000;
const PREFIX = 'sts:';

(redisClusterAvailable() ? describe : describe.skip)('leased quota on a Redis Cluster', () => {
  let cluster: RedisClusterHandle;
  let dbHandle: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;
  let redis: RedisClient;
  const stores: QuotaStore[] = [];
  const clients: RedisClient[] = [];

  const clusterClient = () =>
    createRedis(
      { REDIS_MODE: 'cluster', REDIS_URL: cluster.url, REDIS_KEY_PREFIX: PREFIX },
      { maxRetriesPerRequest: 1 },
    );

  beforeAll(async () => {
    [cluster, dbHandle] = await Promise.all([startRedisCluster(), createTestDatabase()]);
    db = createDbClient({ url: dbHandle.url, poolSize: 4 });
    redis = clusterClient();
  }, 120_000);

  afterAll(async () => {
    redis?.disconnect();
    await db?.$disconnect();
    await dbHandle?.drop();
    await cluster?.stop();
  });

  afterEach(async () => {
    for (const s of stores.splice(0)) await s.close().catch(() => undefined);
    for (const c of clients.splice(0)) c.disconnect();
  });

  /** a store on its own Cluster client, as a separate gateway process would have */
  function store() {
    const client = clusterClient();
    clients.push(client);
    const s = createQuotaStore({ db, redis: client });
    stores.push(s);
    return s;
  }

  const account = async () => (await createAccount(db, 'free')).id;

  /** the master (port) that owns a key, asked of the cluster itself */
  async function ownerOf(key: string): Promise<number> {
    const slot = Number(await cluster.cli(cluster.ports[0]!, 'cluster', 'keyslot', key));
    const range = (await redis.cluster('SLOTS')).find(([from, to]) => slot >= from && slot <= to);
    const master = range?.[2];
    if (!master) throw new Error(`slot ${slot} not served`);
    return master[1];
  }

  /** accounts until their quota keys sit on every master (and at least `min` accounts) */
  async function accountsOnEveryMaster(min: number): Promise<string[]> {
    const ids: string[] = [];
    const owners = new Set<number>();
    while (ids.length < min || owners.size < cluster.ports.length) {
      const id = await account();
      ids.push(id);
      owners.add(await ownerOf(PREFIX + monthKey(id, PERIOD)));
      if (ids.length > 60) throw new Error('accounts did not spread over the masters');
    }
    return ids;
  }

  const used = async (id: string) => Number(await redis.hget(monthKey(id, PERIOD), 'u'));
  const dbUsed = async (id: string) =>
    (await db.usageMonthly.findUnique({ where: { accountId_period: { accountId: id, period: PERIOD } } }))?.used ?? 0;

  it('three gateways, accounts on every master: exactly each quota admitted, the rest refused, all written through', async () => {
    const ids = await accountsOnEveryMaster(4);
    const gateways = [store(), store(), store()];
    const QUOTA = 40;
    const CALLS = 150;
    // every account's calls at once, spread round-robin over the gateways
    const calls = ids.flatMap((id) =>
      Array.from({ length: CALLS }, (_, i) =>
        Promise.resolve(gateways[i % gateways.length]!.admit(id, PERIOD, MINUTE, QUOTA, 1_000_000)).then((r) => ({
          id,
          gateway: i % gateways.length,
          outcome: r.outcome,
        })),
      ),
    );
    const results = await Promise.all(calls);
    for (const id of ids) {
      const mine = results.filter((r) => r.id === id);
      expect(mine.filter((r) => r.outcome === 'ok')).toHaveLength(QUOTA);
      expect(mine.filter((r) => r.outcome === 'quota_exceeded')).toHaveLength(CALLS - QUOTA);
      for (const r of mine) if (r.outcome === 'ok') gateways[r.gateway]!.succeeded(id, PERIOD);
      expect(await used(id)).toBe(QUOTA);
    }
    // the month key and the minute key of an account share its slot; the accounts do not share one
    for (const id of ids)
      expect(await ownerOf(PREFIX + minuteKey(id, MINUTE))).toBe(await ownerOf(PREFIX + monthKey(id, PERIOD)));
    const owners = new Set(await Promise.all(ids.map((id) => ownerOf(PREFIX + monthKey(id, PERIOD)))));
    expect(owners.size).toBe(3);
    // each counter is really on its own master (asked without following redirections)
    const id0 = ids[0]!;
    const owner = await ownerOf(PREFIX + monthKey(id0, PERIOD));
    for (const port of cluster.ports) {
      const out = await cluster.cli(port, 'exists', PREFIX + monthKey(id0, PERIOD));
      if (port === owner) expect(out.trim()).toBe('1');
      else expect(out).toMatch(/MOVED/);
    }
    await Promise.all(gateways.map((g) => g.flush()));
    for (const id of ids) expect(await dbUsed(id)).toBe(QUOTA);
  });

  it('the per-minute limit is exact across gateways too, and the next minute admits again', async () => {
    const ids = await accountsOnEveryMaster(3);
    const gateways = [store(), store()];
    const results = await Promise.all(
      ids.flatMap((id) =>
        Array.from({ length: 30 }, (_, i) =>
          Promise.resolve(gateways[i % 2]!.admit(id, PERIOD, MINUTE, 1000, 12)).then((r) => ({ id, ...r })),
        ),
      ),
    );
    for (const id of ids) {
      const mine = results.filter((r) => r.id === id);
      expect(mine.filter((r) => r.outcome === 'ok')).toHaveLength(12);
      expect(mine.filter((r) => r.outcome === 'rate_limited')).toHaveLength(18);
      expect(Number(await redis.get(minuteKey(id, MINUTE)))).toBe(12);
      expect((await gateways[0]!.admit(id, PERIOD, MINUTE + 1, 1000, 12)).outcome).toBe('ok');
    }
  });

  it('a counter that disappears is rebuilt from PostgreSQL, and credit given back lands in the right counter', async () => {
    const id = await account();
    const a = store();
    for (let i = 0; i < 5; i++) expect((await a.admit(id, PERIOD, MINUTE, 10, 1000)).outcome).toBe('ok');
    for (let i = 0; i < 5; i++) a.succeeded(id, PERIOD);
    await a.close(); // gives unused credit back, writes 5 to usage_monthly
    expect(await used(id)).toBe(5);
    await redis.del(monthKey(id, PERIOD));
    const b = store();
    const results = await Promise.all(
      Array.from({ length: 20 }, () => Promise.resolve(b.admit(id, PERIOD, MINUTE, 10, 1000))),
    );
    expect(results.filter((r) => r.outcome === 'ok')).toHaveLength(5);
    expect(await used(id)).toBe(10);
  });
});
