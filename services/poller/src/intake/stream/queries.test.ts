/**
 * Query monitors in the X `stream` mode, on the real PostgreSQL against the fake X: a query
 * monitor is one filtered-stream rule (its query with the grouping spelled out), a streamed post
 * matching it is one hit for that monitor through the shared record path, a post it does not
 * match is none, the rule goes when the monitor does, a stream gap or a failover is backfilled by a recent
 * search of the query, and monitors beyond the rule cap or whose rule X refuses are read by search.
 */
import { createAccount, waitFor } from '@sts/testing';
import { parseQuery } from '@sts/core';
import { readMonitorCoverage, type Db } from '@sts/db';
import { queryRuleMonitor } from '@sts/x-stream/src/domain/queryRules';
import { useStreamHarness } from '../../../test/streamMode';

const h = useStreamHarness('stream-query-test');
let db: Db;
beforeEach(() => {
  db = h.db;
  for (const username of ['zed', 'yan']) h.fake.state.addUser({ username });
});
const startMode = h.startMode.bind(h);
const hitsOf = h.hitsOf.bind(h);

const QUERY = '(launch OR release) rocket -giveaway';

async function queryMonitor(query = QUERY, plan: 'free' | 'starter' = 'starter') {
  const account = await createAccount(db, plan);
  return db.monitor.create({ data: { accountId: account.id, query, keywords: [] } });
}

const queryRules = () => h.stream.rules().filter((r) => queryRuleMonitor({ tag: r.tag }) !== null);

describe('X stream mode: query monitors', () => {
  it('a query monitor is one rule; a matching post is one hit, others none; deleting it deletes the rule', async () => {
    const m = await queryMonitor();
    await queryMonitor('launch rocket', 'free');
    startMode();
    await waitFor(() => h.stream.connections() === 1 && queryRules().length === 1);
    const [rule] = queryRules();
    expect(rule!.value).toBe(parseQuery(QUERY).rule);
    expect(queryRuleMonitor({ tag: rule!.tag })).toBe(m.id);
    // the new rule's backfill search is done: what follows comes by the stream alone
    await waitFor(() => h.fake.requests.count({ family: 'search' }) >= 1);
    await new Promise((r) => setTimeout(r, 200));
    const searches = h.fake.requests.count({ family: 'search' });
    const hit = h.fake.state.post({ author: 'zed', text: 'Rocket launch at noon' });
    const excluded = h.fake.state.post({ author: 'yan', text: 'rocket launch giveaway' });
    const other = h.fake.state.post({ author: 'yan', text: 'a launch without the r-word' });
    await waitFor(async () => (await hitsOf(m.id)).length === 1);
    await new Promise((r) => setTimeout(r, 500));
    expect(await hitsOf(m.id)).toEqual([hit.id]);
    expect([excluded.id, other.id]).not.toContain((await hitsOf(m.id))[0]);
    expect(await db.hit.count()).toBe(1);
    expect(h.fake.requests.count({ family: 'search' })).toBe(searches);
    const event = await db.outboxEvent.findFirstOrThrow();
    expect(event.payload).toMatchObject({
      event: 'monitor.hit',
      monitor: { id: m.id, query: QUERY, targetUsername: null },
      tweet: { id: hit.id },
    });
    await db.monitor.delete({ where: { id: m.id } });
    await waitFor(() => queryRules().length === 0);
  });

  it('a changed query replaces its rule; a paused monitor has none', async () => {
    const m = await queryMonitor();
    startMode();
    await waitFor(() => queryRules().length === 1);
    await db.monitor.update({ where: { id: m.id }, data: { query: 'release rocket' } });
    await waitFor(() => queryRules().length === 1 && queryRules()[0]!.value === 'release rocket');
    await db.monitor.update({ where: { id: m.id }, data: { isActive: false } });
    await waitFor(() => queryRules().length === 0);
  });

  it('a stream gap is backfilled by a recent search of the query, no hit twice', async () => {
    const m = await queryMonitor();
    startMode();
    await waitFor(() => h.stream.connections() === 1 && queryRules().length === 1);
    // the new rule's own backfill (a search of the query) is done
    await waitFor(() => h.fake.requests.count({ family: 'search' }) >= 1);
    const before = h.fake.state.post({ author: 'zed', text: 'rocket release one' });
    await waitFor(async () => (await hitsOf(m.id)).length === 1);
    const searches = h.fake.requests.count({ family: 'search' });
    h.stream.disconnect();
    const during = h.fake.state.post({ author: 'yan', text: 'rocket launch two' });
    h.fake.state.post({ author: 'yan', text: 'rocket launch giveaway' });
    await waitFor(() => h.stream.connects() >= 2);
    await waitFor(async () => (await hitsOf(m.id)).join() === [before.id, during.id].sort().join(), 15_000);
    expect(h.fake.requests.count({ family: 'search' })).toBeGreaterThan(searches);
    expect(await db.outboxEvent.count()).toBe(await db.hit.count());
    // the monitor's coverage shows the stream's gap, filled by the query's backfill (a loaded
    // machine may drop the stream once more: every gap it shows is the stream's, and filled)
    const coverage = await readMonitorCoverage(db, { id: m.id, targetKey: null, createdAt: m.createdAt });
    expect(coverage.gaps.length).toBeGreaterThanOrEqual(1);
    for (const gap of coverage.gaps)
      expect(gap).toEqual(expect.objectContaining({ reason: 'stream_down', filledAt: expect.any(Date) }));
  });

  it('a failover of the holder is backfilled for the query by the replica that takes over', async () => {
    const m = await queryMonitor();
    const one = startMode();
    const two = startMode();
    await waitFor(() => h.stream.connections() === 1 && queryRules().length === 1);
    await waitFor(() => h.fake.requests.count({ family: 'search' }) >= 1);
    // the holder's position is saved (a sync after the connection's gap was owed)
    await waitFor(
      async () => (await db.$queryRaw<unknown[]>`SELECT 1 FROM x_stream_state WHERE alive_at IS NOT NULL`).length === 1,
    );
    const holder = one.isHolder() ? one : two;
    const other = holder === one ? two : one;
    await holder.stop();
    const posted = h.fake.state.post({ author: 'zed', text: 'rocket launch during the failover' });
    await waitFor(() => other.isHolder() && h.stream.connections() === 1, 15_000);
    await waitFor(async () => (await hitsOf(m.id)).join() === posted.id, 15_000);
    expect(queryRules()).toHaveLength(1);
  });

  it('query monitors beyond the rule cap are read by search', async () => {
    const first = await queryMonitor('launch rocket');
    const second = await queryMonitor('release rocket');
    // before the start: the overflow's first search (from the monitor's creation) must find it
    const post = h.fake.state.post({ author: 'zed', text: 'rocket release soon' });
    startMode({ X_MAX_RULES: 1 });
    await waitFor(() => queryRules().length === 1);
    expect(queryRuleMonitor({ tag: queryRules()[0]!.tag })).toBe(first.id);
    await waitFor(async () => (await hitsOf(second.id)).join() === post.id, 15_000);
    expect(h.stream.rules()).toHaveLength(1);
  });

  it("a rule X refuses (a negated group) is read by search; the batch's other rules are added", async () => {
    const fine = await queryMonitor('launch rocket');
    const refused = await queryMonitor('rocket -(test OR drill)');
    const post = h.fake.state.post({ author: 'zed', text: 'rocket launch' });
    h.fake.state.post({ author: 'zed', text: 'rocket drill' });
    startMode();
    await waitFor(() => queryRules().length === 1);
    expect(queryRuleMonitor({ tag: queryRules()[0]!.tag })).toBe(fine.id);
    await waitFor(async () => (await hitsOf(refused.id)).join() === post.id, 15_000);
    await waitFor(async () => (await hitsOf(fine.id)).join() === post.id);
    expect(h.stream.rules()).toHaveLength(1);
  });
});
