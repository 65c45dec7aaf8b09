/**
 * The coverage record as the poller's paths write it, on the real PostgreSQL against the fake X:
 * a stream disconnect opens a `stream_down` gap that the backfill fills, and a failed poll opens
 * a `source_error` gap that the next successful read fills.
 */
import { Redis } from 'ioredis';
import { createLogger } from '@sts/common';
import { readMonitorCoverage, type Db } from '@sts/db';
import { createXSource } from '@sts/social';
import { createAccount, createFakeStream, sendXJson, startFakeX, waitFor, type FakeXRoute } from '@sts/testing';
import { useStreamHarness } from '../../test/streamMode';
import { createCoverageRepository } from './gaps';
import { testPoller } from '../../test/poller';

const h = useStreamHarness('coverage-test');

/** answers X's recent search with a 503 while `down.search` is set */
const down = { search: false, timeline: false };
const outage: FakeXRoute = (req, res, url) => {
  const search = url.pathname === '/2/tweets/search/recent';
  const timeline = /^\/2\/users\/[^/]+\/tweets$/.test(url.pathname);
  if ((search && down.search) || (timeline && down.timeline))
    return sendXJson(res, 503, { title: 'Service Unavailable', type: 'about:blank', status: 503, detail: 'down' });
  return false;
};

async function watch(db: Db, username: string, plan: 'free' | 'starter') {
  const account = await createAccount(db, plan);
  return db.monitor.create({
    data: { accountId: account.id, targetUsername: username, targetKey: username.toLowerCase(), keywords: [] },
  });
}

const gapsOf = (db: Db, targetKey: string) =>
  db.coverageGap.findMany({ where: { targetKey }, orderBy: { startsAt: 'asc' } });

describe('coverage record', () => {
  beforeEach(async () => {
    // the harness's fake X, with a search that can be taken down
    await h.fake.stop();
    h.stream = createFakeStream({ keepAliveMs: 100, maxRuleLength: 64 });
    h.fake = await startFakeX({ routes: [outage, ...h.stream.routes] });
    down.search = false;
    down.timeline = false;
    await h.db.$executeRaw`TRUNCATE coverage_gaps`;
  });

  it('a stream disconnect opens a stream_down gap; the backfill fills it and covered_until moves past it', async () => {
    const { db, fake } = h;
    fake.state.addUser({ username: 'uma' });
    const m = await watch(db, 'uma', 'starter');
    h.startMode();
    await waitFor(() => h.stream.connections() === 1 && h.stream.rules().length === 1);
    await waitFor(async () => (await db.xStreamOwed.count()) === 0);
    await waitFor(async () => (await db.xStreamState.findFirst())?.aliveAt != null);
    const before = fake.state.post({ author: 'uma', text: 'before' });
    await waitFor(async () => (await h.hitsOf(m.id)).length === 1);
    expect(await gapsOf(db, 'uma')).toEqual([]);

    // the stream drops while search is down: the gap is owed and cannot be paid yet
    down.search = true;
    const failedSearches = () =>
      fake.requests.log.filter((r) => r.path === '/2/tweets/search/recent' && r.status === 503).length;
    const droppedAt = Date.now();
    h.stream.disconnect();
    const during = fake.state.post({ author: 'uma', text: 'during' });
    await waitFor(() => h.stream.connects() >= 2);
    // the gap the disconnect opened (a loaded machine may drop the stream once more: another gap)
    const droppedGap = async () =>
      (await gapsOf(db, 'uma')).find((g) => g.startsAt.getTime() <= droppedAt && g.endsAt!.getTime() >= droppedAt);
    await waitFor(async () => (await droppedGap()) !== undefined && failedSearches() >= 1, 30_000).catch(
      async (err: unknown) => {
        const gaps = await gapsOf(db, 'uma');
        throw new Error(`${String(err)}; gaps ${JSON.stringify(gaps)}; failed searches ${failedSearches()}`);
      },
    );
    const open = (await droppedGap())!;
    expect(open).toMatchObject({ reason: 'stream_down', filledAt: null });
    const monitor = { id: m.id, targetKey: 'uma', createdAt: m.createdAt };
    const seen = await readMonitorCoverage(db, monitor);
    expect(seen.gaps).toContainEqual({ from: open.startsAt, to: open.endsAt, reason: 'stream_down', filledAt: null });
    expect(seen.coveredUntil!.getTime()).toBeLessThanOrEqual(open.startsAt.getTime());
    expect(await h.hitsOf(m.id)).toEqual([before.id]);

    // search is back: the backfill pays the window, the post is a hit, the gap is filled
    down.search = false;
    await waitFor(async () => (await gapsOf(db, 'uma')).every((g) => g.filledAt != null), 20_000);
    expect((await h.hitsOf(m.id)).sort()).toEqual([before.id, during.id].sort());
    const filled = (await gapsOf(db, 'uma')).find((g) => g.id === open.id)!;
    expect(filled.filledAt!.getTime()).toBeGreaterThan(open.endsAt!.getTime());
    const last = (await gapsOf(db, 'uma')).reduce((a, g) => Math.max(a, g.endsAt!.getTime()), 0);
    await waitFor(async () => {
      const c = await readMonitorCoverage(db, monitor);
      return c.coveredUntil !== null && c.coveredUntil.getTime() >= last;
    });
  });

  it('a failed timeline poll opens a source_error gap from the last read; the next successful poll fills it', async () => {
    const { db, fake } = h;
    fake.state.addUser({ username: 'vic' });
    await watch(db, 'vic', 'free');
    const logger = createLogger({ service: 'coverage-test', level: 'error' });
    const redis = new Redis(h.redisHandle.url, { keyPrefix: h.redisHandle.prefix });
    const poller = testPoller(
      { db, redis },
      {
        source: createXSource({ baseUrl: fake.url, bearerToken: 'test-token', redis }),
        logger,
        intervals: { plans: { free: { pollIntervalSec: 1 }, starter: { pollIntervalSec: 1 } } },
        coverage: createCoverageRepository(db),
      },
    );
    try {
      expect(await poller.runCycle({ force: true })).toMatchObject({ polled: 1, failed: 0 });
      const read = (await db.pollCursor.findUniqueOrThrow({ where: { targetKey: 'vic' } })).lastSuccessAt!;
      down.timeline = true;
      expect(await poller.runCycle({ force: true })).toMatchObject({ failed: 1 });
      expect(await poller.runCycle({ force: true })).toMatchObject({ failed: 1 });
      const open = await gapsOf(db, 'vic');
      // one gap however many polls fail, from the end of the last successful read
      expect(open).toEqual([
        expect.objectContaining({ reason: 'source_error', startsAt: read, endsAt: null, filledAt: null }),
      ]);
      down.timeline = false;
      expect(await poller.runCycle({ force: true })).toMatchObject({ polled: 1, failed: 0 });
      const after = (await db.pollCursor.findUniqueOrThrow({ where: { targetKey: 'vic' } })).lastSuccessAt!;
      expect(await gapsOf(db, 'vic')).toEqual([
        expect.objectContaining({ reason: 'source_error', startsAt: read, endsAt: after, filledAt: after }),
      ]);
    } finally {
      await poller.stop();
      redis.disconnect();
    }
  });
});
