/**
 * Monthly quota and per-minute limit, leased: each gateway process takes blocks of units from
 * Redis with one atomic Lua call and admits calls from that local credit synchronously, so a busy
 * account costs a Redis round trip per block, not per call (a round trip per call was a third of
 * the gateway's CPU per call; see the README's benchmark).
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

const LEASE = `
local u = redis.call('HGET', KEYS[1], 'u')
if not u then return {-1, 0, 0, '', 0} end
local e = redis.call('HGET', KEYS[1], 'e')
-- rebuilt a moment ago: nothing is granted until the other processes have added their units
local g = redis.call('HGET', KEYS[1], 'g')
if g then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if now < tonumber(g) then return {3, tonumber(u), 0, e, tonumber(g) - now} end
  redis.call('HDEL', KEYS[1], 'g')
end
-- month units this process holds without minute units come back first (same epoch only)
if tonumber(ARGV[4]) > 0 and e == ARGV[5] then u = redis.call('HINCRBY', KEYS[1], 'u', -tonumber(ARGV[4])) end
u = tonumber(u)
local m = tonumber(redis.call('GET', KEYS[2]) or '0')
local q = tonumber(ARGV[2])
local pm = tonumber(ARGV[3])
if m >= pm then return {2, u, m, e, 0} end
if u >= q then return {1, u, m, e, 0} end
local rem = math.min(q - u, pm - m)
local n = math.min(tonumber(ARGV[1]), math.max(1, math.floor(rem / 4)))
u = redis.call('HINCRBY', KEYS[1], 'u', n)
m = redis.call('INCRBY', KEYS[2], n)
if m == n then redis.call('EXPIRE', KEYS[2], 120) end
return {0, u, m, e, n}`;

const INIT = `
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'u', ARGV[1], 'e', ARGV[2], 'b', ARGV[4])
  redis.call('EXPIRE', KEYS[1], ARGV[3])
  if tonumber(ARGV[5]) > 0 then
    local t = redis.call('TIME')
    redis.call('HSET', KEYS[1], 'g', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[5]))
  end
end
return redis.call('HGET', KEYS[1], 'e')`;

const GIVE_BACK = `
if redis.call('HGET', KEYS[1], 'e') ~= ARGV[2] then return 0 end
if tonumber(ARGV[1]) > 0 then redis.call('HINCRBY', KEYS[1], 'u', -tonumber(ARGV[1])) end
if tonumber(ARGV[3]) > 0 and redis.call('EXISTS', KEYS[2]) == 1 then redis.call('DECRBY', KEYS[2], ARGV[3]) end
return 1`;

/**
 * ARGV: the epoch this process's outstanding units are counted in, the epoch it wants to add to
 * ('' = only look), the units to add. {-1} the counter is missing; {0} it is ours; {1, e, b} it is
 * another epoch (b: the usage_monthly count its rebuild read, -1 if not recorded); {2, e} added.
 */
const SYNC = `
local e = redis.call('HGET', KEYS[1], 'e')
if not e then return {-1, '', 0} end
if e == ARGV[1] then return {0, e, 0} end
if e ~= ARGV[2] then return {1, e, tonumber(redis.call('HGET', KEYS[1], 'b') or '-1')} end
if tonumber(ARGV[3]) > 0 then redis.call('HINCRBY', KEYS[1], 'u', tonumber(ARGV[3])) end
return {2, e, 0}`;

export type AdmitOutcome = 'ok' | 'quota_exceeded' | 'rate_limited';
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
/**
 * The month counter's name before the hash tag (versions before REDIS_MODE). A rebuild reads it
 * once, so an upgrade in place keeps counting what the old gateways admitted but had not yet
 * written to PostgreSQL (README, "Upgrading"). Remove after a release: it only matters in the
 * month of the upgrade.
 */
export const legacyMonthKey = (accountId: string, period: string) => `quota:${accountId}:${period}`;
/** the month counter outlives its month */
const MONTH_TTL_SECONDS = 40 * 24 * 3600;

type RedisWithScripts = RedisClient & {
  stsLease(
    month: string,
    minute: string,
    want: number,
    quota: number,
    perMinute: number,
    monthBack: number,
    epoch: string,
  ): Promise<[number, number, number, string, number]>;
  stsInit(month: string, used: number, epoch: string, ttl: number, base: number, graceMs: number): Promise<string>;
  stsSync(month: string, mine: string, target: string, units: number): Promise<[number, string, number]>;
  stsGiveBack(month: string, minute: string, monthUnits: number, epoch: string, minuteUnits: number): Promise<number>;
};

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

type LeaseResult = { code: 0 | 1 | 2; monthUsed: number; minuteUsed: number };

function add(map: Map<string, number>, key: string, n: number): void {
  const v = (map.get(key) ?? 0) + n;
  if (v === 0) map.delete(key);
  else map.set(key, v);
}

// eslint-disable-next-line max-lines-per-function -- a factory of closures (lease, acquire, give back, flush; each under 60 lines) over the same lease map, Redis and flush state, which must stay private to keep the counts exact
export function createQuotaStore(opts: QuotaStoreOptions): QuotaStore {
  const { db } = opts;
  const leaseMs = opts.leaseMs ?? 50;
  const idleReturnMs = opts.idleReturnMs ?? 250;
  const maxBlock = opts.maxBlock ?? 1000;
  const rebuildGraceMs = opts.rebuildGraceMs ?? 1000;
  // a process checks the epoch of every month it has outstanding units in at least this often
  const checkMs = Math.min(idleReturnMs, Math.floor(rebuildGraceMs / 4));
  if (!('stsLease' in opts.redis)) {
    opts.redis.defineCommand('stsLease', { numberOfKeys: 2, lua: LEASE });
    opts.redis.defineCommand('stsInit', { numberOfKeys: 1, lua: INIT });
    opts.redis.defineCommand('stsGiveBack', { numberOfKeys: 2, lua: GIVE_BACK });
    opts.redis.defineCommand('stsSync', { numberOfKeys: 1, lua: SYNC });
  }
  const redis = opts.redis as RedisWithScripts;
  const leases = new Map<string, Lease>();
  // "account|period" → successful calls not yet in PostgreSQL
  let pending = new Map<string, number>();
  // "account|period" → units taken by calls that have not finished
  const inflight = new Map<string, number>();
  // "account|period" → recent write-throughs: usage_monthly's count right after the write, units
  const written = new Map<string, { after: number; n: number; at: number }[]>();
  // "account|period" written through but not yet checked against the counter's epoch (Redis away)
  const unsynced = new Set<string>();
  // the batch being written through
  let transit = new Map<string, number>();
  let closed = false;
  // flush and rebuild run one at a time
  let exclusive: Promise<unknown> = Promise.resolve();
  const serialised = <T>(fn: () => Promise<T>): Promise<T> => {
    const run = exclusive.then(fn, fn);
    exclusive = run.catch(() => undefined);
    return run;
  };
  // gives back in flight, so close() can wait for them
  const givingBack = new Set<Promise<unknown>>();

  /**
   * returns `month` units to `l`'s month counter and `minute` units to the counter of `l`'s minute
   * (while that key lives; for a minute that is over this changes nothing that matters)
   */
  function giveBack(l: Lease, month: number, minute: number): void {
    if (month <= 0 && minute <= 0) return;
    const p = redis
      .stsGiveBack(monthKey(l.accountId, l.period), minuteKey(l.accountId, l.minute), month, l.epoch, minute)
      // 0: the counter was rebuilt; what this process still has outstanding is added to it now
      .then((r) => (r === 0 && !closed ? serialised(() => syncLocked(l.accountId, l.period)) : undefined))
      .catch(() => undefined) // Redis away: the units stay counted (errs towards refusing, never over-admitting)
      .finally(() => givingBack.delete(p));
    givingBack.add(p);
  }

  /** a call can be admitted from credit: a month unit and a minute unit are both held */
  const canTake = (l: Lease) => l.credit > 0 && l.minuteCredit > 0;

  /** the call's window differs from the lease's: its old credit goes back, the lease moves on */
  function moveTo(l: Lease, period: string, minute: number): void {
    if (l.period === period) giveBack(l, l.credit, l.minuteCredit);
    // a new month: the old month's credit is left counted there (that month is over)
    l.credit = 0;
    l.minuteCredit = 0;
    l.period = period;
    l.key = `${l.accountId}|${period}`;
    l.minute = minute;
    l.block = Math.max(1, l.block >> 1);
  }

  function take(l: Lease, now: number): Admission {
    l.credit--;
    l.minuteCredit--;
    l.lastUse = now;
    add(inflight, l.key, 1);
    return { outcome: 'ok', monthUsed: l.monthUsed - l.credit, minuteUsed: l.minuteUsed - l.minuteCredit };
  }

  /**
   * The units of `l`'s month this process owes the counter: successes not yet written, a batch being
   * written, calls in flight, credit held. (Inside `serialised` no batch is in transit.)
   */
  const outstanding = (l: Lease) =>
    (pending.get(l.key) ?? 0) + (transit.get(l.key) ?? 0) + (inflight.get(l.key) ?? 0) + l.credit;

  const rebuild = (l: Lease) => serialised(() => rebuildLocked(l));

  /** rebuilds the missing month counter; the caller holds `serialised` */
  async function rebuildLocked(l: Lease): Promise<void> {
    const row = await db.usageMonthly.findUnique({
      where: { accountId_period: { accountId: l.accountId, period: l.period } },
      select: { used: true },
    });
    const own = (row?.used ?? 0) + outstanding(l);
    // the pre-hash-tag counter of this month, if an older gateway left one: never count less than it
    const legacy = Number((await redis.hget(legacyMonthKey(l.accountId, l.period), 'u').catch(() => null)) ?? 0);
    const used = Math.max(own, Number.isFinite(legacy) ? legacy : 0);
    const epoch = randomBytes(8).toString('hex');
    const base = row?.used ?? 0;
    // a grace period unless nobody can hold units of this month yet (no write-through, nothing of ours)
    const grace = row === null && own === 0 && used === 0 ? 0 : rebuildGraceMs;
    const stored = await redis.stsInit(monthKey(l.accountId, l.period), used, epoch, MONTH_TTL_SECONDS, base, grace);
    // our credit is in the rebuilt counter only if our rebuild is the one that happened
    if (stored === epoch) l.epoch = epoch;
  }

  /** write-throughs younger than this are kept to compensate a rebuild that read PostgreSQL before them */
  const WRITTEN_KEEP_MS = 60_000;
  function recentWrites(k: string): { after: number; n: number; at: number }[] {
    const list = written.get(k);
    if (list === undefined) return [];
    const from = Date.now() - WRITTEN_KEEP_MS;
    while (list.length > 0 && list[0]!.at < from) list.shift();
    if (list.length === 0) written.delete(k);
    return list;
  }

  /**
   * After a rebuild by another process: adds this process's outstanding units of the account's month
   * (successes not yet written + calls in flight + credit held + write-throughs the rebuild's read of
   * PostgreSQL did not see) to the new counter, once, and moves them to its epoch; a missing counter
   * is rebuilt. `seen`: the epoch a lease just saw (nothing outstanding: adopted without a round
   * trip). Returns the epoch they are counted in now (null: not this lease's month). The caller holds
   * `serialised` (write-throughs and rebuilds cannot interleave).
   */
  async function syncLocked(accountId: string, period: string, seen?: string): Promise<string | null> {
    const l = leases.get(accountId);
    if (l === undefined || l.period !== period) return null; // a month that is over, or nothing held
    const k = l.key;
    let target = '';
    let add = 0;
    for (let attempt = 0; attempt < 5; attempt++) {
      if (seen !== undefined && seen !== l.epoch && outstanding(l) === 0 && recentWrites(k).length === 0) {
        l.epoch = seen; // nothing outstanding: nothing to add
        return seen;
      }
      const [code, e, base] = await redis.stsSync(monthKey(accountId, period), l.epoch, target, add);
      if (code === 0 || code === 2) {
        l.epoch = e;
        l.checkedAt = Date.now();
        return e;
      }
      if (code === -1) {
        // missing (e.g. the write-through of an idle process right after a flush): rebuild it now,
        // from a read of PostgreSQL that includes our writes
        await rebuildLocked(l);
        target = '';
        add = 0;
        continue;
      }
      target = e;
      add = outstanding(l);
      for (const w of recentWrites(k)) if (base < 0 || w.after > base) add += w.n;
    }
    throw new Error('the quota counter kept changing');
  }

  async function lease(l: Lease, quota: number, perMinute: number): Promise<LeaseResult> {
    const now = Date.now();
    // demand: a block that lasted less than leaseMs doubles, one that lasted far longer halves
    if (l.leasedAt > 0) {
      const lasted = now - l.leasedAt;
      if (lasted < leaseMs) l.block = Math.min(maxBlock, l.block * 2);
      else if (lasted > 8 * leaseMs) l.block = Math.max(1, l.block >> 1);
    }
    const want = closed ? Math.max(1, l.waiters) : Math.max(l.block, l.waiters);
    const period = l.period;
    const minute = l.minute;
    for (let rebuilds = 0; ;) {
      // month units held without a minute unit (failed calls gave them back) go back in the lease
      const back = l.minuteCredit === 0 ? l.credit : 0;
      l.credit -= back;
      let result: [number, number, number, string, number];
      try {
        result = await redis.stsLease(
          monthKey(l.accountId, period),
          minuteKey(l.accountId, minute),
          want,
          quota,
          perMinute,
          back,
          l.epoch,
        );
      } catch (err) {
        l.credit += back; // not given back: still ours
        throw err;
      }
      const [code, monthUsed, minuteUsed, epoch, n] = result;
      if (code === -1) {
        l.credit += back; // the counter was missing: nothing was given back
        if (rebuilds++ >= 2) throw new Error('the quota counter could not be initialised');
        await rebuild(l);
        continue;
      }
      if (code === 3) l.credit += back; // in a grace period nothing is given back either
      l.checkedAt = Date.now();
      if (epoch !== l.epoch && l.period === period) {
        const k = l.key;
        if (outstanding(l) === 0 && recentWrites(k).length === 0) l.epoch = epoch;
        else {
          // another process rebuilt the counter: our outstanding units go into it first
          const now = await serialised(() => syncLocked(l.accountId, period, epoch));
          // rebuilt again meanwhile (or the window moved on): these units are gone, lease again
          if (code === 0 && now !== epoch) {
            if (now === null) return { code: 0, monthUsed, minuteUsed };
            continue;
          }
        }
      }
      if (code === 3) {
        // the counter was rebuilt a moment ago: wait until the other processes have added their units
        await new Promise((r) => setTimeout(r, Math.min(n, rebuildGraceMs) + 1));
        continue;
      }
      if (code !== 0) return { code: code as 1 | 2, monthUsed, minuteUsed };
      if (l.period !== period || l.minute !== minute) {
        // the window moved on while we waited: these units belong to a window no call will use
        giveBack({ ...l, period, minute, epoch }, n, n);
        return { code: 0, monthUsed, minuteUsed };
      }
      l.credit += n;
      l.minuteCredit += n;
      l.monthUsed = monthUsed;
      l.minuteUsed = minuteUsed;
      l.leasedAt = Date.now();
      return { code: 0, monthUsed, minuteUsed };
    }
  }

  async function acquire(l: Lease, quota: number, perMinute: number): Promise<Admission> {
    for (;;) {
      l.waiters++;
      let result: LeaseResult;
      try {
        if (l.pending === null) {
          const p = lease(l, quota, perMinute).finally(() => {
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
      if (canTake(l)) return take(l, Date.now());
      // others took this block first: lease again
    }
  }

  // unused credit goes back to Redis; long-idle leases are forgotten
  const sweeper = setInterval(
    () => {
      const now = Date.now();
      for (const [id, l] of leases) {
        if (l.pending !== null) continue;
        if (l.credit > 0 && now - l.lastUse >= idleReturnMs) {
          giveBack(l, l.credit, l.minuteCredit);
          l.credit = 0;
          l.minuteCredit = 0;
          l.block = Math.max(1, l.block >> 1);
        }
        // the epoch of what this process has outstanding is checked often enough that a rebuild by
        // another process hears of it within its grace period
        if (!l.checking && now - l.checkedAt >= checkMs && outstanding(l) > 0) {
          l.checking = true;
          void serialised(() => syncLocked(l.accountId, l.period))
            .catch(() => undefined) // Redis away: checked again at the next round
            .finally(() => {
              l.checking = false;
              l.checkedAt = Date.now();
            });
        }
        // kept past the longest call (UPSTREAM_TIMEOUT_MS ≤ 120 s), so a late release still finds its lease
        if (l.credit === 0 && now - l.lastUse > 300_000) leases.delete(id);
      }
    },
    Math.max(10, Math.floor(Math.min(idleReturnMs, checkMs) / 2)),
  );
  sweeper.unref();

  /** writes a batch; returns usage_monthly's count of each key right after it */
  async function writeBatch(batch: Map<string, number>): Promise<Map<string, number>> {
    const accountIds: string[] = [];
    const periods: string[] = [];
    const counts: number[] = [];
    for (const [k, n] of batch) {
      const [accountId, period] = k.split('|') as [string, string];
      accountIds.push(accountId);
      periods.push(period);
      counts.push(n);
    }
    const day = new Date((opts.now ?? Date.now)()).toISOString().slice(0, 10);
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

  const flush = () =>
    serialised(async () => {
      if (pending.size === 0 && unsynced.size === 0) return;
      const batch = pending;
      pending = new Map();
      transit = batch;
      let after = new Map<string, number>();
      try {
        if (batch.size > 0) after = await writeBatch(batch);
      } catch (err) {
        // keep the counts for the next flush
        for (const [k, n] of batch) add(pending, k, n);
        throw err;
      } finally {
        transit = new Map();
      }
      const at = Date.now();
      for (const [k, n] of batch) {
        const list = written.get(k) ?? [];
        list.push({ after: after.get(k) ?? Number.MAX_SAFE_INTEGER, n, at });
        written.set(k, list);
        unsynced.add(k);
      }
      // a rebuild that read PostgreSQL before this write did not count it: checked now, so a process
      // that stays idle after a flush still adds what it wrote (Redis away: retried at the next flush)
      await Promise.all(
        [...unsynced].map(async (k) => {
          const [accountId, period] = k.split('|') as [string, string];
          try {
            await syncLocked(accountId, period);
            unsynced.delete(k);
          } catch {
            // stays in unsynced
          }
        }),
      );
    });

  return {
    admit(accountId, period, minute, monthlyQuota, perMinute) {
      let l = leases.get(accountId);
      if (l === undefined) {
        l = {
          accountId,
          period,
          key: `${accountId}|${period}`,
          minute,
          credit: 0,
          minuteCredit: 0,
          epoch: '',
          monthUsed: 0,
          minuteUsed: 0,
          lastUse: Date.now(),
          leasedAt: 0,
          checkedAt: Date.now(),
          checking: false,
          block: 1,
          waiters: 0,
          pending: null,
        };
        leases.set(accountId, l);
      } else if (l.minute !== minute || l.period !== period) moveTo(l, period, minute);
      if (canTake(l)) return take(l, Date.now());
      return acquire(l, monthlyQuota, perMinute);
    },
    release(accountId, period, minute) {
      const l = leases.get(accountId);
      add(inflight, l?.period === period ? l.key : `${accountId}|${period}`, -1);
      if (l === undefined || l.period !== period) return; // a month that is over: nothing to give back
      // the month unit goes back; the minute keeps counting the call
      if (l.minute === minute && !closed) l.credit++;
      else giveBack(l, 1, 0);
    },
    succeeded(accountId, period) {
      const l = leases.get(accountId);
      const k = l?.period === period ? l.key : `${accountId}|${period}`;
      add(inflight, k, -1);
      add(pending, k, 1);
    },
    flush,
    async close() {
      closed = true;
      clearInterval(sweeper);
      for (const l of leases.values()) {
        giveBack(l, l.credit, l.minuteCredit);
        l.credit = 0;
        l.minuteCredit = 0;
      }
      await Promise.all([...givingBack]);
      await flush();
    },
  };
}
