/**
 * Quota and rate-limit arithmetic and the headers every API response carries. No I/O.
 *
 * Monthly quota: one unit per successful (2xx) call, resetting at the start of each UTC month.
 * Per-minute limit: every authenticated request that was let through counts, in fixed UTC minutes.
 */
import { periodResetEpoch, usagePeriod, type PlanLimits } from '@sts/core';

export interface Usage {
  /** units of the month used, including this call's reservation when it holds one */
  monthUsed: number;
  /** requests counted in the current minute */
  minuteUsed: number;
}

export interface Window {
  period: string;
  monthResetEpoch: number;
  minute: number;
  minuteResetEpoch: number;
}

export function currentWindow(now: Date): Window {
  const minute = Math.floor(now.getTime() / 60_000);
  return {
    period: usagePeriod(now),
    monthResetEpoch: periodResetEpoch(now),
    minute,
    minuteResetEpoch: (minute + 1) * 60,
  };
}

/** The quota and rate-limit headers (legacy X-* and the IETF RateLimit / RateLimit-Policy pair). */
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
    'RateLimit-Policy': `"minute";q=${limits.perMinute};w=60, "month";q=${limits.monthlyQuota};w=${monthReset}`,
    RateLimit: `"minute";r=${minuteRemaining};t=${minuteReset}, "month";r=${monthRemaining};t=${monthReset}`,
  };
}

export type Admission =
  { kind: 'ok' } | { kind: 'rate_limited'; retryAfter: number } | { kind: 'quota_exceeded'; retryAfter: number };

export function admissionRetryAfter(kind: 'rate_limited' | 'quota_exceeded', win: Window, nowEpoch: number): number {
  return Math.max(1, (kind === 'rate_limited' ? win.minuteResetEpoch : win.monthResetEpoch) - nowEpoch);
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export function acceptRequestId(value: string | string[] | undefined): string | null {
  return typeof value === 'string' && REQUEST_ID.test(value) ? value : null;
}

/** The key from `Authorization: Bearer <key>` or `X-API-Key: <key>`; '' when neither is present. */
export function extractApiKey(authorization: string | undefined, xApiKey: string | string[] | undefined): string {
  if (typeof xApiKey === 'string' && xApiKey !== '') return xApiKey.trim();
  if (authorization) {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    return m ? m[1]! : authorization.trim() === '' ? '' : '\0malformed';
  }
  return '';
}
