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
 * Redis: `quota:{<account>}:<period>` is a hash {u: units used or held, e: epoch},
 * `rate:{<account>}:<minute>` a counter that expires after two minutes. The `{<account>}` hash tag
 * puts an account's two keys in one Redis Cluster slot (the lease and give-back scripts use both),
 * while different accounts spread over the cluster's slots. Successful calls are written
 * through to PostgreSQL (usage_monthly) in batches. When the month hash is missing (restart,
 * flush, eviction) the next lease rebuilds it — only if still missing, so a concurrent rebuild
 * cannot reset a live counter — from PostgreSQL's count + this process's successes not yet written
 * + its calls in flight + its unused credit, with a new epoch. Credit goes back only into the
 * counter of the epoch it was leased from, so units another process's rebuild did not count are
 * never subtracted. Rebuilds and write-throughs are serialised, so a batch in transit is counted
 * once.
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
  redis.call('HSET', KEYS[1], 'u', ARGV[1], 'e', ARGV[2])
  redis.call('EXPIRE', KEYS[1], ARGV[3])
end
return redis.call('HGET', KEYS[1], 'e')`;

const GIVE_BACK = `
if redis.call('HGET', KEYS[1], 'e') ~= ARGV[2] then return 0 end
if tonumber(ARGV[1]) > 0 then redis.call('HINCRBY', KEYS[1], 'u', -tonumber(ARGV[1])) end
if tonumber(ARGV[3]) > 0 and redis.call('EXISTS', KEYS[2]) == 1 then redis.call('DECRBY', KEYS[2], ARGV[3]) end
return 1`;

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
  stsInit(month: string, used: number, epoch: string, ttl: number): Promise<string>;
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
  if (!('stsLease' in opts.redis)) {
    opts.redis.defineCommand('stsLease', { numberOfKeys: 2, lua: LEASE });
    opts.redis.defineCommand('stsInit', { numberOfKeys: 1, lua: INIT });
    opts.redis.defineCommand('stsGiveBack', { numberOfKeys: 2, lua: GIVE_BACK });
  }
  const redis = opts.redis as RedisWithScripts;
  const leases = new Map<string, Lease>();
  // "account|period" → successful calls not yet in PostgreSQL
  let pending = new Map<string, number>();
  // "account|period" → units taken by calls that have not finished
  const inflight = new Map<string, number>();
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

  const rebuild = (l: Lease) =>
    serialised(async () => {
      const row = await db.usageMonthly.findUnique({
        where: { accountId_period: { accountId: l.accountId, period: l.period } },
        select: { used: true },
      });
      const k = l.key;
      const own = (row?.used ?? 0) + (pending.get(k) ?? 0) + (inflight.get(k) ?? 0) + l.credit;
      // the pre-hash-tag counter of this month, if an older gateway left one: never count less than it
      const legacy = Number((await redis.hget(legacyMonthKey(l.accountId, l.period), 'u').catch(() => null)) ?? 0);
      const used = Math.max(own, Number.isFinite(legacy) ? legacy : 0);
      const epoch = randomBytes(8).toString('hex');
      const stored = await redis.stsInit(monthKey(l.accountId, l.period), used, epoch, MONTH_TTL_SECONDS);
      // our credit is in the rebuilt counter only if our rebuild is the one that happened
      if (stored === epoch) l.epoch = epoch;
    });

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
    for (let attempt = 0; ; attempt++) {
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
        if (attempt >= 2) throw new Error('the quota counter could not be initialised');
        await rebuild(l);
        continue;
      }
      if (code !== 0) return { code: code as 1 | 2, monthUsed, minuteUsed };
      if (l.period !== period || l.minute !== minute) {
        // the window moved on while we waited: these units belong to a window no call will use
        giveBack({ ...l, period, minute, epoch }, n, n);
        return { code: 0, monthUsed, minuteUsed };
      }
      l.epoch = epoch;
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
        // kept past the longest call (UPSTREAM_TIMEOUT_MS ≤ 120 s), so a late release still finds its lease
        if (l.credit === 0 && now - l.lastUse > 300_000) leases.delete(id);
      }
    },
    Math.max(10, Math.floor(idleReturnMs / 2)),
  );
  sweeper.unref();

  async function writeBatch(batch: Map<string, number>): Promise<void> {
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
    await db.$executeRaw`
      WITH batch AS (
        SELECT a, p, n FROM unnest(${accountIds}::uuid[], ${periods}::text[], ${counts}::int[]) AS t(a, p, n)
      ), monthly AS (
        INSERT INTO usage_monthly (account_id, period, used, updated_at)
        SELECT a, p, n, now() FROM batch
        ON CONFLICT (account_id, period) DO UPDATE SET used = usage_monthly.used + EXCLUDED.used, updated_at = now()
      )
      INSERT INTO usage_daily (account_id, day, used, updated_at)
      SELECT a, ${day}::date, sum(n), now() FROM batch GROUP BY a
      ON CONFLICT (account_id, day) DO UPDATE SET used = usage_daily.used + EXCLUDED.used, updated_at = now()`;
  }

  const flush = () =>
    serialised(async () => {
      if (pending.size === 0) return;
      const batch = pending;
      pending = new Map();
      try {
        await writeBatch(batch);
      } catch (err) {
        // keep the counts for the next flush
        for (const [k, n] of batch) add(pending, k, n);
        throw err;
      }
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
