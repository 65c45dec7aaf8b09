/**
 * Monthly quota and per-minute limit in Redis, in ONE round trip per request: a Lua script checks
 * the minute and month counters and, when both allow it, reserves a unit of the month and counts
 * the minute. A failed call gives its unit back.
 *
 * The month counter holds successful calls plus reservations in flight. Successful calls are
 * written through to PostgreSQL (usage_monthly) in batches. When the counter is missing in Redis
 * (restart, flush, eviction) the next call re-initialises it (SET NX, so concurrent initialisations
 * cannot reset a live counter) to: PostgreSQL's count + this process's successes not yet written +
 * its reservations still in flight. Flushes and initialisations are serialised, so a batch being
 * written is never counted twice nor missed.
 */
import type { Redis } from 'ioredis';
import type { Db } from '@sts/db';

const ADMIT = `
local used = redis.call('GET', KEYS[1])
if not used then return {-1, 0, 0} end
used = tonumber(used)
local minute = tonumber(redis.call('GET', KEYS[2]) or '0')
if minute >= tonumber(ARGV[2]) then return {2, used, minute} end
if used >= tonumber(ARGV[1]) then return {1, used, minute} end
used = redis.call('INCR', KEYS[1])
minute = redis.call('INCR', KEYS[2])
if minute == 1 then redis.call('EXPIRE', KEYS[2], 120) end
return {0, used, minute}`;

const RELEASE = `if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('DECR', KEYS[1]) else return -1 end`;

export type AdmitOutcome = 'ok' | 'quota_exceeded' | 'rate_limited';
export type AdmitResult = { outcome: AdmitOutcome; monthUsed: number; minuteUsed: number };

export interface QuotaStore {
  /**
   * Admits one call against the per-minute limit and the monthly quota. On 'ok' one unit is
   * reserved: settle it with succeeded() or release().
   */
  admit(
    accountId: string,
    period: string,
    minute: number,
    monthlyQuota: number,
    perMinute: number,
  ): Promise<AdmitResult>;
  /** gives back the unit reserved for a call that did not succeed */
  release(accountId: string, period: string): Promise<void>;
  /** keeps the reserved unit of a successful call and queues it for the write-through */
  succeeded(accountId: string, period: string): void;
  /** writes the pending successful calls to usage_monthly */
  flush(): Promise<void>;
}

type RedisWithScripts = Redis & {
  stsAdmit(k1: string, k2: string, quota: number, perMinute: number): Promise<[number, number, number]>;
  stsRelease(k1: string): Promise<number>;
};

export const monthKey = (accountId: string, period: string) => `quota:${accountId}:${period}`;
export const minuteKey = (accountId: string, minute: number) => `rate:${accountId}:${minute}`;
/** the month counter outlives its month */
const MONTH_TTL_SECONDS = 40 * 24 * 3600;

function add(map: Map<string, number>, key: string, n: number): void {
  const v = (map.get(key) ?? 0) + n;
  if (v === 0) map.delete(key);
  else map.set(key, v);
}

export function createQuotaStore(opts: { db: Db; redis: Redis }): QuotaStore {
  const { db } = opts;
  if (!('stsAdmit' in opts.redis)) {
    opts.redis.defineCommand('stsAdmit', { numberOfKeys: 2, lua: ADMIT });
    opts.redis.defineCommand('stsRelease', { numberOfKeys: 1, lua: RELEASE });
  }
  const redis = opts.redis as RedisWithScripts;
  // "account|period" → successful calls not yet in PostgreSQL
  let pending = new Map<string, number>();
  // "account|period" → reservations whose call has not finished (or whose release is in flight)
  const inflight = new Map<string, number>();
  // flush and initialise run one at a time
  let exclusive: Promise<unknown> = Promise.resolve();
  const serialised = <T>(fn: () => Promise<T>): Promise<T> => {
    const run = exclusive.then(fn, fn);
    exclusive = run.catch(() => undefined);
    return run;
  };

  const initialise = (accountId: string, period: string) =>
    serialised(async () => {
      const row = await db.usageMonthly.findUnique({
        where: { accountId_period: { accountId, period } },
        select: { used: true },
      });
      const k = `${accountId}|${period}`;
      const used = (row?.used ?? 0) + (pending.get(k) ?? 0) + (inflight.get(k) ?? 0);
      await redis.set(monthKey(accountId, period), used, 'EX', MONTH_TTL_SECONDS, 'NX');
    });

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
    await db.$executeRaw`
      INSERT INTO usage_monthly (account_id, period, used, updated_at)
      SELECT a, p, n, now() FROM unnest(${accountIds}::uuid[], ${periods}::text[], ${counts}::int[]) AS t(a, p, n)
      ON CONFLICT (account_id, period) DO UPDATE SET used = usage_monthly.used + EXCLUDED.used, updated_at = now()`;
  }

  return {
    async admit(accountId, period, minute, monthlyQuota, perMinute) {
      for (let attempt = 0; ; attempt++) {
        const [code, monthUsed, minuteUsed] = await redis.stsAdmit(
          monthKey(accountId, period),
          minuteKey(accountId, minute),
          monthlyQuota,
          perMinute,
        );
        if (code === -1) {
          if (attempt >= 2) throw new Error('the quota counter could not be initialised');
          await initialise(accountId, period);
          continue;
        }
        if (code === 0) add(inflight, `${accountId}|${period}`, 1);
        return { outcome: code === 0 ? 'ok' : code === 1 ? 'quota_exceeded' : 'rate_limited', monthUsed, minuteUsed };
      }
    },
    async release(accountId, period) {
      // the unit stays "in flight" until Redis has it back: an initialisation meanwhile counts it
      // (errs towards refusing one call rather than allowing one too many)
      try {
        await redis.stsRelease(monthKey(accountId, period));
      } finally {
        add(inflight, `${accountId}|${period}`, -1);
      }
    },
    succeeded(accountId, period) {
      const k = `${accountId}|${period}`;
      add(inflight, k, -1);
      add(pending, k, 1);
    },
    flush: () =>
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
      }),
  };
}
