import { checkInterval, nextBlock, rebuildGrace, sweepInterval, unseenWrites, wantedUnits } from './quotaBlocks';

describe('quota block arithmetic', () => {
  it('doubles a block that lasted less than leaseMs, halves one that lasted over eight times longer', () => {
    expect(nextBlock(8, 0, 1000, 50, 1000)).toBe(8); // nothing leased yet
    expect(nextBlock(8, 980, 1000, 50, 1000)).toBe(16);
    expect(nextBlock(800, 980, 1000, 50, 1000)).toBe(1000); // capped
    expect(nextBlock(8, 900, 1000, 50, 1000)).toBe(8); // 100 ms: kept
    expect(nextBlock(8, 500, 1000, 50, 1000)).toBe(4);
    expect(nextBlock(1, 500, 1000, 50, 1000)).toBe(1);
  });

  it('asks for a block, or one unit per waiter once closing', () => {
    expect(wantedUnits(16, 3, false)).toBe(16);
    expect(wantedUnits(2, 5, false)).toBe(5);
    expect(wantedUnits(16, 0, true)).toBe(1);
    expect(wantedUnits(16, 3, true)).toBe(3);
  });

  it('grants a grace after a rebuild unless nobody can hold units of the month yet', () => {
    expect(rebuildGrace(false, 0, 1000)).toBe(0);
    expect(rebuildGrace(true, 0, 1000)).toBe(1000);
    expect(rebuildGrace(false, 3, 1000)).toBe(1000);
  });

  it('checks epochs within a quarter of the grace and sweeps at half the shorter period', () => {
    expect(checkInterval(250, 1000)).toBe(250);
    expect(checkInterval(250, 400)).toBe(100);
    expect(sweepInterval(250, 100)).toBe(50);
    expect(sweepInterval(5, 5)).toBe(10);
  });

  it('counts only the write-throughs a rebuild did not see', () => {
    const writes = [
      { after: 10, n: 4, at: 0 },
      { after: 15, n: 5, at: 0 },
      { after: 20, n: 5, at: 0 },
    ];
    expect(unseenWrites(writes, 15)).toBe(5);
    expect(unseenWrites(writes, 9)).toBe(14);
    expect(unseenWrites(writes, -1)).toBe(14);
    expect(unseenWrites([], 0)).toBe(0);
  });
});
