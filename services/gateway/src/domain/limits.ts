/**
 * Quota and rate-limit arithmetic, the headers every API response carries, and the small parsing
 * rules of the hot path (request id, API key header). No I/O.
 *
 * Monthly quota: one unit per successful (2xx) call, resetting at the start of each UTC month.
 * Per-minute limit: every authenticated request that was let through counts, in fixed UTC minutes.
 */
import { ApiError } from '@sts/common';
import { periodResetEpoch, usagePeriod, type PlanLimits } from '@sts/core';

export interface Usage {
  /** units of the month used, including this call's reservation when it holds one */
  monthUsed: number;
  /** requests counted in the current minute */
  minuteUsed: number;
}

export interface Window {
  /** "YYYY-MM" (UTC) */
  period: string;
  /** length of this UTC month in seconds (the IETF policy window `w`) */
  monthSeconds: number;
  monthResetEpoch: number;
  /** minutes since the epoch */
  minute: number;
  minuteResetEpoch: number;
}

export function currentWindow(now: Date): Window {
  const minute = Math.floor(now.getTime() / 60_000);
  const monthStart = Math.floor(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1) / 1000);
  const monthResetEpoch = periodResetEpoch(now);
  return {
    period: usagePeriod(now),
    monthSeconds: monthResetEpoch - monthStart,
    monthResetEpoch,
    minute,
    minuteResetEpoch: (minute + 1) * 60,
  };
}

/** `currentWindow`, computed once per minute (months turn over on a minute boundary). */
export function createWindowClock(): (nowMs: number) => Window {
  let cached: Window | undefined;
  return (nowMs) => {
    const minute = Math.floor(nowMs / 60_000);
    if (cached?.minute !== minute) cached = currentWindow(new Date(nowMs));
    return cached;
  };
}

/**
 * The quota and rate-limit headers: the X-* trio for each limit (reset in epoch seconds) and the
 * IETF pair (draft-ietf-httpapi-ratelimit-headers): `RateLimit-Policy` names the two policies with
 * their quota `q` and window `w` (seconds; the month's length for the monthly policy), `RateLimit`
 * gives the remaining units `r` and the seconds `t` until each policy resets.
 */
export function limitHeaders(limits: PlanLimits, usage: Usage, win: Window, nowEpoch: number): Record<string, string> {
  const monthRemaining = Math.max(0, limits.monthlyQuota - usage.monthUsed);
  const minuteRemaining = Math.max(0, limits.perMinute - usage.minuteUsed);
  const monthReset = Math.max(0, win.monthResetEpoch - nowEpoch);
  const minuteReset = Math.max(0, win.minuteResetEpoch - nowEpoch);
  return {
    'X-Quota-Limit': String(limits.monthlyQuota),
    'X-Quota-Remaining': String(monthRemaining),
    'X-Quota-Reset': String(win.monthResetEpoch),
    'X-RateLimit-Limit': String(limits.perMinute),
    'X-RateLimit-Remaining': String(minuteRemaining),
    'X-RateLimit-Reset': String(win.minuteResetEpoch),
    'RateLimit-Policy': `"minute";q=${limits.perMinute};w=60, "month";q=${limits.monthlyQuota};w=${win.monthSeconds}`,
    RateLimit: `"minute";r=${minuteRemaining};t=${minuteReset}, "month";r=${monthRemaining};t=${monthReset}`,
  };
}

/**
 * `limitHeaders` as header lines (`name: value\r\n`) for the hot path: the parts that only depend
 * on the plan and the window are built once per minute and plan, each call adds its four numbers.
 */
export function createLimitHeaderBlock(): (limits: PlanLimits, usage: Usage, win: Window, nowEpoch: number) => string {
  let cachedWin: Window | undefined;
  const parts = new Map<PlanLimits, readonly [string, string, string]>();
  return (limits, usage, win, nowEpoch) => {
    if (win !== cachedWin) {
      parts.clear();
      cachedWin = win;
    }
    let p = parts.get(limits);
    if (p === undefined) {
      p = [
        `X-Quota-Limit: ${limits.monthlyQuota}\r\nX-Quota-Remaining: `,
        `\r\nX-Quota-Reset: ${win.monthResetEpoch}\r\nX-RateLimit-Limit: ${limits.perMinute}\r\nX-RateLimit-Remaining: `,
        `\r\nX-RateLimit-Reset: ${win.minuteResetEpoch}\r\n` +
          `RateLimit-Policy: "minute";q=${limits.perMinute};w=60, "month";q=${limits.monthlyQuota};w=${win.monthSeconds}\r\n` +
          'RateLimit: "minute";r=',
      ];
      parts.set(limits, p);
    }
    const monthRemaining = Math.max(0, limits.monthlyQuota - usage.monthUsed);
    const minuteRemaining = Math.max(0, limits.perMinute - usage.minuteUsed);
    const monthReset = Math.max(0, win.monthResetEpoch - nowEpoch);
    const minuteReset = Math.max(0, win.minuteResetEpoch - nowEpoch);
    return `${p[0]}${monthRemaining}${p[1]}${minuteRemaining}${p[2]}${minuteRemaining};t=${minuteReset}, "month";r=${monthRemaining};t=${monthReset}\r\n`;
  };
}

/** Header lines (`name: value\r\n`) from a record. */
export function headerLines(headers: Record<string, string>): string {
  let out = '';
  for (const name in headers) out += `${name}: ${headers[name]}\r\n`;
  return out;
}

export type Refusal = 'rate_limited' | 'quota_exceeded';

/** Seconds until a refused call can succeed: the next minute, or the next UTC month. */
function admissionRetryAfter(kind: Refusal, win: Window, nowEpoch: number): number {
  return Math.max(1, (kind === 'rate_limited' ? win.minuteResetEpoch : win.monthResetEpoch) - nowEpoch);
}

/** The 429 for a refused call, with its Retry-After and the limit headers. */
export function refusal(
  kind: Refusal,
  limits: PlanLimits,
  usage: Usage,
  win: Window,
  nowEpoch: number,
): { error: ApiError; headers: Record<string, string> } {
  const retryAfter = admissionRetryAfter(kind, win, nowEpoch);
  const error =
    kind === 'rate_limited'
      ? new ApiError(
          429,
          'RATE_LIMIT_EXCEEDED',
          `rate limit of ${limits.perMinute} requests a minute exceeded; retry in ${retryAfter} s`,
          { limit: limits.perMinute, remaining: 0, retry_after: retryAfter },
        )
      : new ApiError(
          429,
          'QUOTA_EXCEEDED',
          `monthly quota of ${limits.monthlyQuota} calls used up; it resets at the start of the next UTC month`,
          { limit: limits.monthlyQuota, remaining: 0, retry_after: retryAfter },
        );
  return { error, headers: { ...limitHeaders(limits, usage, win, nowEpoch), 'Retry-After': String(retryAfter) } };
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The client's request id when it is 1–128 of [A-Za-z0-9._:-], else null (a new one is made). */
export function acceptRequestId(value: string | string[] | undefined): string | null {
  return typeof value === 'string' && REQUEST_ID.test(value) ? value : null;
}

/**
 * The key from `X-API-Key: <key>` or `Authorization: Bearer <key>`; '' when neither is present.
 * Anything else in Authorization (another scheme, no token) yields a value that is not a key, so
 * the caller refuses it as malformed.
 */
export function extractApiKey(authorization: string | undefined, xApiKey: string | string[] | undefined): string {
  if (typeof xApiKey === 'string' && xApiKey !== '') return xApiKey.trim();
  if (authorization) {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    return m ? m[1]! : authorization.trim() === '' ? '' : '\0malformed';
  }
  return '';
}
