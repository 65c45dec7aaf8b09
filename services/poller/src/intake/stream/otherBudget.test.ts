/**
 * A stream gap paid by whichever budget is left (stream/owed.ts, stream/accountReads.ts) on the
 * real PostgreSQL, Redis (the fleet's governor) and RabbitMQ (the record queues) against the fake
 * X: with the search budget spent by other work, the accounts the users lookup shows posting
 * (`most_recent_tweet_id` in the gap) are read through their user timelines and the gap closes
 * without waiting for the next search window, each post one hit, no 429; an account whose newest
 * post is older than the gap is not read; with the timeline budget spent too, the gap stays owed
 * (nothing skipped) and closes once a budget comes back.
 */
import { SourceBusyError, createXSource, type XSource } from '@sts/social';
import { createTestVhost, waitFor } from '@sts/testing';
import type { Db } from '@sts/db';
import { Registry } from 'prom-client';
import { useStreamHarness } from '../../../test/streamMode';

const h = useStreamHarness('stream-other-budget-test');
let db: Db;
/** the stream mode's metrics registry (set up by setUp) */
let registry: Registry;
beforeEach(() => {
  ({ db } = h);
});

/** another part of the fleet on the same token and governor (the same Redis prefix) */
function otherWork(): XSource {
  return createXSource({ baseUrl: h.fake.url, bearerToken: 'test-token', redis: h.redis });
}

/** spends the family's window through the fleet's governor, as other work would; the calls answered */
async function spend(call: () => Promise<unknown>): Promise<number> {
  for (let n = 0; n < 50; n++) {
    try {
      await call();
    } catch (err) {
      if (err instanceof SourceBusyError) return n;
      throw err;
    }
  }
  throw new Error('the budget was never spent');
}

/** the stream set up with `names` looked at (their first looks), its position alive */
async function setUp(names: string[], extra: Parameters<typeof h.startMode>[2] = {}): Promise<Map<string, string>> {
  const monitors = await h.watch(names);
  registry = new Registry();
  h.startMode({ X_BACKFILL_LOOKUP: 'auto' }, registry, { backfillLookupLagMs: 300, ...extra });
  await waitFor(() => h.stream.connections() === 1 && h.ruled().length === names.length);
  await waitFor(async () => (await h.owedRows()) === 0 && (await db.targetProfile.count()) === names.length, 15_000);
  await waitFor(
    async () => (await db.$queryRaw<unknown[]>`SELECT 1 FROM x_stream_state WHERE alive_at IS NOT NULL`).length === 1,
  );
  return monitors;
}

/** the account ids whose timelines were read since request `from` (one entry per call) */
function timelinesRead(from: number): string[] {
  return h.fake.requests.log
    .slice(from)
    .filter((r) => r.family === 'timeline')
    .map((r) => /^\/2\/users\/([0-9]+)\/tweets$/.exec(r.path)![1]!)
    .sort();
}

const idOf = (username: string) => h.fake.state.user(username)!.id;

/** poller_x_stream_backfill_reads_total by `family/result` (the series at 0 left out) */
async function backfillReads(): Promise<Record<string, number>> {
  const metric = registry.getSingleMetric('poller_x_stream_backfill_reads_total');
  if (!metric) throw new Error('poller_x_stream_backfill_reads_total is not registered');
  const out: Record<string, number> = {};
  for (const v of (await metric.get()).values) if (v.value > 0) out[`${v.labels.family}/${v.labels.result}`] = v.value;
  return out;
}

describe('X stream gap paid by whichever budget is left', () => {
  it('search spent by other work: the known posters read through their timelines, quiet accounts not read, no 429', async () => {
    await h.restartFake({ limits: { search: 3 } }); // a 15-minute window, as X's
    const names = Array.from({ length: 8 }, (_, i) => `tl_${i}`);
    // quiet accounts: a post long before the gap (and any monitor), and none at all
    h.fake.state.addUser({ username: 'tl_0' });
    h.fake.state.post({ author: 'tl_0', text: 'long ago', createdAt: new Date(Date.now() - 3_600_000) });
    const vhost = await createTestVhost();
    const monitors = await setUp(names, { amqp: await h.amqpClient(vhost.url, 'tl-a'), recordQueues: {} });
    expect(await spend(() => otherWork().search('from:someone_else', { limit: 10 }))).toBe(3);

    const from = h.fake.requests.log.length;
    h.stream.disconnect();
    const posters = ['tl_1', 'tl_2', 'tl_4', 'tl_5', 'tl_6'];
    const expected = new Map<string, string[]>();
    for (const n of posters)
      expected.set(
        n,
        [1, 2].map((k) => h.fake.state.post({ author: n, text: `during ${n} #${k}` }).id),
      );
    await waitFor(() => h.stream.connects() >= 2);
    // closed within the search window that other work spent (it resets 15 minutes later)
    await waitFor(async () => (await h.owedRows()) === 0 && (await db.hit.count()) === 10, 30_000);
    await h.expectExactHits(monitors, expected);
    expect(h.fake.requests.count({ status: 429 })).toBe(0);
    expect(h.fake.requests.log.slice(from).filter((r) => r.family === 'search')).toEqual([]);
    expect(h.fake.limits.remaining('search')).toBe(0);
    // each poster's timeline read once; the quiet accounts (tl_0, tl_3, tl_7) not read
    expect(timelinesRead(from)).toEqual(posters.map(idOf).sort());
    // the reads counted by family: the refused search, then one timeline read per poster
    const reads = await backfillReads();
    expect(reads['timeline/ok']).toBe(posters.length);
    expect(reads['search/refused']).toBeGreaterThanOrEqual(1);
    expect(reads['timeline/refused']).toBeUndefined();
    const lookups = h.fake.requests.log.slice(from).filter((r) => r.family === 'users');
    expect(lookups.length).toBeGreaterThanOrEqual(1);
    expect(lookups.every((r) => r.params.get('user.fields')?.includes('most_recent_tweet_id'))).toBe(true);

    // the stream carries what comes next, once
    const later = h.fake.state.post({ author: 'tl_3', text: 'after the gap' });
    await waitFor(async () => (await db.hit.count()) === 11);
    expected.set('tl_3', [later.id]);
    await h.expectExactHits(monitors, expected);
  });

  it('timeline spent too: the gap stays owed (not skipped) and closes once a budget comes back', async () => {
    await h.restartFake({ limits: { search: 3, timeline: 2 }, windowMs: 20_000 });
    const names = ['both_0', 'both_1', 'both_2', 'both_3', 'both_4'];
    const monitors = await setUp(names);
    const other = otherWork();
    expect(await spend(() => other.search('from:someone_else', { limit: 10 }))).toBe(3);
    expect(await spend(() => other.readAccountSince(idOf('both_4'), { sinceId: '0' }))).toBe(2);

    const from = h.fake.requests.log.length;
    h.stream.disconnect();
    const posters = ['both_0', 'both_2', 'both_3'];
    const expected = new Map(posters.map((n) => [n, [h.fake.state.post({ author: n, text: `during ${n}` }).id]]));
    await waitFor(() => h.stream.connects() >= 2);
    // the quiet accounts paid by the lookup; the posters' windows owed, nothing read yet
    const owedNames = async () =>
      (await db.$queryRaw<{ username: string }[]>`SELECT DISTINCT username FROM x_stream_owed ORDER BY username`).map(
        (r) => r.username,
      );
    const since = (family: string) => h.fake.requests.log.slice(from).filter((r) => r.family === family);
    await waitFor(async () => (await owedNames()).join() === posters.join() && since('users').length > 0, 15_000);
    expect(await db.hit.count()).toBe(0);
    // the search and timeline budgets refused in the governor: nothing asked of X
    expect([...since('search'), ...since('timeline'), ...since('tweets')]).toEqual([]);
    await waitFor(async () => ((await backfillReads())['timeline/refused'] ?? 0) >= 1);

    // the windows reset: the gap closes through whichever budget came back, each post once
    await waitFor(async () => (await h.owedRows()) === 0 && (await db.hit.count()) === posters.length, 45_000);
    await h.expectExactHits(monitors, expected);
    expect(h.fake.requests.count({ status: 429 })).toBe(0);
  });
});
