/**
 * Monthly quota and per-minute limit in Redis, in ONE round trip per request: a Lua script checks
 * the minute and month counters and, when both allow it, reserves a unit of the month and counts
 * the minute. A failed call gives its unit back. Successful calls are written through to
 * PostgreSQL (usage_monthly) in batches; when the month counter is missing in Redis (restart,
 * flush, eviction) it is re-initialised from PostgreSQL plus what this process has not flushed.
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

export type AdmitResult = { outcome: 'ok' | 'quota_exceeded' | 'rate_limited'; monthUsed: number; minuteUsed: number };

export interface QuotaStore {
  admit(
    accountId: string,
    period: string,
    minute: number,
    monthlyQuota: number,
    perMinute: number,
  ): Promise<AdmitResult>;
  /** gives back the unit reserved for a call that did not succeed */
  release(accountId: string, period: string): Promise<void>;
  /** counts a successful call for the write-through to PostgreSQL */
  succeeded(accountId: string, period: string): void;
  /** writes the pending successful calls to usage_monthly */
  flush(): Promise<void>;
}

type RedisWithScripts = Redis & {
  stsAdmit(k1: string, k2: string, quota: number, perMinute: number): Promise<[number, number, number]>;
  stsRelease(k1: string): Promise<number>;
};

const monthKey = (accountId: string, period: string) => `quota:${accountId}:${period}`;
const minuteKey = (accountId: string, minute: number) => `rate:${accountId}:${minute}`;

export function createQuotaStore(opts: { db: Db; redis: Redis }): QuotaStore {
  const { db } = opts;
  if (!('stsAdmit' in opts.redis)) {
    opts.redis.defineCommand('stsAdmit', { numberOfKeys: 2, lua: ADMIT });
    opts.redis.defineCommand('stsRelease', { numberOfKeys: 1, lua: RELEASE });
  }
  const redis = opts.redis as RedisWithScripts;
  // account|period → successful calls not yet in PostgreSQL
  let pending = new Map<string, number>();
  let flushing: Promise<void> | undefined;

  async function initialise(accountId: string, period: string): Promise<void> {
    const row = await db.usageMonthly.findUnique({
      where: { accountId_period: { accountId, period } },
      select: { used: true },
    });
    const used = (row?.used ?? 0) + (pending.get(`${accountId}|${period}`) ?? 0);
    // 40 days: outlives the month; NX so a concurrent initialisation does not reset a live count
    await redis.set(monthKey(accountId, period), used, 'EX', 40 * 24 * 3600, 'NX');
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
        if (code === -1 && attempt < 2) {
          await initialise(accountId, period);
          continue;
        }
        if (code === -1) throw new Error('quota counter could not be initialised');
        return { outcome: code === 0 ? 'ok' : code === 1 ? 'quota_exceeded' : 'rate_limited', monthUsed, minuteUsed };
      }
    },
    async release(accountId, period) {
      await redis.stsRelease(monthKey(accountId, period));
    },
    succeeded(accountId, period) {
      const k = `${accountId}|${period}`;
      pending.set(k, (pending.get(k) ?? 0) + 1);
    },
    async flush() {
      if (flushing) return flushing;
      if (pending.size === 0) return;
      const batch = pending;
      pending = new Map();
      flushing = (async () => {
        try {
          const entries = [...batch.entries()].map(([k, n]) => {
            const [accountId, period] = k.split('|') as [string, string];
            return { accountId, period, n };
          });
          await db.$executeRaw`
            INSERT INTO usage_monthly (account_id, period, used, updated_at)
            SELECT * , now() FROM unnest(${entries.map((e) => e.accountId)}::uuid[], ${entries.map((e) => e.period)}::text[], ${entries.map((e) => e.n)}::int[])
            ON CONFLICT (account_id, period) DO UPDATE SET used = usage_monthly.used + EXCLUDED.used, updated_at = now()`;
        } catch (err) {
          // keep the counts for the next flush
          for (const [k, n] of batch) pending.set(k, (pending.get(k) ?? 0) + n);
          throw err;
        } finally {
          flushing = undefined;
        }
      })();
      return flushing;
    },
  };
}
