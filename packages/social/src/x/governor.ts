/**
 * The X rate-limit governor: one budget per endpoint family for the whole fleet, in Redis.
 *
 * Every X call asks `tryAcquire(family, priority)` first and reports its answer with `observe`.
 * The budget starts from the family's default limit (Pro-like) and is then fed by X's
 * `x-rate-limit-limit/remaining/reset` headers, so the fleet never sends a request the budget says
 * X would refuse. A 429 anyway (another app on the same token) stops the family until its reset.
 * Low-priority calls (Free targets) leave a reserve of each window to high-priority ones
 * (Starter/trial polls, read-api reads), so when the budget is short Free polls stretch first.
 */
import type { RedisClient } from '@sts/common';
import { ACQUIRE_LUA, OBSERVE_LUA } from './governorScript';

export type XFamily = 'users' | 'timeline' | 'search' | 'tweets' | 'stream_connect' | 'rules';
export const X_FAMILIES: readonly XFamily[] = ['users', 'timeline', 'search', 'tweets', 'stream_connect', 'rules'];
export type XPriority = 'high' | 'low';

/** Requests per 15-minute window assumed until X's headers say otherwise (X API Pro, app auth). */
export const X_DEFAULT_LIMITS: Readonly<Record<XFamily, number>> = {
  users: 300,
  timeline: 1500,
  search: 450,
  tweets: 450,
  stream_connect: 50,
  rules: 450,
};

export const X_WINDOW_MS = 15 * 60_000;

/**
 * X_RATE_LIMITS: `family=requests` pairs, comma-separated (`timeline=1500,search=450`), the
 * tier's limits per 15-minute window assumed before X's headers tell them. An error message for
 * a bad value.
 */
export function parseRateLimits(value: string): Partial<Record<XFamily, number>> | string {
  const out: Partial<Record<XFamily, number>> = {};
  for (const part of value
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const m = /^([a-z_]+)=([0-9]{1,7})$/.exec(part);
    if (!m) return `"${part}" is not family=number`;
    const family = m[1] as XFamily;
    if (!X_FAMILIES.includes(family)) return `unknown family "${m[1]}" (expected ${X_FAMILIES.join(', ')})`;
    const n = Number(m[2]);
    if (n < 1) return `${family} must be at least 1`;
    out[family] = n;
  }
  return out;
}

export type XAcquireResult = { ok: true } | { ok: false; retryAfterMs: number };

export interface XObservation {
  status: number;
  /** the answer's headers: a plain record (axios, node:http) or fetch's Headers */
  headers: Record<string, unknown> | { get(name: string): string | null };
}

export interface XBudget {
  limit: number;
  remaining: number;
  /** epoch ms when the window ends */
  resetAt: number;
  blockedUntil: number | null;
}

export interface XGovernor {
  tryAcquire(family: XFamily, priority?: XPriority): Promise<XAcquireResult>;
  observe(family: XFamily, answer: XObservation): Promise<void>;
  /** the family's budget as the fleet sees it now */
  budget(family: XFamily): Promise<XBudget>;
}

export interface XGovernorOptions {
  /** share of each window low-priority calls leave to high-priority ones; default 0.2 */
  lowPriorityReserve?: number;
  limits?: Partial<Record<XFamily, number>>;
  windowMs?: number;
  /** how long a 429 without a reset header stops the family; default 60 000 */
  blockMs?: number;
  now?: () => number;
}

/** X's rate-limit headers of an answer, or null (reset in epoch ms). */
export function rateLimitHeaders(
  headers: XObservation['headers'],
): { limit: number; remaining: number; resetAt: number } | null {
  const read = (name: string): unknown =>
    typeof headers.get === 'function' && !(name in headers)
      ? (headers as { get(name: string): string | null }).get(name)
      : (headers as Record<string, unknown>)[name];
  const num = (name: string) => {
    const v = read(name);
    const n = typeof v === 'string' || typeof v === 'number' ? Number(v) : NaN;
    return Number.isFinite(n) && n >= 0 ? n : null;
  };
  const limit = num('x-rate-limit-limit');
  const remaining = num('x-rate-limit-remaining');
  const reset = num('x-rate-limit-reset');
  if (limit === null || remaining === null || reset === null) return null;
  return { limit, remaining, resetAt: reset * 1000 };
}

interface Settings {
  limits: Record<XFamily, number>;
  windowMs: number;
  blockMs: number;
  reserve: (family: XFamily) => number;
  now: () => number;
}

function settings(options: XGovernorOptions): Settings {
  const share = options.lowPriorityReserve ?? 0.2;
  if (!(share >= 0 && share < 1)) throw new RangeError('lowPriorityReserve must be in [0, 1)');
  const limits = { ...X_DEFAULT_LIMITS, ...options.limits };
  return {
    limits,
    windowMs: options.windowMs ?? X_WINDOW_MS,
    blockMs: options.blockMs ?? 60_000,
    reserve: (family) => Math.ceil(limits[family] * share),
    now: options.now ?? Date.now,
  };
}

type GovernorRedis = RedisClient & {
  xgovAcquire(key: string, ...args: (string | number)[]): Promise<[number, number]>;
  xgovObserve(key: string, ...args: (string | number)[]): Promise<number>;
};

/** The fleet's governor: state in Redis under `<prefix>x:gov:<family>`, changed only by the scripts. */
export function createRedisGovernor(redis: RedisClient, options: XGovernorOptions = {}): XGovernor {
  const s = settings(options);
  const r = redis as GovernorRedis;
  if (typeof (r as Partial<GovernorRedis>).xgovAcquire !== 'function') {
    redis.defineCommand('xgovAcquire', { numberOfKeys: 1, lua: ACQUIRE_LUA });
    redis.defineCommand('xgovObserve', { numberOfKeys: 1, lua: OBSERVE_LUA });
  }
  const key = (family: XFamily) => `x:gov:${family}`;
  return {
    async tryAcquire(family, priority = 'high') {
      const [ok, value] = await r.xgovAcquire(
        key(family),
        s.now(),
        s.limits[family],
        s.windowMs,
        s.reserve(family),
        priority,
      );
      return ok === 1 ? { ok: true } : { ok: false, retryAfterMs: Math.max(1, value) };
    },
    async observe(family, answer) {
      const h = rateLimitHeaders(answer.headers);
      await r.xgovObserve(
        key(family),
        s.now(),
        answer.status,
        h?.limit ?? '',
        h?.remaining ?? '',
        h?.resetAt ?? '',
        s.windowMs,
        s.blockMs,
      );
    },
    async budget(family) {
      const [limit, remaining, reset, blocked] = await redis.hmget(
        key(family),
        'limit',
        'remaining',
        'reset',
        'blocked',
      );
      const now = s.now();
      const lim = limit === null ? s.limits[family] : Number(limit);
      const resetAt = reset === null ? 0 : Number(reset);
      const blockedUntil = blocked !== null && Number(blocked) > now ? Number(blocked) : null;
      if (remaining === null || resetAt <= now)
        return { limit: lim, remaining: lim, resetAt: now + s.windowMs, blockedUntil };
      return { limit: lim, remaining: Number(remaining), resetAt, blockedUntil };
    },
  };
}

/**
 * A governor for one process without Redis (an X source built without one, e.g. a script):
 * it stops a family after a 429 until its reset and remembers the last headers, nothing more.
 * Services always use createRedisGovernor.
 */
export function createProcessGovernor(options: XGovernorOptions = {}): XGovernor {
  const s = settings(options);
  const state = new Map<XFamily, XBudget>();
  const get = (family: XFamily): XBudget => {
    const now = s.now();
    const b = state.get(family);
    if (b && (b.resetAt > now || (b.blockedUntil ?? 0) > now)) return b;
    const fresh = {
      limit: s.limits[family],
      remaining: s.limits[family],
      resetAt: now + s.windowMs,
      blockedUntil: null,
    };
    state.set(family, fresh);
    return fresh;
  };
  return {
    tryAcquire(family) {
      const b = get(family);
      const now = s.now();
      if (b.blockedUntil !== null && b.blockedUntil > now) {
        return Promise.resolve({ ok: false, retryAfterMs: b.blockedUntil - now });
      }
      return Promise.resolve({ ok: true });
    },
    observe(family, answer) {
      const h = rateLimitHeaders(answer.headers);
      const now = s.now();
      if (answer.status === 429) {
        const until = h && h.resetAt > now ? h.resetAt : now + s.blockMs;
        state.set(family, { limit: h?.limit ?? s.limits[family], remaining: 0, resetAt: until, blockedUntil: until });
      } else if (h) {
        state.set(family, { limit: h.limit, remaining: h.remaining, resetAt: h.resetAt, blockedUntil: null });
      }
      return Promise.resolve();
    },
    budget: (family) => Promise.resolve({ ...get(family) }),
  };
}
