/**
 * The X stream mode at scale, on the real PostgreSQL against the fake X: a gap whose searches
 * exceed the search budget is paid over later windows (every post one hit, no 429), X's replay
 * (`backfill_minutes`) closes a short gap without a search, and set-up costs what changed (one
 * by one or in batches: at most one request per 20 targets; a username already in the rules is
 * not searched again).
 */
import { waitFor } from '@sts/testing';
import type { Db } from '@sts/db';
import { useStreamHarness } from '../../../test/streamMode';

const h = useStreamHarness('stream-scale-test');
let db: Db;
beforeEach(() => {
  ({ db } = h);
});

describe('X stream mode at scale', () => {
  it('a gap needing more searches than the budget allows: every post becomes one hit later, no 429', async () => {
    // 2 searches per 2-second window; 2 usernames a query: the gap of 10 usernames needs 5
    await h.restartFake({ limits: { search: 2 }, windowMs: 2000 });
    const names = Array.from({ length: 10 }, (_, i) => `gap_${i}`);
    const monitors = await h.watch(names);
    h.startMode({ X_QUERY_MAX_LENGTH: 30 });
    await waitFor(() => h.stream.connections() === 1 && h.ruled().length === names.length);
    // the new rules' own backfill is paid first (3 windows)
    await waitFor(async () => (await h.owedRows()) === 0, 20_000);
    // the position is saved once the connection's (empty) gap is owed
    await waitFor(
      async () => (await db.$queryRaw<unknown[]>`SELECT 1 FROM x_stream_state WHERE alive_at IS NOT NULL`).length === 1,
    );
    const searches = h.fake.requests.count({ family: 'search' });
    h.stream.disconnect();
    const expected = new Map(names.map((n) => [n, [h.fake.state.post({ author: n, text: `during the gap ${n}` }).id]]));
    await waitFor(() => h.stream.connects() >= 2);
    // the gap is owed as soon as the connection is up, and paid over later windows
    await waitFor(
      async () => (await h.owedRows()) === 0 && h.fake.requests.count({ family: 'search' }) >= searches + 5,
      30_000,
    );
    await waitFor(async () => (await db.hit.count()) >= names.length, 10_000);
    await h.expectExactHits(monitors, expected);
    expect(h.fake.requests.count({ status: 429 })).toBe(0);
    // the budget did refuse (several windows were needed), and no search was wasted
    expect(h.fake.requests.count({ family: 'search' })).toBeLessThanOrEqual(searches + 6);
  });

  it('X_STREAM_BACKFILL_MINUTES: X replays a short disconnect, no search', async () => {
    const monitors = await h.watch(['rep_a', 'rep_b']);
    h.startMode({ X_STREAM_BACKFILL_MINUTES: 2 });
    await waitFor(() => h.stream.connections() === 1 && h.ruled().length === 2);
    await waitFor(async () => (await h.owedRows()) === 0);
    const before = h.fake.state.post({ author: 'rep_a', text: 'before' });
    await waitFor(async () => (await db.hit.count()) === 1);
    await new Promise((r) => setTimeout(r, 300));
    const searches = h.fake.requests.count({ family: 'search' });
    h.stream.disconnect();
    const during = ['rep_a', 'rep_b'].map((a) => h.fake.state.post({ author: a, text: `missed by ${a}` }));
    await waitFor(() => h.stream.connects() >= 2);
    await waitFor(async () => (await db.hit.count()) === 3, 10_000);
    const connects = h.fake.requests.log.filter((r) => r.family === 'stream_connect');
    expect(connects.at(-1)!.params.get('backfill_minutes')).toBe('1');
    expect(connects[0]!.params.get('backfill_minutes')).toBeNull();
    await new Promise((r) => setTimeout(r, 500));
    expect(h.fake.requests.count({ family: 'search' })).toBe(searches);
    expect(await h.owedRows()).toBe(0);
    await h.expectExactHits(
      monitors,
      new Map([
        ['rep_a', [before.id, during[0]!.id]],
        ['rep_b', [during[1]!.id]],
      ]),
    );
  });

  it.each([
    ['one by one', 1],
    ['in 4 batches', 4],
  ])(
    'set-up %s costs at most one request per 20 targets; a username already in the rules is not searched again',
    async (_how, batches) => {
      await h.restartFake({ maxRuleLength: 1024 });
      h.startMode({ X_RULE_MAX_LENGTH: 1024, X_RULE_COALESCE_SECONDS: 2 });
      await waitFor(() => h.stream.connections() === 1);
      const names = Array.from({ length: 260 }, (_, i) => `su_${String(i).padStart(3, '0')}`);
      const monitors = new Map<string, string>();
      const size = names.length / batches;
      for (let b = 0; b < batches; b++) {
        const part = names.slice(b * size, (b + 1) * size);
        for (const [k, v] of await h.watch(part, batches === 1)) monitors.set(k, v);
        if (batches > 1) await new Promise((r) => setTimeout(r, 300));
      }
      // posted after their monitors exist, before any rule: only the rules' backfill finds them
      const early = new Map(['su_000', 'su_259'].map((n) => [n, [h.fake.state.post({ author: n, text: 'early' }).id]]));
      await waitFor(() => h.ruled().length === names.length, 15_000);
      await waitFor(async () => (await h.owedRows()) === 0 && (await db.hit.count()) === 2, 15_000);
      expect(h.fake.requests.count({ family: 'users' })).toBe(0);
      expect(h.fake.requests.log.length).toBeLessThanOrEqual(names.length / 20);
      // another monitor of a watched username: no rule change, no search
      const searches = h.fake.requests.count({ family: 'search' });
      await h.watch(['su_007']);
      await new Promise((r) => setTimeout(r, 2500));
      expect(h.fake.requests.count({ family: 'search' })).toBe(searches);
      expect(h.fake.requests.count({ family: 'rules' })).toBeLessThanOrEqual(names.length / 20);
      await h.expectExactHits(new Map([...monitors].filter(([k]) => early.has(k))), early);
    },
  );
});
