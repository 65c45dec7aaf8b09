/**
 * The leased quota's Redis scripts (see leasedQuota.ts for the protocol they implement), each one
 * atomic call. Keys: KEYS[1] the month hash `quota:{<account>}:<period>` {u, e, b, g}, KEYS[2] the
 * minute counter `rate:{<account>}:<minute>`.
 */
import type { RedisClient } from '@sts/common';

/**
 * ARGV: wanted units, monthly quota, per-minute limit, month units given back first, the epoch they
 * are counted in. Returns {code, month used, minute used, epoch, granted units | grace ms left}:
 * -1 the counter is missing, 0 granted, 1 quota exceeded, 2 rate limited, 3 in a rebuild's grace.
 */
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

/** ARGV: used, epoch, ttl seconds, usage_monthly's count read, grace ms. Creates the hash only if missing. */
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

/** ARGV: month units, epoch, minute units. 0: the counter is of another epoch (nothing given back). */
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

/**
 * One unit of the month only (no minute unit): the stream's per-event charge. ARGV: monthly quota.
 * Returns {code, month used, epoch, grace ms left}: -1 the counter is missing, 0 taken, 1 quota
 * exceeded, 3 in a rebuild's grace (nothing taken but on 0).
 */
const CHARGE_MONTH = `
local u = redis.call('HGET', KEYS[1], 'u')
if not u then return {-1, 0, '', 0} end
local e = redis.call('HGET', KEYS[1], 'e')
local g = redis.call('HGET', KEYS[1], 'g')
if g then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if now < tonumber(g) then return {3, tonumber(u), e, tonumber(g) - now} end
  redis.call('HDEL', KEYS[1], 'g')
end
if tonumber(u) >= tonumber(ARGV[1]) then return {1, tonumber(u), e, 0} end
return {0, redis.call('HINCRBY', KEYS[1], 'u', 1), e, 0}`;

export type ChargeMonthReply = [code: number, monthUsed: number, epoch: string, graceMs: number];

export type LeaseReply = [code: number, monthUsed: number, minuteUsed: number, epoch: string, n: number];

export type RedisWithScripts = RedisClient & {
  stsLease(
    month: string,
    minute: string,
    want: number,
    quota: number,
    perMinute: number,
    monthBack: number,
    epoch: string,
  ): Promise<LeaseReply>;
  stsInit(month: string, used: number, epoch: string, ttl: number, base: number, graceMs: number): Promise<string>;
  stsSync(month: string, mine: string, target: string, units: number): Promise<[number, string, number]>;
  stsGiveBack(month: string, minute: string, monthUnits: number, epoch: string, minuteUnits: number): Promise<number>;
  stsChargeMonth(month: string, quota: number): Promise<ChargeMonthReply>;
};

/** defines the scripts on the client once (a client shared by several stores keeps the first definition) */
export function withQuotaScripts(redis: RedisClient): RedisWithScripts {
  if (!('stsLease' in redis)) {
    redis.defineCommand('stsLease', { numberOfKeys: 2, lua: LEASE });
    redis.defineCommand('stsInit', { numberOfKeys: 1, lua: INIT });
    redis.defineCommand('stsGiveBack', { numberOfKeys: 2, lua: GIVE_BACK });
    redis.defineCommand('stsSync', { numberOfKeys: 1, lua: SYNC });
  }
  if (!('stsChargeMonth' in redis)) redis.defineCommand('stsChargeMonth', { numberOfKeys: 1, lua: CHARGE_MONTH });
  return redis as RedisWithScripts;
}
