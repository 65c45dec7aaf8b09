import { Redis } from 'ioredis';
import { createLogger } from '@sts/common';
import { createDbClient, type Db } from '@sts/db';
import { createLocalSource, createSocialUser } from '@sts/social';
import { createTestDatabase, createTestRedis } from '@sts/testing';
import { createRedisLeases } from './adapters/lease';
import { createPollerRepository } from './adapters/repository';
import { postDemoTweet } from './demo';
import { createPoller } from './poller';

describe('demo generator', () => {
  let dbHandle: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;

  beforeAll(async () => {
    dbHandle = await createTestDatabase();
    db = createDbClient({ url: dbHandle.url, poolSize: 2 });
  });

  afterAll(async () => {
    await db.$disconnect();
    await dbHandle.drop();
  });

  it('does nothing without users', async () => {
    expect(await postDemoTweet(db)).toBeNull();
  });

  it('posts tweets for existing users, some with the demo monitors’ keywords, so the monitors fire', async () => {
    const account = await db.account.create({ data: { email: 'demo@example.com', plan: 'starter' } });
    for (const u of ['demo_alice', 'demo_bob', 'demo_carol']) await createSocialUser(db, { username: u, name: u });
    const m = await db.monitor.create({
      data: { accountId: account.id, targetUsername: 'demo_alice', targetKey: 'demo_alice', keywords: ['launch day'] },
    });
    const posted = [];
    for (let i = 0; i < 40; i++) posted.push((await postDemoTweet(db))!);
    const users = ['demo_alice', 'demo_bob', 'demo_carol'];
    expect(posted.every((p) => users.includes(p.author))).toBe(true);
    expect(await db.socialTweet.count()).toBe(40);
    const matching = posted.filter((p) => p.author === 'demo_alice' && /\blaunch day\b/.test(p.text));
    expect(matching.length).toBeGreaterThan(0);

    const redisHandle = createTestRedis();
    const redis = new Redis(redisHandle.url, { keyPrefix: redisHandle.prefix });
    try {
      // the monitor was created before the tweets: polling records exactly the matching ones
      await createPoller({
        repository: createPollerRepository(db),
        source: createLocalSource({ db }),
        leases: createRedisLeases(redis),
        logger: createLogger({ service: 'demo-test', level: 'error' }),
        intervals: { plans: { free: { pollIntervalSec: 300 }, starter: { pollIntervalSec: 60 } } },
      }).runCycle();
      expect(await db.hit.count({ where: { monitorId: m.id } })).toBe(matching.length);
    } finally {
      redis.disconnect();
      await redisHandle.cleanup();
    }
  });
});
