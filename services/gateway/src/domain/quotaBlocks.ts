/**
 * The leased quota's arithmetic (adapters/leasedQuota.ts): block sizes, the units a lease asks
 * for, the rebuild's grace, the sweeper's periods and what a sync adds for write-throughs a rebuild
 * did not see. No I/O.
 */

/**
 * Block size follows demand: a block that lasted less than `leaseMs` doubles (up to `maxBlock`), one
 * that lasted more than eight times as long halves. `leasedAt` 0: nothing leased yet, unchanged.
 */
export function nextBlock(block: number, leasedAt: number, now: number, leaseMs: number, maxBlock: number): number {
  if (leasedAt <= 0) return block;
  const lasted = now - leasedAt;
  if (lasted < leaseMs) return Math.min(maxBlock, block * 2);
  if (lasted > 8 * leaseMs) return halve(block);
  return block;
}

/** half a block, at least one unit */
export const halve = (block: number) => Math.max(1, block >> 1);

/** the units one lease asks for: a block, or one per waiter once closing */
export const wantedUnits = (block: number, waiters: number, closed: boolean) =>
  closed ? Math.max(1, waiters) : Math.max(block, waiters);

/**
 * A rebuilt counter grants nothing for the grace period, unless nobody can hold units of the month
 * yet: no usage_monthly row and nothing of this process's own (`used`: what the rebuild counted).
 */
export const rebuildGrace = (rowFound: boolean, used: number, graceMs: number) =>
  !rowFound && used === 0 ? 0 : graceMs;

/** a process checks the epoch of every month it has outstanding units in at least this often */
export const checkInterval = (idleReturnMs: number, rebuildGraceMs: number) =>
  Math.min(idleReturnMs, Math.floor(rebuildGraceMs / 4));

/** the sweeper runs at half the shorter of its two periods, at least every 10 ms apart */
export const sweepInterval = (idleReturnMs: number, checkMs: number) =>
  Math.max(10, Math.floor(Math.min(idleReturnMs, checkMs) / 2));

export interface WriteThrough {
  /** usage_monthly's count right after the write */
  after: number;
  /** units written */
  n: number;
  at: number;
}

/**
 * Units of recent write-throughs that a rebuild which read `base` from PostgreSQL did not see: rows
 * only grow, one write at a time, so a write whose count after it is above `base` came after that
 * read. `base` < 0 (not recorded): all of them.
 */
export function unseenWrites(writes: readonly WriteThrough[], base: number): number {
  let add = 0;
  for (const w of writes) if (base < 0 || w.after > base) add += w.n;
  return add;
}
