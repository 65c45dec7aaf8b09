import { judgeTurn, sourceFailing, turnsUnavailable } from './flap';

describe('the flap rule', () => {
  const policy = { sharePercent: 20, windowMs: 60_000, minTargets: 10 };
  const now = new Date('2026-12-01T12:00:00.000Z');
  const ago = (ms: number) => new Date(now.getTime() - ms);

  it('the source fails when more than the share, and at least the minimum, turned together', () => {
    expect(sourceFailing(policy, 201, 1000)).toBe(true);
    expect(sourceFailing(policy, 200, 1000)).toBe(false);
    // a small source: a few accounts are just accounts
    expect(sourceFailing(policy, 9, 20)).toBe(false);
    expect(sourceFailing(policy, 10, 20)).toBe(true);
  });

  it('a turn waits for its window, is marked after it, and is held while the source fails', () => {
    expect(judgeTurn(policy, { openSuspects: 1, watched: 1000, firstSeenAt: now, now })).toEqual({
      kind: 'pending',
      recheckAt: new Date(now.getTime() + 60_000),
    });
    expect(judgeTurn(policy, { openSuspects: 1, watched: 1000, firstSeenAt: ago(60_000), now })).toEqual({
      kind: 'mark',
    });
    expect(judgeTurn(policy, { openSuspects: 500, watched: 1000, firstSeenAt: ago(600_000), now })).toEqual({
      kind: 'source_failing',
      recheckAt: new Date(now.getTime() + 300_000),
    });
  });

  it('only an available target turning unavailable is a turn', () => {
    expect(turnsUnavailable('ok', 'not_found')).toBe(true);
    expect(turnsUnavailable('renamed', 'suspended')).toBe(true);
    expect(turnsUnavailable('suspended', 'not_found')).toBe(false);
    expect(turnsUnavailable('not_found', 'ok')).toBe(false);
  });
});
