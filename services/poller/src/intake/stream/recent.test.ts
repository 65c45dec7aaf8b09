/**
 * The owed backfill's lookup pre-check (X_BACKFILL_LOOKUP, stream/recentCheck.ts) on the real
 * PostgreSQL against the fake X: X's `most_recent_tweet_id` pays a quiet account's window without
 * a search while a posting account is still searched (every post one hit); the lookup is the new
 * targets' first account look; a gap whose searches exceed the budget closes with fewer searches
 * and no 429; `off` searches every window as before.
 */
import { waitFor } from '@sts/testing';
import type { Db } from '@sts/db';
import { useStreamHarness } from '../../../test/streamMode';

const h = useStreamHarness('stream-recent-test');
let db: Db;
beforeEach(() => {
  ({ db } = h);
});

/** the usernames the searches since request `from` asked for */
function searched(from = 0): string[] {
  return h.fake.requests.log
    .slice(from)
    .filter((r) => r.family === 'search')
    .flatMap((r) => [...(r.params.get('query') ?? '').matchAll(/from:(\w+)/g)].map((m) => m[1]!))
    .sort();
}

describe('X stream backfill lookup (most_recent_tweet_id)', () => {
  it('a rule change: quiet accounts paid without search, the posting one searched; the lookup is their first look', async () => {
    // an old post (before any monitor) and no post at all: nothing owed to find
    h.fake.state.addUser({ username: 'quiet_old' });
    h.fake.state.post({ author: 'quiet_old', text: 'long ago', createdAt: new Date(Date.now() - 3_600_000) });
    const monitors = await h.watch(['quiet_old', 'quiet_none', 'talker']);
    // posted after its monitor exists, before any rule: only the rules' backfill can find it
    const early = h.fake.state.post({ author: 'talker', text: 'early' });
    h.startMode({ X_BACKFILL_LOOKUP: 'auto' }, undefined, { backfillLookupLagMs: 300 });
    await waitFor(() => h.stream.connections() === 1 && h.ruled().length === 3);
    await waitFor(async () => (await h.owedRows()) === 0 && (await db.hit.count()) === 1, 15_000);
    expect(searched()).toEqual(['talker']);
    const users = h.fake.requests.log.filter((r) => r.family === 'users');
    expect(users).toHaveLength(1);
    expect(users[0]!.path).toBe('/2/users/by');
    expect(users[0]!.params.get('user.fields')).toContain('most_recent_tweet_id');
    expect(users[0]!.params.get('usernames')!.split(',').sort()).toEqual(['quiet_none', 'quiet_old', 'talker']);
    // the answers are the targets' first account looks (profile and health recorded)
    await waitFor(async () => (await db.targetProfile.count()) === 3);
    const looked = await db.targetProfile.findMany({ orderBy: { targetKey: 'asc' } });
    expect(looked.map((p) => [p.targetKey, p.status, p.userId])).toEqual([
      ['quiet_none', 'ok', h.fake.state.user('quiet_none')!.id],
      ['quiet_old', 'ok', h.fake.state.user('quiet_old')!.id],
      ['talker', 'ok', h.fake.state.user('talker')!.id],
    ]);
    // the stream carries what comes next, once
    const later = h.fake.state.post({ author: 'quiet_none', text: 'now I speak' });
    await waitFor(async () => (await db.hit.count()) === 2);
    await h.expectExactHits(
      monitors,
      new Map([
        ['talker', [early.id]],
        ['quiet_none', [later.id]],
      ]),
    );
  });

  it('X_BACKFILL_LOOKUP=off: every new username is searched, no user lookup', async () => {
    const monitors = await h.watch(['off_quiet', 'off_talker']);
    const early = h.fake.state.post({ author: 'off_talker', text: 'early' });
    h.startMode({ X_BACKFILL_LOOKUP: 'off' }, undefined, { backfillLookupLagMs: 300 });
    await waitFor(() => h.stream.connections() === 1 && h.ruled().length === 2);
    await waitFor(async () => (await h.owedRows()) === 0 && (await db.hit.count()) === 1, 15_000);
    await new Promise((r) => setTimeout(r, 500));
    expect(searched()).toEqual(['off_quiet', 'off_talker']);
    expect(h.fake.requests.count({ family: 'users' })).toBe(0);
    expect(await db.targetProfile.count()).toBe(0);
    await h.expectExactHits(monitors, new Map([['off_talker', [early.id]]]));
  });

  it('a gap whose searches exceed the budget: looked up, only the posting accounts searched, every post one hit, no 429', async () => {
    // 2 searches per 2-second window; 2 usernames a query: the gap of 10 usernames would need 5
    await h.restartFake({ limits: { search: 2 }, windowMs: 2000 });
    const names = Array.from({ length: 10 }, (_, i) => `gap_${i}`);
    const monitors = await h.watch(names);
    // one set-up search (gap_0 posted before its rule) teaches the governor the search limit
    const early = h.fake.state.post({ author: 'gap_0', text: 'early' });
    h.startMode({ X_QUERY_MAX_LENGTH: 30, X_BACKFILL_LOOKUP: 'auto' }, undefined, { backfillLookupLagMs: 300 });
    await waitFor(() => h.stream.connections() === 1 && h.ruled().length === names.length);
    await waitFor(async () => (await h.owedRows()) === 0 && (await db.hit.count()) === 1, 20_000);
    await waitFor(
      async () => (await db.$queryRaw<unknown[]>`SELECT 1 FROM x_stream_state WHERE alive_at IS NOT NULL`).length === 1,
    );
    await new Promise((r) => setTimeout(r, 2500));
    const from = h.fake.requests.log.length;
    h.stream.disconnect();
    const expected = new Map<string, string[]>([['gap_0', [early.id]]]);
    for (const n of ['gap_3', 'gap_8']) expected.set(n, [h.fake.state.post({ author: n, text: `during ${n}` }).id]);
    await waitFor(() => h.stream.connects() >= 2);
    await waitFor(async () => (await h.owedRows()) === 0 && (await db.hit.count()) === 3, 30_000);
    await h.expectExactHits(monitors, expected);
    expect(h.fake.requests.count({ status: 429 })).toBe(0);
    const gapUsers = h.fake.requests.log.slice(from).filter((r) => r.family === 'users');
    expect(gapUsers.length).toBeGreaterThanOrEqual(1);
    // by the account ids the set-up's first looks learned
    expect(gapUsers.every((r) => r.path === '/2/users')).toBe(true);
    // the posting accounts are searched (gap_0 too when its post falls in the gap's overlap), or,
    // should the search budget refuse, read through their timelines (otherBudget.test.ts)
    const timelines = h.fake.requests.log
      .slice(from)
      .filter((r) => r.family === 'timeline')
      .map((r) => h.fake.state.users.get(r.path.split('/')[3]!)!.username);
    const gapRead = [...searched(from), ...timelines];
    expect(gapRead).toEqual(expect.arrayContaining(['gap_3', 'gap_8']));
    expect(gapRead.filter((n) => !['gap_0', 'gap_3', 'gap_8'].includes(n))).toEqual([]);
    expect(h.fake.requests.log.slice(from).filter((r) => r.family === 'search').length).toBeLessThanOrEqual(2);
  });
});
