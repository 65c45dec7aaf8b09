import type { PlanLimits } from '@sts/core';
import {
  acceptRequestId,
  createLimitHeaderBlock,
  createWindowClock,
  currentWindow,
  extractApiKey,
  headerLines,
  limitHeaders,
  refusal,
} from './limits';

const starter: PlanLimits = { monthlyQuota: 150_000, perMinute: 30, pollIntervalSec: 60, liveWebhooks: true };

describe('quota windows and headers', () => {
  it('computes the UTC month and minute windows, across a year end and a leap February', () => {
    const dec = currentWindow(new Date('2025-12-31T23:59:30.500Z'));
    expect(dec.period).toBe('2025-12');
    expect(dec.monthResetEpoch).toBe(Date.UTC(2026, 0, 1) / 1000);
    expect(dec.monthSeconds).toBe(31 * 86_400);
    expect(dec.minuteResetEpoch).toBe(Date.UTC(2026, 0, 1) / 1000);
    expect(currentWindow(new Date('2028-02-10T00:00:00Z')).monthSeconds).toBe(29 * 86_400);
    expect(currentWindow(new Date('2026-01-01T00:00:00Z')).period).toBe('2026-01');
  });

  it('the window clock recomputes only when the minute changes', () => {
    const at = createWindowClock();
    const t = Date.UTC(2026, 4, 31, 23, 59, 1);
    const a = at(t);
    expect(at(t + 58_000)).toBe(a);
    const b = at(t + 59_000);
    expect(b).not.toBe(a);
    expect(b.period).toBe('2026-06');
  });

  it('builds the X-* headers and the IETF RateLimit / RateLimit-Policy pair', () => {
    const now = new Date('2026-03-10T12:00:42Z');
    const win = currentWindow(now);
    const h = limitHeaders(starter, { monthUsed: 10, minuteUsed: 1 }, win, Math.floor(now.getTime() / 1000));
    const monthLeft = Date.UTC(2026, 3, 1) / 1000 - now.getTime() / 1000;
    expect(h).toEqual({
      'X-Quota-Limit': '150000',
      'X-Quota-Remaining': '149990',
      'X-Quota-Reset': String(Date.UTC(2026, 3, 1) / 1000),
      'X-RateLimit-Limit': '30',
      'X-RateLimit-Remaining': '29',
      'X-RateLimit-Reset': String(Date.UTC(2026, 2, 10, 12, 1) / 1000),
      'RateLimit-Policy': `"minute";q=30;w=60, "month";q=150000;w=${31 * 86_400}`,
      RateLimit: `"minute";r=29;t=18, "month";r=149990;t=${monthLeft}`,
    });
    // never negative
    const over = limitHeaders(starter, { monthUsed: 200_000, minuteUsed: 99 }, win, now.getTime() / 1000);
    expect(over['X-Quota-Remaining']).toBe('0');
    expect(over['X-RateLimit-Remaining']).toBe('0');
  });

  it('refuses with 429, the right code and a Retry-After to the end of the violated window', () => {
    const now = new Date('2026-03-31T23:59:50Z');
    const win = currentWindow(now);
    const epoch = now.getTime() / 1000;
    const rate = refusal('rate_limited', starter, { monthUsed: 5, minuteUsed: 30 }, win, epoch);
    expect(rate.error).toMatchObject({ status: 429, code: 'RATE_LIMIT_EXCEEDED' });
    expect(rate.error.extra).toEqual({ limit: 30, remaining: 0, retry_after: 10 });
    expect(rate.headers['Retry-After']).toBe('10');
    const quota = refusal('quota_exceeded', starter, { monthUsed: 150_000, minuteUsed: 3 }, win, epoch);
    expect(quota.error).toMatchObject({ status: 429, code: 'QUOTA_EXCEEDED' });
    expect(quota.headers['Retry-After']).toBe('10');
    expect(quota.headers['X-Quota-Remaining']).toBe('0');
  });

  it('reads the key from X-API-Key or Authorization: Bearer, and accepts only sane request ids', () => {
    expect(extractApiKey(undefined, 'k1')).toBe('k1');
    expect(extractApiKey('Bearer k2', undefined)).toBe('k2');
    expect(extractApiKey('bearer   k3  ', undefined)).toBe('k3');
    expect(extractApiKey(undefined, undefined)).toBe('');
    expect(extractApiKey('   ', undefined)).toBe('');
    expect(extractApiKey('Basic abc', undefined)).not.toMatch(/^abc$/);
    expect(extractApiKey('Bearer', undefined)).not.toBe('');
    expect(acceptRequestId('abc-123_x.y:z')).toBe('abc-123_x.y:z');
    expect(acceptRequestId('a'.repeat(129))).toBeNull();
    expect(acceptRequestId('has space')).toBeNull();
    expect(acceptRequestId(['a', 'b'])).toBeNull();
    expect(acceptRequestId(undefined)).toBeNull();
  });
  it('the hot-path header block says exactly what limitHeaders says, across plans, usage and windows', () => {
    const block = createLimitHeaderBlock();
    const clock = createWindowClock();
    const free = { monthlyQuota: 1000, perMinute: 10 };
    const big = { monthlyQuota: 150_000, perMinute: 30 };
    const times = [
      Date.UTC(2026, 10, 22, 10, 0, 5),
      Date.UTC(2026, 10, 22, 10, 0, 59),
      Date.UTC(2026, 11, 31, 23, 59, 30),
      Date.UTC(2027, 0, 1, 0, 0, 1),
    ];
    for (const t of times)
      for (const limits of [free, big, free])
        for (const usage of [
          { monthUsed: 0, minuteUsed: 0 },
          { monthUsed: 999, minuteUsed: 9 },
          { monthUsed: 200_000, minuteUsed: 50 },
        ]) {
          const win = clock(t);
          const epoch = Math.floor(t / 1000);
          expect(block(limits as never, usage, win, epoch)).toBe(
            headerLines(limitHeaders(limits as never, usage, win, epoch)),
          );
        }
  });
});
