/**
 * Query monitors read by X recent search (the `search` and `timeline` modes, and the stream
 * mode's Free-only ones) against the fake X, real PostgreSQL and Redis: one search of the query
 * as X reads it, a matching post recorded once through the shared record path, the next read
 * since the monitor's cursor, every search counted in the fleet's search budget (a refused one
 * is no read), and the monitor's coverage and last check read from its cursor.
 */
import { createLogger } from '@sts/common';
import { parseQuery } from '@sts/core';
import { queryCursorKeyOf, readMonitorCoverage, withLastCheck, type Db } from '@sts/db';
import { createRedisGovernor, createXSource, type XGovernor } from '@sts/social';
import type { FakeX } from '@sts/testing';
import { openXTestBed, type XTestBed } from '../../../test/xTestBed';
import { createCoverageRepository } from '../../gaps/gaps';
import type { Poller } from '../../poller';
import { plans, testPoller } from '../../../test/poller';

const logger = createLogger({ service: 'poller-xquery-test', level: 'error' });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const QUERY = '(launch OR release) rocket -giveaway';

describe('poller: query monitors by X recent search', () => {
  let bed: XTestBed;
  let db: Db;
  let fake: FakeX;
  let governor: XGovernor;
  let poller: Poller;

  beforeAll(async () => {
    bed = await openXTestBed({ poolSize: 4 });
    ({ db, fake } = bed);
    fake.state.addUser({ username: 'zed' });
    // a search window with room for two requests: the third read must be refused by the budget
    governor = createRedisGovernor(bed.redis, { limits: { search: 2 }, windowMs: 60_000 });
    const source = createXSource({ baseUrl: fake.url, bearerToken: 't', timeoutMs: 5000, redis: bed.redis, governor });
    poller = testPoller(
      { db, redis: bed.redis },
      {
        source,
        logger,
        intervals: { plans, overrideSec: 1 },
        xQueries: { searchGroup: source.searchGroup.bind(source) },
        coverage: createCoverageRepository(db),
      },
    );
  });

  afterAll(() => bed.close());

  const searchLog = () => fake.requests.log.filter((r) => r.family === 'search');

  it('one search per due query monitor records a matching post once, since its cursor, within the budget', async () => {
    const account = await db.account.create({ data: { email: 'q@example.com', plan: 'starter' } });
    const m = await db.monitor.create({
      data: { accountId: account.id, query: QUERY, createdAt: new Date(Date.now() - 3600_000) },
    });
    const hit = fake.state.post({ author: 'zed', text: 'Rocket launch at noon' });
    fake.state.post({ author: 'zed', text: 'rocket launch giveaway' });
    fake.state.post({ author: 'zed', text: 'a launch, nothing else' });

    const first = await poller.xQueries!.runOnce();
    expect(first.read).toBe(1);
    expect(first.hits.map((x) => x.tweetId)).toEqual([hit.id]);
    expect(searchLog()).toHaveLength(1);
    expect(searchLog()[0]!.params.get('query')).toBe(parseQuery(QUERY).rule);
    expect((await governor.budget('search')).remaining).toBe(1);
    const event = await db.outboxEvent.findFirstOrThrow();
    expect(event.payload).toMatchObject({ monitor: { id: m.id, query: QUERY, targetUsername: null } });
    const cursor = await db.pollCursor.findUniqueOrThrow({ where: { targetKey: queryCursorKeyOf(m.id) } });
    expect(cursor.position).toMatch(/^x\.[0-9]+$/);

    // not due again before its interval
    expect((await poller.xQueries!.runOnce()).read).toBe(0);
    await sleep(1100);
    const second = await poller.xQueries!.runOnce();
    expect(second).toMatchObject({ read: 1, hits: [] });
    expect(searchLog()[1]!.params.get('since_id')).not.toBeNull();
    expect(await db.hit.count({ where: { monitorId: m.id } })).toBe(1);

    // the window's two searches are spent: the third is refused before X, and it is no read
    await sleep(1100);
    const polledAt = (await db.pollCursor.findUniqueOrThrow({ where: { targetKey: queryCursorKeyOf(m.id) } }))
      .lastPolledAt;
    expect(await poller.xQueries!.runOnce()).toMatchObject({ read: 0 });
    expect(searchLog()).toHaveLength(2);
    const after = await db.pollCursor.findUniqueOrThrow({ where: { targetKey: queryCursorKeyOf(m.id) } });
    expect(after.lastPolledAt).toEqual(polledAt);

    const coverage = await readMonitorCoverage(db, { id: m.id, targetKey: null, createdAt: m.createdAt });
    expect(coverage.coveredUntil?.getTime()).toBe(polledAt?.getTime());
    // the refused search is a gap of its coverage, open until the next read
    expect(coverage.gaps).toEqual([expect.objectContaining({ reason: 'budget_refused', to: null })]);
    const [shown] = await withLastCheck(db, [await db.monitor.findUniqueOrThrow({ where: { id: m.id } })]);
    expect(shown!.lastCheckAt).toEqual(polledAt);
  });
});
