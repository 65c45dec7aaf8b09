/**
 * Monthly quota and per-minute limit, leased: each gateway process takes blocks of units from
 * Redis with one atomic Lua call and admits calls from that local credit synchronously, so a busy
 * account costs a Redis round trip per block, not per call (a round trip per call was a large
 * share of the gateway's CPU per call; docs/benchmarks.md).
 *
 * Exactness: the lease script grants n = min(wanted, max(1, ⌊remaining / 4⌋)) units, where
 * remaining is the smaller of the month's and the minute's, and adds n to both counters at once. The
 * sum of what all processes hold can therefore never pass the quota or the minute limit, and
 * near the end blocks shrink to single units, so one process cannot sit on what another needs for
 * long. A failed call gives its month unit back to the local credit (it still counts against the
 * minute's limit: every admitted call does); credit unused for `idleReturnMs`,
 * credit of a minute that has ended (its month units) and everything at close() goes back to Redis.
 * Callers waiting for the same account share one lease request in flight. Block size follows
 * demand: it doubles while a block lasts less than `leaseMs`, halves when one lasts much longer.
 *
 * Redis: `quota:{<account>}:<period>` is a hash {u: units used or held, e: epoch, b: the
 * usage_monthly count its rebuild read, g: end of its grace period}, `rate:{<account>}:<minute>` a
 * counter that expires after two minutes. The `{<account>}` hash tag puts an account's two keys in
 * one Redis Cluster slot (the scripts use both), while different accounts spread over the cluster's
 * slots. Successful calls are written through to PostgreSQL (usage_monthly) in batches.
 *
 * A missing month hash (restart, flush, eviction) is rebuilt by the next lease — only if still
 * missing, so a concurrent rebuild cannot reset a live counter — from PostgreSQL's count + this
 * process's successes not yet written + its calls in flight + its unused credit, with a new epoch.
 * The other processes' outstanding units are not in it, so each adds its own (SYNC, one atomic
 * script into the epoch it saw) the first time it meets an epoch other than the one its units are
 * counted in: successes not yet written + calls in flight + credit it still holds + its
 * write-throughs the rebuild's read did not see. That last part needs no clock: usage_monthly rows
 * only grow, one write at a time, so a write whose RETURNING count is above the rebuild's `b` came
 * after that read (write-throughs are remembered for 60 s). A process meets the new epoch at its
 * next lease or write-through, when a give-back is refused, and at least every `checkMs` while it
 * has units outstanding (the sweeper); a write-through that finds no counter rebuilds it at once
 * (an idle process writing after a flush). To make that exact, a rebuilt counter grants nothing for
 * `rebuildGraceMs` (1 s): leases wait, calls are served from credit already held. Credit goes back
 * only into the counter of the epoch it is counted in. Rebuilds, syncs and write-throughs are
 * serialised in a process, so a batch in transit is counted once.
 *
 * Bounds after a flush: the sum admitted stays within the quota if every process reaches Redis
 * within the grace period (one that is paused or cut off longer can add its units late: overshoot
 * ≤ its outstanding units). Conservative by a little: credit being given back while it is added
 * can stay counted (≤ one block). No grace when the rebuild finds nothing at all (no usage_monthly
 * row, nothing of its own), so a brand-new account or month pays no wait; a flush within an
 * account's first write-through interval of the month can then miss other processes' units of
 * that interval. The per-minute counter restarts from 0: that minute may admit up to twice its
 * limit.
 *
 * The SQL statement that writes a batch to usage_monthly also adds it to usage_daily under the
 * UTC day of the write (the dashboard's chart), so the month's count and the sum of its days always
 * agree and the hot path does no extra work. A batch is at most a flush interval old: only calls of the last second
 * before midnight can land on the next day.
 *
 * The usage figures handed back (for X-Quota-Remaining / X-RateLimit-Remaining) are this process's
 * view: the counters at its last lease minus its unused credit; other replicas' calls since then
 * are not in it (at most one block behind).
 *
 * Known limit: a process killed without a graceful stop (SIGKILL, OOM) leaves its unused credit
 * counted as used for that month: at most one block per busy account, and a block is at most a
 * quarter of what remained of the minute's limit.
 */
import { randomBytes } from 'node:crypto';
import type { RedisClient } from '@sts/common';
import type { Db } from '@sts/db';
import {
  checkInterval,
  halve,
  nextBlock,
  rebuildGrace,
  sweepInterval,
  unseenWrites,
  wantedUnits,
  type WriteThrough,
} from '../domain/quotaBlocks';
import { withQuotaScripts, type ChargeMonthReply, type LeaseReply, type RedisWithScripts } from './quotaScripts';

type AdmitOutcome = 'ok' | 'quota_exceeded' | 'rate_limited';
export interface Admission {
  outcome: AdmitOutcome;
  /** units of the month used or held, including this call's when admitted */
  monthUsed: number;
  /** calls counted in this minute, including this one when admitted */
  minuteUsed: number;
}

export interface QuotaStore {
  /**
   * Admits one call against the per-minute limit and the monthly quota: synchronously when this
   * process holds credit for the account in this minute, else after leasing a block from Redis.
   * On 'ok' one unit is taken: settle it with succeeded() or release().
   */
  admit(
    accountId: string,
    period: string,
    minute: number,
    monthlyQuota: number,
    perMinute: number,
  ): Admission | Promise<Admission>;
  /** the admitted call did not succeed: its unit goes back to the local credit */
  release(accountId: string, period: string, minute: number): void;
  /** the admitted call succeeded: its unit stays used and is queued for the write-through */
  succeeded(accountId: string, period: string): void;
  /**
   * Takes one unit of the monthly quota and none of the per-minute limit (a stream event), in one
   * Redis call, not from leased credit: true when taken (a success, queued for the write-through),
   * false when the month is spent.
   */
  chargeMonth(accountId: string, period: string, minute: number, monthlyQuota: number): Promise<boolean>;
  /** writes the pending successful calls to usage_monthly */
  flush(): Promise<void>;
  /** gives every unused unit back to Redis, then flushes; later calls lease one unit at a time */
  close(): Promise<void>;
}

export interface QuotaStoreOptions {
  db: Db;
  redis: RedisClient;
  /** a block should last about this long at the account's current rate; default 50 ms */
  leaseMs?: number;
  /** credit unused this long goes back to Redis; default 250 ms */
  idleReturnMs?: number;
  /** largest block; default 1000 */
  maxBlock?: number;
  /**
   * after a rebuild of the month counter, leases wait this long so that every other process has met
   * the new epoch and added its outstanding units; default 1000 ms
   */
  rebuildGraceMs?: number;
  /** clock for the usage_daily day of a write; default Date.now */
  now?: () => number;
}

export const monthKey = (accountId: string, period: string) => `quota:{${accountId}}:${period}`;
export const minuteKey = (accountId: string, minute: number) => `rate:{${accountId}}:${minute}`;
/** the month counter outlives its month */
const MONTH_TTL_SECONDS = 40 * 24 * 3600;

interface Lease {
  accountId: string;
  period: string;
  /** `${accountId}|${period}`, the key of the usage maps (made once, not per call) */
  key: string;
  minute: number;
  /** units leased and not yet taken by a call */
  credit: number;
  /**
   * minute units of the credit: a failed call gives its month unit back but not its minute unit
   * (every admitted call counts against the per-minute limit), so this can be below `credit`
   */
  minuteCredit: number;
  epoch: string;
  /** the counters as the last lease left them (they include our credit) */
  monthUsed: number;
  minuteUsed: number;
  lastUse: number;
  leasedAt: number;
  /** when the counter's epoch was last seen (a lease, a sync) */
  checkedAt: number;
  checking: boolean;
  block: number;
  waiters: number;
  pending: Promise<LeaseResult> | null;
}

/** the counters a give-back goes to: a lease's, or the window a lease has moved on from */
type LeaseWindow = Pick<Lease, 'accountId' | 'period' | 'minute' | 'epoch'>;

type LeaseResult = { code: 0 | 1 | 2; monthUsed: number; minuteUsed: number };

/** what one lease script call led to: a result to hand back, or another try */
type LeaseStep = { kind: 'done'; done: LeaseResult } | { kind: 'again' };

function add(map: Map<string, number>, key: string, n: number): void {
  const v = (map.get(key) ?? 0) + n;
  if (v === 0) map.delete(key);
  else map.set(key, v);
}

function newLease(accountId: string, period: string, minute: number): Lease {
  const now = Date.now();
  return {
    accountId,
    period,
    key: `${accountId}|${period}`,
    minute,
    credit: 0,
    minuteCredit: 0,
    epoch: '',
    monthUsed: 0,
    minuteUsed: 0,
    lastUse: now,
    leasedAt: 0,
    checkedAt: now,
    checking: false,
    block: 1,
    waiters: 0,
    pending: null,
  };
}

/** a call can be admitted from credit: a month unit and a minute unit are both held */
const canTake = (l: Lease) => l.credit > 0 && l.minuteCredit > 0;

/** write-throughs younger than this are kept to compensate a rebuild that read PostgreSQL before them */
const WRITTEN_KEEP_MS = 60_000;

/**
 * The write-through side: successes not yet in PostgreSQL, the batch being written, and the recent
 * write-throughs a rebuild elsewhere may not have seen.
 */
class UsageLedger {
  // "account|period" → successful calls not yet in PostgreSQL
  pending = new Map<string, number>();
  // "account|period" → units taken by calls that have not finished
  readonly inflight = new Map<string, number>();
  // the batch being written through
  transit = new Map<string, number>();
  // "account|period" → recent write-throughs
  private readonly written = new Map<string, WriteThrough[]>();

  /** successes not yet written + the batch being written + calls in flight of one key */
  owed(key: string): number {
    return (this.pending.get(key) ?? 0) + (this.transit.get(key) ?? 0) + (this.inflight.get(key) ?? 0);
  }

  remember(key: string, w: WriteThrough): void {
    const list = this.written.get(key) ?? [];
    list.push(w);
    this.written.set(key, list);
  }

  recentWrites(key: string): WriteThrough[] {
    const list = this.written.get(key);
    if (list === undefined) return [];
    const from = Date.now() - WRITTEN_KEEP_MS;
    while (list.length > 0 && list[0]!.at < from) list.shift();
    if (list.length === 0) this.written.delete(key);
    return list;
  }
}

/** writes a batch to usage_monthly and usage_daily; returns usage_monthly's count of each key right after it */
async function writeBatch(db: Db, batch: Map<string, number>, nowMs: number): Promise<Map<string, number>> {
  const accountIds: string[] = [];
  const periods: string[] = [];
  const counts: number[] = [];
  for (const [k, n] of batch) {
    const [accountId, period] = k.split('|') as [string, string];
    accountIds.push(accountId);
    periods.push(period);
    counts.push(n);
  }
  const day = new Date(nowMs).toISOString().slice(0, 10);
  // one statement: both tables change together or not at all
  const rows = await db.$queryRaw<{ a: string; p: string; used: number }[]>`
    WITH batch AS (
      SELECT a, p, n FROM unnest(${accountIds}::uuid[], ${periods}::text[], ${counts}::int[]) AS t(a, p, n)
    ), monthly AS (
      INSERT INTO usage_monthly (account_id, period, used, updated_at)
      SELECT a, p, n, now() FROM batch
      ON CONFLICT (account_id, period) DO UPDATE SET used = usage_monthly.used + EXCLUDED.used, updated_at = now()
      RETURNING account_id, period, used
    ), daily AS (
      INSERT INTO usage_daily (account_id, day, used, updated_at)
      SELECT a, ${day}::date, sum(n), now() FROM batch GROUP BY a
      ON CONFLICT (account_id, day) DO UPDATE SET used = usage_daily.used + EXCLUDED.used, updated_at = now()
    )
    SELECT account_id::text AS a, period AS p, used::int AS used FROM monthly`;
  return new Map(rows.map((r) => [`${r.a}|${r.p}`, Number(r.used)]));
}

/**
 * The store: the lease map, Redis and the flush state, private to one instance so the counts stay
 * exact. Leasing (lease, acquire), giving back, syncing after a rebuild, the sweeper and the flush
 * are its methods; the arithmetic is in domain/quotaBlocks.ts and the scripts in quotaScripts.ts.
 */
class LeasedQuotaStore implements QuotaStore {
  private readonly db: Db;
  private readonly redis: RedisWithScripts;
  private readonly leaseMs: number;
  private readonly idleReturnMs: number;
  private readonly maxBlock: number;
  private readonly rebuildGraceMs: number;
  private readonly checkMs: number;
  private readonly now: () => number;
  private readonly leases = new Map<string, Lease>();
  private readonly usage = new UsageLedger();
  // "account|period" written through but not yet checked against the counter's epoch (Redis away)
  private readonly unsynced = new Set<string>();
  private closed = false;
  // flush and rebuild run one at a time
  private exclusive: Promise<unknown> = Promise.resolve();
  // gives back in flight, so close() can wait for them
  private readonly givingBack = new Set<Promise<unknown>>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(opts: QuotaStoreOptions) {
    this.db = opts.db;
    this.leaseMs = opts.leaseMs ?? 50;
    this.idleReturnMs = opts.idleReturnMs ?? 250;
    this.maxBlock = opts.maxBlock ?? 1000;
    this.rebuildGraceMs = opts.rebuildGraceMs ?? 1000;
    this.checkMs = checkInterval(this.idleReturnMs, this.rebuildGraceMs);
    this.now = opts.now ?? Date.now;
    this.redis = withQuotaScripts(opts.redis);
    this.sweeper = setInterval(() => this.sweep(), sweepInterval(this.idleReturnMs, this.checkMs));
    this.sweeper.unref();
  }

  admit(accountId: string, period: string, minute: number, monthlyQuota: number, perMinute: number) {
    let l = this.leases.get(accountId);
    if (l === undefined) {
      l = newLease(accountId, period, minute);
      this.leases.set(accountId, l);
    } else if (l.minute !== minute || l.period !== period) this.moveTo(l, period, minute);
    if (canTake(l)) return this.take(l, Date.now());
    return this.acquire(l, monthlyQuota, perMinute);
  }

  release(accountId: string, period: string, minute: number): void {
    const l = this.leases.get(accountId);
    add(this.usage.inflight, l?.period === period ? l.key : `${accountId}|${period}`, -1);
    if (l === undefined || l.period !== period) return; // a month that is over: nothing to give back
    // the month unit goes back; the minute keeps counting the call
    if (l.minute === minute && !this.closed) l.credit++;
    else this.giveBack(l, 1, 0);
  }

  succeeded(accountId: string, period: string): void {
    const l = this.leases.get(accountId);
    const k = l?.period === period ? l.key : `${accountId}|${period}`;
    add(this.usage.inflight, k, -1);
    add(this.usage.pending, k, 1);
  }

  flush(): Promise<void> {
    return this.serialised(() => this.flushLocked());
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.sweeper);
    for (const l of this.leases.values()) {
      this.giveBack(l, l.credit, l.minuteCredit);
      l.credit = 0;
      l.minuteCredit = 0;
    }
    await Promise.all([...this.givingBack]);
    await this.flush();
  }

  /** runs `fn` after every flush, rebuild and sync queued before it */
  private serialised<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.exclusive.then(fn, fn);
    this.exclusive = run.catch(() => undefined);
    return run;
  }

  /**
   * The units of `l`'s month this process owes the counter: successes not yet written, a batch being
   * written, calls in flight, credit held. (Inside `serialised` no batch is in transit.)
   */
  private outstanding(l: Lease): number {
    return this.usage.owed(l.key) + l.credit;
  }

  /**
   * returns `month` units to `w`'s month counter and `minute` units to the counter of `w`'s minute
   * (while that key lives; for a minute that is over this changes nothing that matters)
   */
  private giveBack(w: LeaseWindow, month: number, minute: number): void {
    if (month <= 0 && minute <= 0) return;
    const p = this.redis
      .stsGiveBack(monthKey(w.accountId, w.period), minuteKey(w.accountId, w.minute), month, w.epoch, minute)
      // 0: the counter was rebuilt; what this process still has outstanding is added to it now
      .then((r) =>
        r === 0 && !this.closed ? this.serialised(() => this.syncLocked(w.accountId, w.period)) : undefined,
      )
      .catch(() => undefined) // Redis away: the units stay counted (errs towards refusing, never over-admitting)
      .finally(() => this.givingBack.delete(p));
    this.givingBack.add(p);
  }

  /** the call's window differs from the lease's: its old credit goes back, the lease moves on */
  private moveTo(l: Lease, period: string, minute: number): void {
    if (l.period === period) this.giveBack(l, l.credit, l.minuteCredit);
    // a new month: the old month's credit is left counted there (that month is over)
    l.credit = 0;
    l.minuteCredit = 0;
    l.period = period;
    l.key = `${l.accountId}|${period}`;
    l.minute = minute;
    l.block = halve(l.block);
  }

  private take(l: Lease, now: number): Admission {
    l.credit--;
    l.minuteCredit--;
    l.lastUse = now;
    add(this.usage.inflight, l.key, 1);
    return { outcome: 'ok', monthUsed: l.monthUsed - l.credit, minuteUsed: l.minuteUsed - l.minuteCredit };
  }

  private rebuild(l: Lease): Promise<void> {
    return this.serialised(() => this.rebuildLocked(l));
  }

  /** rebuilds the missing month counter; the caller holds `serialised` */
  private async rebuildLocked(l: Lease): Promise<void> {
    const row = await this.db.usageMonthly.findUnique({
      where: { accountId_period: { accountId: l.accountId, period: l.period } },
      select: { used: true },
    });
    const used = (row?.used ?? 0) + this.outstanding(l);
    const epoch = randomBytes(8).toString('hex');
    const grace = rebuildGrace(row !== null, used, this.rebuildGraceMs);
    const key = monthKey(l.accountId, l.period);
    const stored = await this.redis.stsInit(key, used, epoch, MONTH_TTL_SECONDS, row?.used ?? 0, grace);
    // our credit is in the rebuilt counter only if our rebuild is the one that happened
    if (stored === epoch) l.epoch = epoch;
  }

  /**
   * After a rebuild by another process: adds this process's outstanding units of the account's month
   * (successes not yet written + calls in flight + credit held + write-throughs the rebuild's read of
   * PostgreSQL did not see) to the new counter, once, and moves them to its epoch; a missing counter
   * is rebuilt. `seen`: the epoch a lease just saw (nothing outstanding: adopted without a round
   * trip). Returns the epoch they are counted in now (null: not this lease's month). The caller holds
   * `serialised` (write-throughs and rebuilds cannot interleave).
   */
  private async syncLocked(accountId: string, period: string, seen?: string): Promise<string | null> {
    const l = this.leases.get(accountId);
    if (l === undefined || l.period !== period) return null; // a month that is over, or nothing held
    const k = l.key;
    let target = '';
    let units = 0;
    for (let attempt = 0; attempt < 5; attempt++) {
      if (seen !== undefined && seen !== l.epoch && this.owesNothing(l, k)) {
        l.epoch = seen; // nothing outstanding: nothing to add
        return seen;
      }
      const [code, e, base] = await this.redis.stsSync(monthKey(accountId, period), l.epoch, target, units);
      if (code === 0 || code === 2) {
        l.epoch = e;
        l.checkedAt = Date.now();
        return e;
      }
      if (code === -1) {
        // missing (e.g. the write-through of an idle process right after a flush): rebuild it now,
        // from a read of PostgreSQL that includes our writes
        await this.rebuildLocked(l);
        target = '';
        units = 0;
        continue;
      }
      target = e;
      units = this.outstanding(l) + unseenWrites(this.usage.recentWrites(k), base);
    }
    throw new Error('the quota counter kept changing');
  }

  /** nothing outstanding and no recent write-through: another epoch can be adopted as it is */
  private owesNothing(l: Lease, key = l.key): boolean {
    return this.outstanding(l) === 0 && this.usage.recentWrites(key).length === 0;
  }

  private async lease(l: Lease, quota: number, perMinute: number): Promise<LeaseResult> {
    l.block = nextBlock(l.block, l.leasedAt, Date.now(), this.leaseMs, this.maxBlock);
    const want = wantedUnits(l.block, l.waiters, this.closed);
    const period = l.period;
    const minute = l.minute;
    for (let rebuilds = 0; ;) {
      const reply = await this.leaseCall(l, period, minute, want, quota, perMinute);
      if (reply === null) {
        if (rebuilds++ >= 2) throw new Error('the quota counter could not be initialised');
        await this.rebuild(l);
        continue;
      }
      const step = await this.afterLease(l, period, minute, reply);
      if (step.kind === 'done') return step.done;
    }
  }

  /**
   * One lease script call. Month units held without a minute unit (failed calls gave them back) go
   * back in it; they stay ours when nothing was given back (Redis away, counter missing, grace).
   * null: the counter is missing.
   */
  private async leaseCall(
    l: Lease,
    period: string,
    minute: number,
    want: number,
    quota: number,
    perMinute: number,
  ): Promise<LeaseReply | null> {
    const back = l.minuteCredit === 0 ? l.credit : 0;
    l.credit -= back;
    let reply: LeaseReply;
    try {
      const month = monthKey(l.accountId, period);
      reply = await this.redis.stsLease(month, minuteKey(l.accountId, minute), want, quota, perMinute, back, l.epoch);
    } catch (err) {
      l.credit += back; // not given back: still ours
      throw err;
    }
    if (reply[0] === -1 || reply[0] === 3) l.credit += back;
    return reply[0] === -1 ? null : reply;
  }

  /** what a lease reply means for `l`: adopt or sync a new epoch, wait out a grace, take the units */
  private async afterLease(l: Lease, period: string, minute: number, reply: LeaseReply): Promise<LeaseStep> {
    const [code, monthUsed, minuteUsed, epoch, n] = reply;
    l.checkedAt = Date.now();
    if (epoch !== l.epoch && l.period === period) {
      if (this.owesNothing(l)) l.epoch = epoch;
      else {
        // another process rebuilt the counter: our outstanding units go into it first
        const now = await this.serialised(() => this.syncLocked(l.accountId, period, epoch));
        // rebuilt again meanwhile (or the window moved on): these units are gone, lease again
        if (code === 0 && now !== epoch)
          return now === null ? { kind: 'done', done: { code: 0, monthUsed, minuteUsed } } : { kind: 'again' };
      }
    }
    if (code === 3) {
      // the counter was rebuilt a moment ago: wait until the other processes have added their units
      await new Promise((r) => setTimeout(r, Math.min(n, this.rebuildGraceMs) + 1));
      return { kind: 'again' };
    }
    if (code !== 0) return { kind: 'done', done: { code: code as 1 | 2, monthUsed, minuteUsed } };
    if (l.period !== period || l.minute !== minute) {
      // the window moved on while we waited: these units belong to a window no call will use
      this.giveBack({ accountId: l.accountId, period, minute, epoch }, n, n);
      return { kind: 'done', done: { code: 0, monthUsed, minuteUsed } };
    }
    l.credit += n;
    l.minuteCredit += n;
    l.monthUsed = monthUsed;
    l.minuteUsed = minuteUsed;
    l.leasedAt = Date.now();
    return { kind: 'done', done: { code: 0, monthUsed, minuteUsed } };
  }

  /** waits for a lease (one in flight per account, shared by its waiters) until a unit can be taken */
  private async acquire(l: Lease, quota: number, perMinute: number): Promise<Admission> {
    for (;;) {
      l.waiters++;
      let result: LeaseResult;
      try {
        if (l.pending === null) {
          const p = this.lease(l, quota, perMinute).finally(() => {
            if (l.pending === p) l.pending = null;
          });
          l.pending = p;
        }
        result = await l.pending;
      } finally {
        l.waiters--;
      }
      if (result.code === 1 || result.code === 2)
        return {
          outcome: result.code === 1 ? 'quota_exceeded' : 'rate_limited',
          monthUsed: result.monthUsed,
          minuteUsed: result.minuteUsed,
        };
      if (canTake(l)) return this.take(l, Date.now());
      // others took this block first: lease again
    }
  }

  async chargeMonth(accountId: string, period: string, minute: number, monthlyQuota: number): Promise<boolean> {
    let l = this.leases.get(accountId);
    if (l === undefined) {
      l = newLease(accountId, period, minute);
      this.leases.set(accountId, l);
    } else if (l.period !== period) this.moveTo(l, period, minute);
    for (let attempt = 0; attempt < 8; attempt++) {
      const reply = await this.redis.stsChargeMonth(monthKey(accountId, period), monthlyQuota);
      if (reply[0] === -1) {
        await this.rebuild(l);
        continue;
      }
      const step = await this.afterCharge(l, period, reply);
      if (step !== 'again') return step;
    }
    throw new Error('the quota counter kept changing');
  }

  /**
   * What a month-only charge's reply means for `l`, as afterLease does for a block: another epoch
   * gets this process's outstanding units first (the charged unit is not yet among them, it is in
   * the counter already), a grace is waited out; 'again' when the unit went to a counter that was
   * replaced meanwhile (not counted) or nothing was taken yet.
   */
  private async afterCharge(l: Lease, period: string, reply: ChargeMonthReply): Promise<boolean | 'again'> {
    const [code, , epoch, graceMs] = reply;
    const now = Date.now();
    l.checkedAt = now;
    // keeps the lease (and its epoch) while a stream charges; idle REST credit still goes back
    if (l.credit === 0) l.lastUse = now;
    if (l.period !== period) {
      // the month ended while the unit was charged: it is counted in the month it was taken from
      if (code === 0) add(this.usage.pending, `${l.accountId}|${period}`, 1);
      return code === 0 || code === 1 ? code === 0 : 'again';
    }
    if (epoch !== l.epoch) {
      if (this.owesNothing(l)) l.epoch = epoch;
      else {
        const after = await this.serialised(() => this.syncLocked(l.accountId, period, epoch));
        if (code === 0 && after !== epoch && after !== null) return 'again';
      }
    }
    if (code === 3) {
      await new Promise((r) => setTimeout(r, Math.min(graceMs, this.rebuildGraceMs) + 1));
      return 'again';
    }
    if (code !== 0) return false;
    add(this.usage.pending, `${l.accountId}|${period}`, 1);
    return true;
  }

  /** unused credit goes back to Redis, epochs are checked; long-idle leases are forgotten */
  private sweep(): void {
    const now = Date.now();
    for (const [id, l] of this.leases) {
      if (l.pending !== null) continue;
      if (l.credit > 0 && now - l.lastUse >= this.idleReturnMs) {
        this.giveBack(l, l.credit, l.minuteCredit);
        l.credit = 0;
        l.minuteCredit = 0;
        l.block = halve(l.block);
      }
      // the epoch of what this process has outstanding is checked often enough that a rebuild by
      // another process hears of it within its grace period
      if (!l.checking && now - l.checkedAt >= this.checkMs && this.outstanding(l) > 0) {
        l.checking = true;
        void this.serialised(() => this.syncLocked(l.accountId, l.period))
          .catch(() => undefined) // Redis away: checked again at the next round
          .finally(() => {
            l.checking = false;
            l.checkedAt = Date.now();
          });
      }
      // kept past the longest call (UPSTREAM_TIMEOUT_MS ≤ 120 s), so a late release still finds its lease
      if (l.credit === 0 && now - l.lastUse > 300_000) this.leases.delete(id);
    }
  }

  /** the flush itself; the caller holds `serialised` */
  private async flushLocked(): Promise<void> {
    const { usage } = this;
    if (usage.pending.size === 0 && this.unsynced.size === 0) return;
    const batch = usage.pending;
    usage.pending = new Map();
    usage.transit = batch;
    let after = new Map<string, number>();
    try {
      if (batch.size > 0) after = await writeBatch(this.db, batch, this.now());
    } catch (err) {
      // keep the counts for the next flush
      for (const [k, n] of batch) add(usage.pending, k, n);
      throw err;
    } finally {
      usage.transit = new Map();
    }
    const at = Date.now();
    for (const [k, n] of batch) {
      usage.remember(k, { after: after.get(k) ?? Number.MAX_SAFE_INTEGER, n, at });
      this.unsynced.add(k);
    }
    await this.syncWritten();
  }

  /**
   * A rebuild that read PostgreSQL before a write did not count it: checked after each flush, so a
   * process that stays idle after a flush still adds what it wrote (Redis away: retried at the next)
   */
  private async syncWritten(): Promise<void> {
    await Promise.all(
      [...this.unsynced].map(async (k) => {
        const [accountId, period] = k.split('|') as [string, string];
        try {
          await this.syncLocked(accountId, period);
          this.unsynced.delete(k);
        } catch {
          // stays in unsynced
        }
      }),
    );
  }
}

export function createQuotaStore(opts: QuotaStoreOptions): QuotaStore {
  return new LeasedQuotaStore(opts);
}
