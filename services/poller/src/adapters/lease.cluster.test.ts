/**
 * Poll leases against a real Redis Cluster (three masters started by this test) through the
 * REDIS_MODE=cluster client: two pollers racing for targets whose leases sit on different masters
 * hold each target once; only the holder's release frees it; two running pollers never poll one
 * target at the same time and record every tweet once. Skips only when redis-server / redis-cli
 * are not installed.
 */
import { createLogger, createRedis, type RedisClient } from '@sts/common';
import { createDbClient, type Db } from '@sts/db';
import { createLocalSource, createSocialTweet, createSocialUser, type SocialSource } from '@sts/social';
import {
  createTestDatabase,
  redisClusterAvailable,
  startRedisCluster,
  waitFor,
  type RedisClusterHandle,
} from '@sts/testing';
import { createRedisLeases, leaseKey } from './lease';
import { smallPoller, testPoller } from '../../test/poller';

const PREFIX = 'sts:';
const logger = createLogger({ service: 'poller-cluster-test', level: 'error' });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

(redisClusterAvailable() ? describe : describe.skip)('poll leases on a Redis Cluster', () => {
  let cluster: RedisClusterHandle;
  let dbHandle: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;
  const clients: RedisClient[] = [];

  /** one Cluster client per poller, as separate replicas have */
  const clusterClient = () => {
    const c = createRedis({ REDIS_MODE: 'cluster', REDIS_URL: cluster.url, REDIS_KEY_PREFIX: PREFIX });
    clients.push(c);
    return c;
  };

  beforeAll(async () => {
    [cluster, dbHandle] = await Promise.all([startRedisCluster(), createTestDatabase()]);
    db = createDbClient({ url: dbHandle.url, poolSize: 8 });
  }, 120_000);

  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await db?.$disconnect();
    await dbHandle?.drop();
    await cluster?.stop();
  });

  /** the master (port) that owns a key */
  async function ownerOf(redis: RedisClient, key: string): Promise<number> {
    const slot = Number(await cluster.cli(cluster.ports[0]!, 'cluster', 'keyslot', key));
    const range = (await redis.cluster('SLOTS')).find(([from, to]) => slot >= from && slot <= to);
    const master = range?.[2];
    if (!master) throw new Error(`slot ${slot} not served`);
    return master[1];
  }

  it('two pollers racing for 30 targets on every master: each target held by exactly one, freed only by its holder', async () => {
    const a = clusterClient();
    const b = clusterClient();
    const leases = [createRedisLeases(a), createRedisLeases(b)];
    const targets = Array.from({ length: 30 }, (_, i) => `target_${i}_${Math.random().toString(36).slice(2, 6)}`);
    const owners = new Set(await Promise.all(targets.map((t) => ownerOf(a, PREFIX + leaseKey(t)))));
    expect(owners.size).toBe(3);
    // both pollers ask for every target at the same time
    const tokens = await Promise.all(targets.map((t) => Promise.all(leases.map((l) => l.acquire(t, 30_000)))));
    for (const pair of tokens) expect(pair.filter((t) => t !== null)).toHaveLength(1);
    // the loser's release (a token that is not the lease's) leaves the lease in place
    for (const [i, t] of targets.entries()) {
      const winner = tokens[i]![0] !== null ? 0 : 1;
      await leases[1 - winner]!.release(t, 'not-the-holder');
      expect(await leases[1 - winner]!.acquire(t, 30_000)).toBeNull();
      await leases[winner]!.release(t, tokens[i]![winner]!);
      expect(await leases[1 - winner]!.acquire(t, 30_000)).not.toBeNull();
    }
  });

  it('two running pollers over several targets: never two polls of one target at once, every tweet recorded once', async () => {
    const accountId = (await db.account.create({ data: { email: 'cluster@example.com', plan: 'starter' } })).id;
    const targets: string[] = [];
    for (let i = 0; i < 6; i++) {
      const username = `Cluster_${i}_${Math.random().toString(36).slice(2, 6)}`;
      await createSocialUser(db, { username, name: username });
      targets.push(username);
    }
    const monitors = await Promise.all(
      targets.map((t) => db.monitor.create({ data: { accountId, targetUsername: t, targetKey: t.toLowerCase() } })),
    );
    const inner = createLocalSource({ db });
    const active = new Map<string, number>();
    let maxConcurrentPerTarget = 0;
    const source: SocialSource = {
      ...inner,
      name: inner.name,
      pollTweets: async (username, request) => {
        const key = username.toLowerCase();
        active.set(key, (active.get(key) ?? 0) + 1);
        maxConcurrentPerTarget = Math.max(maxConcurrentPerTarget, active.get(key)!);
        try {
          await sleep(5);
          return await inner.pollTweets(username, request);
        } finally {
          active.set(key, active.get(key)! - 1);
        }
      },
    };
    const replicas = [clusterClient(), clusterClient()].map((redis) =>
      testPoller(
        { db, redis },
        {
          source,
          logger,
          ...smallPoller,
          tickMs: 20,
        },
      ),
    );
    for (const r of replicas) await r.start();
    const posted: string[] = [];
    try {
      for (let round = 0; round < 3; round++) {
        for (const t of targets)
          posted.push((await createSocialTweet(db, { authorUsername: t, text: `r${round}` })).id);
        await sleep(400);
      }
      await waitFor(async () => (await db.hit.count({ where: { tweetId: { in: posted } } })) === posted.length, 20_000);
    } finally {
      await Promise.all(replicas.map((r) => r.stop()));
    }
    expect(maxConcurrentPerTarget).toBe(1);
    for (const m of monitors) {
      const hits = await db.hit.findMany({ where: { monitorId: m.id } });
      expect(hits).toHaveLength(3);
      expect(new Set(hits.map((h) => h.tweetId)).size).toBe(3);
    }
  });
});
