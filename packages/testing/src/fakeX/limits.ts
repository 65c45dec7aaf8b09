/**
 * X's rate limits as the fake enforces them: per endpoint family, a fixed window (15 minutes by
 * default) opened by its first request. Every answer carries `x-rate-limit-limit`,
 * `x-rate-limit-remaining` and `x-rate-limit-reset` (epoch seconds when the window ends); a request
 * past the limit gets X's 429 problem. Defaults are Pro-like app limits.
 */
import type { ServerResponse } from 'node:http';

export type XFamily = 'users' | 'timeline' | 'search' | 'tweets' | 'stream_connect' | 'rules';

export const FAKE_X_FAMILIES: readonly XFamily[] = ['users', 'timeline', 'search', 'tweets', 'stream_connect', 'rules'];

/** Pro-like requests per 15-minute window: timeline 1,500, search 450, users 300, stream connects 50. */
export const FAKE_X_DEFAULT_LIMITS: Record<XFamily, number> = {
  users: 300,
  timeline: 1500,
  search: 450,
  tweets: 450,
  stream_connect: 50,
  rules: 450,
};

export const FIFTEEN_MINUTES_MS = 15 * 60_000;

interface Window {
  limit: number;
  used: number;
  resetAt: number;
}

export class FakeXLimits {
  private readonly windows = new Map<XFamily, Window>();
  private readonly limits: Record<XFamily, number>;
  /** which family a response was counted against (for the request log) */
  readonly familyOf = new WeakMap<ServerResponse, XFamily>();

  constructor(
    limits: Partial<Record<XFamily, number>> = {},
    readonly windowMs = FIFTEEN_MINUTES_MS,
  ) {
    this.limits = { ...FAKE_X_DEFAULT_LIMITS, ...limits };
  }

  private window(family: XFamily, now = Date.now()): Window {
    let w = this.windows.get(family);
    if (!w || now >= w.resetAt) {
      w = { limit: this.limits[family], used: 0, resetAt: now + this.windowMs };
      this.windows.set(family, w);
    }
    return w;
  }

  /** Changes the family's limit from now on (its current window included), as a plan change would. */
  setLimit(family: XFamily, limit: number): void {
    this.limits[family] = limit;
    this.window(family).limit = limit;
  }

  /** Requests left in the family's current window. */
  remaining(family: XFamily): number {
    const w = this.window(family);
    return Math.max(0, w.limit - w.used);
  }

  /** Epoch milliseconds when the family's current window ends. */
  resetAt(family: XFamily): number {
    return this.window(family).resetAt;
  }

  /** Spend `n` requests of the window without answering one (another app on the same token). */
  spend(family: XFamily, n = Infinity): void {
    const w = this.window(family);
    w.used = Math.min(w.limit, w.used + n);
  }

  /**
   * Counts one request of `family`: writes the rate-limit headers on `res` and returns true, or
   * answers X's 429 (with the same headers) and returns false.
   */
  take(family: XFamily, res: ServerResponse): boolean {
    const w = this.window(family);
    this.familyOf.set(res, family);
    const allowed = w.used < w.limit;
    if (allowed) w.used++;
    res.setHeader('x-rate-limit-limit', String(w.limit));
    res.setHeader('x-rate-limit-remaining', String(w.limit - w.used));
    res.setHeader('x-rate-limit-reset', String(Math.ceil(w.resetAt / 1000)));
    if (!allowed) {
      res
        .writeHead(429, { 'content-type': 'application/json; charset=utf-8' })
        .end(
          JSON.stringify({ title: 'Too Many Requests', detail: 'Too Many Requests', type: 'about:blank', status: 429 }),
        );
    }
    return allowed;
  }
}
