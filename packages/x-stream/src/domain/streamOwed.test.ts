import { owedRetryMs, planOwedSearches, type OwedWindow } from './streamOwed';

const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s));
let nextId = 1n;
function row(username: string, since: number, reason = 'gap', attempts = 0): OwedWindow {
  return { id: nextId++, username, since: at(since), reason, dueAt: at(100), attempts, createdAt: at(100) };
}

describe('planOwedSearches', () => {
  it('merges the windows of one username from the oldest, drops usernames nobody watches', () => {
    const rows = [row('a', 30), row('a', 10), row('gone', 5), row('b', 20)];
    const { searches, dropped } = planOwedSearches(rows, (u) => (u === 'gone' ? null : []), 512);
    expect(dropped).toEqual([rows[2]!.id]);
    expect(searches).toHaveLength(1);
    expect(searches[0]).toMatchObject({ query: 'from:a OR from:b', since: at(10), partial: true, rulesOnly: false });
    expect(searches[0]!.ids.sort()).toEqual([rows[0]!.id, rows[1]!.id, rows[3]!.id].sort());
  });

  it('packs within the query length, oldest window first; only the last query of a group is partial', () => {
    const rows = ['u1', 'u2', 'u3', 'u4', 'u5'].map((u, i) => row(u, 50 - i * 10, 'rules'));
    // "from:u5 OR from:u4" is 18 characters: two usernames a query at 20
    const { searches } = planOwedSearches(rows, () => [], 20);
    expect(searches.map((s) => s.usernames)).toEqual([['u5', 'u4'], ['u3', 'u2'], ['u1']]);
    expect(searches.map((s) => s.since)).toEqual([at(10), at(30), at(50)]);
    expect(searches.map((s) => s.partial)).toEqual([false, false, true]);
    expect(searches.every((s) => s.rulesOnly && s.query.length <= 20)).toBe(true);
  });

  it('groups by the rule parts a target allows: the parts go into the query and count toward its length', () => {
    const parts: Record<string, string[]> = { a: ['-is:retweet'], b: ['-is:retweet'], c: [] };
    const { searches } = planOwedSearches([row('a', 1), row('b', 2), row('c', 3)], (u) => parts[u]!, 512);
    expect(searches.map((s) => s.query).sort()).toEqual(['(from:a OR from:b) -is:retweet', 'from:c']);
    // no room for a part beside one 15-character username: the part is dropped, never the username
    const tight = planOwedSearches([row('a', 1)], () => ['lang:en'], 20).searches;
    expect(tight[0]!.query).toBe('from:a');
  });

  it('retries a failed search after 5 s, doubling, at most 5 minutes; attempts carry into the search', () => {
    expect([0, 1, 2, 20].map(owedRetryMs)).toEqual([5000, 10_000, 20_000, 300_000]);
    expect(planOwedSearches([row('a', 1, 'gap', 3)], () => [], 512).searches[0]!.attempts).toBe(3);
  });
});
