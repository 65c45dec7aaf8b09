import { MIN_QUERY_LENGTH, packFromQueries } from './pack';

describe('packFromQueries', () => {
  const names = Array.from({ length: 100 }, (_, i) => `user_${String(i).padStart(3, '0')}x`);

  it('packs usernames into from: OR-groups of at most maxLength characters, in order, each name once', () => {
    const groups = packFromQueries([...names, 'USER_000X'], 512);
    for (const g of groups) {
      expect(g.query.length).toBeLessThanOrEqual(512);
      expect(g.query).toBe(g.usernames.map((u) => `from:${u}`).join(' OR '));
    }
    expect(groups.flatMap((g) => g.usernames)).toEqual(names);
    // 9-character names: "from:" + 9 + " OR " = 18 per clause, so 28 fit in 512
    expect(groups[0]!.usernames).toHaveLength(28);
    expect(groups).toHaveLength(Math.ceil(100 / 28));
    // a group is as full as it can be: the next clause would not have fitted
    expect(groups[0]!.query.length + ' OR from:'.length + 9).toBeGreaterThan(512);
  });

  it('uses the given length (stream rules: 1,024) and refuses bad input', () => {
    expect(packFromQueries(names, 1024)[0]!.usernames).toHaveLength(57);
    expect(packFromQueries([], 512)).toEqual([]);
    expect(packFromQueries(['a'], MIN_QUERY_LENGTH)).toEqual([{ query: 'from:a', usernames: ['a'] }]);
    expect(() => packFromQueries(['a'], MIN_QUERY_LENGTH - 1)).toThrow(RangeError);
    expect(() => packFromQueries(['a'], 512.5)).toThrow(RangeError);
    expect(() => packFromQueries(['not valid'], 512)).toThrow(/not an X username/);
    expect(() => packFromQueries(['a OR from:b'], 512)).toThrow(RangeError);
  });
});
