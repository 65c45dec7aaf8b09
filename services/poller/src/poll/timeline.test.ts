/**
 * X `timeline` mode when the budget is short ("0 upstream 429s and 0 lost hits in every
 * mode"): against the fake X with a timeline window of 5 reads per 3 s and 15 Starter targets due
 * every second, the fleet's governor lets 5 reads through per window and X never answers 429; the
 * tick's fair order (`fairOrder`: the target read successfully longest ago first; a refused poll
 * is no read and stops the tick) reads every target once before any twice, and every post becomes
 * its hit — late, never lost. Without the fair order some targets starve (the test times out).
 */
import type { Redis } from 'ioredis';
import { createLogger } from '@sts/common';
import type { Db } from '@sts/db';
import { createRedisGovernor, createXSource } from '@sts/social';
import { waitFor, type FakeX } from '@sts/testing';
import { openXTestBed, type XTestBed } from '../../test/xTestBed';
import { testPoller } from '../../test/poller';

const TARGETS = 15;
const WINDOW = { reads: 5, ms: 3000 };
/** one poll at a time: the order the tick takes targets in is the order X sees (see below) */
const CONCURRENCY = 1;

describe('poller: X timeline mode on a short budget', () => {
  let bed: XTestBed;
  let db: Db;
  let redis: Redis;
  let fake: FakeX;

  beforeAll(async () => {
    bed = await openXTestBed({ poolSize: 4, fakeX: { limits: { timeline: WINDOW.reads }, windowMs: WINDOW.ms } });
    ({ db, redis, fake } = bed);
  });
  afterAll(() => bed.close());

  it('reads every target once before any twice and loses no post (late, not lost), with no 429', async () => {
    const account = (await db.account.create({ data: { email: 'timeline@example.com', plan: 'starter' } })).id;
    const userIds = new Map<string, string>();
    const monitors: string[] = [];
    for (let i = 0; i < TARGETS; i++) {
      const u = fake.state.addUser({ username: `tl_${i}` });
      userIds.set(u.id, u.username);
      const m = await db.monitor.create({
        data: { accountId: account, targetUsername: u.username, targetKey: u.username, createdAt: new Date(0) },
      });
      monitors.push(m.id);
    }
    const posts = [...userIds.values()].map((author) => fake.state.post({ author, text: `post of ${author}` }).id);
    // the tier's limits as an operator sets them (X_RATE_LIMITS): the first window is budgeted too
    const governor = createRedisGovernor(redis, { limits: { timeline: WINDOW.reads }, windowMs: WINDOW.ms });
    const source = createXSource({ baseUrl: fake.url, bearerToken: 't', timeoutMs: 5000, redis, governor });
    const poller = testPoller(
      { db, redis },
      {
        source,
        logger: createLogger({ service: 'poller-timeline-test', level: 'error' }),
        intervals: { plans: { free: { pollIntervalSec: 300 }, starter: { pollIntervalSec: 1 } }, overrideSec: 1 },
        concurrency: CONCURRENCY,
        tickMs: 100,
      },
    );
    await poller.start();
    try {
      // 15 targets, 5 reads per 3 s window: three windows at least
      await waitFor(async () => (await db.hit.count({ where: { tweetId: { in: posts } } })) === TARGETS, 30_000);
    } finally {
      await poller.stop();
    }
    expect(fake.requests.count({ status: 429 })).toBe(0);
    const reads = fake.requests.log
      .filter((r) => r.family === 'timeline' && r.status === 200)
      .map((r) => userIds.get(r.path.split('/')[3]!));

    // fair: every target is read once before any twice. (With several polls in flight the tick
    // still takes them in this order, but one whose account is cached can reach X before one taken
    // earlier that waits for its user lookup: fair up to the polls in flight.)
    expect({ distinct: new Set(reads.slice(0, TARGETS)).size, reads }).toMatchObject({ distinct: TARGETS });
    for (const id of monitors) expect(await db.hit.count({ where: { monitorId: id } })).toBe(1);
  });
});
