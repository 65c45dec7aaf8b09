/**
 * The governor's Redis scripts (one hash per endpoint family: limit, remaining, reset (epoch ms),
 * est (1 while the reset is this fleet's estimate, not X's), blocked (epoch ms a 429 stops the
 * family until)). Each runs atomically, so every replica sees one budget.
 */

/**
 * KEYS[1] family hash; ARGV: now ms, default limit, window ms, reserve (requests a low-priority
 * call must leave), priority. Returns {1, remaining} or {0, retry-after ms}.
 */
export const ACQUIRE_LUA = `
local h = redis.call('HMGET', KEYS[1], 'limit', 'remaining', 'reset', 'blocked', 'est')
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[3])
local limit = tonumber(h[1]) or tonumber(ARGV[2])
local remaining = tonumber(h[2])
local reset = tonumber(h[3]) or 0
local blocked = tonumber(h[4]) or 0
local est = tonumber(h[5]) or 0
if blocked > now then return {0, blocked - now} end
if remaining == nil or reset <= now then
  remaining = limit
  reset = now + window
  est = 1
end
local keep = 0
if ARGV[5] == 'low' then keep = tonumber(ARGV[4]) end
local ok = 0
if remaining > keep then
  remaining = remaining - 1
  ok = 1
end
redis.call('HSET', KEYS[1], 'limit', limit, 'remaining', remaining, 'reset', reset, 'est', est)
redis.call('PEXPIRE', KEYS[1], reset - now + window)
if ok == 1 then return {1, remaining} end
return {0, reset - now}
`;

/**
 * KEYS[1] family hash; ARGV: now ms, status, limit, remaining, reset ms ('' when X sent no
 * headers), window ms, block ms (a 429 without a reset). A 429 blocks the family until its reset;
 * headers of the current window lower the budget (never raise it: calls this fleet has in flight
 * are not counted by X yet), those of a newer window replace it, those of an older one are late.
 */
export const OBSERVE_LUA = `
local now = tonumber(ARGV[1])
local status = tonumber(ARGV[2])
local hlimit = tonumber(ARGV[3])
local hrem = tonumber(ARGV[4])
local hreset = tonumber(ARGV[5])
local window = tonumber(ARGV[6])
if status == 429 then
  local untilMs = now + tonumber(ARGV[7])
  if hreset and hreset > now then untilMs = hreset end
  redis.call('HSET', KEYS[1], 'blocked', untilMs, 'remaining', 0, 'reset', untilMs, 'est', 0)
  if hlimit then redis.call('HSET', KEYS[1], 'limit', hlimit) end
  redis.call('PEXPIRE', KEYS[1], untilMs - now + window)
  return 1
end
if not (hlimit and hrem and hreset) then return 0 end
local h = redis.call('HMGET', KEYS[1], 'remaining', 'reset', 'est')
local srem = tonumber(h[1])
local sreset = tonumber(h[2]) or 0
local est = tonumber(h[3]) or 0
if srem == nil then
  srem = hrem
elseif est == 1 then
  srem = math.min(srem, hrem)
elseif hreset > sreset + 1000 then
  srem = hrem
elseif hreset < sreset - 1000 then
  return 0
else
  srem = math.min(srem, hrem)
end
redis.call('HSET', KEYS[1], 'limit', hlimit, 'remaining', srem, 'reset', hreset, 'est', 0)
local ttl = hreset - now + window
if ttl < window then ttl = window end
redis.call('PEXPIRE', KEYS[1], ttl)
return 1
`;
