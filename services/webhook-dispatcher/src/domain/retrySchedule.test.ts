/** The retry schedule's arithmetic: steps, jitter, Retry-After within the schedule, the end. */
import { afterFailure, STANDARD_STEPS_MS } from './retrySchedule';

const answer = (statusCode: number | null, retryAfter?: string) => ({
  statusCode,
  headers: retryAfter === undefined ? {} : { 'retry-after': retryAfter },
  responseSnippet: null,
  refused: false,
});
const now = 1_800_000_000_000;

describe('retry schedule', () => {
  it('none: every failure is final', () => {
    expect(afterFailure({ policy: 'none', attempt: 1, result: answer(503), now, random: Math.random })).toEqual({
      kind: 'final',
    });
  });

  it('standard: 5 s, 30 s, 2 min, 10 min, 30 min, 2 h, 6 h, 12 h after each failure, ±10 %, then exhausted', () => {
    expect(STANDARD_STEPS_MS).toEqual([5e3, 30e3, 120e3, 600e3, 1800e3, 7200e3, 21600e3, 43200e3]);
    for (const [i, step] of STANDARD_STEPS_MS.entries()) {
      for (const [r, factor] of [
        [0, 0.9],
        [0.5, 1],
        [0.999999, 1.1],
      ] as const) {
        const next = afterFailure({ policy: 'standard', attempt: i + 1, result: answer(500), now, random: () => r });
        expect(next.kind).toBe('retry');
        if (next.kind !== 'retry') continue;
        expect(next.attempt).toBe(i + 2);
        expect(Math.abs(next.at.getTime() - now - step * factor)).toBeLessThanOrEqual(step * 1e-5 + 1);
      }
    }
    const total = STANDARD_STEPS_MS.reduce((a, b) => a + b, 0);
    expect(total / 3_600_000).toBeCloseTo(20.7, 1);
    expect(afterFailure({ policy: 'standard', attempt: 9, result: answer(500), now, random: Math.random })).toEqual({
      kind: 'exhausted',
    });
  });

  it('Retry-After on 429 and 503 postpones within the schedule; on other answers it is not read', () => {
    const at = (status: number, ra: string, attempt = 1) => {
      const n = afterFailure({ policy: 'standard', attempt, result: answer(status, ra), now, random: () => 0.5 });
      return n.kind === 'retry' ? n.at.getTime() - now : null;
    };
    expect(at(503, '20')).toBe(20_000);
    expect(at(429, '20')).toBe(20_000);
    expect(at(503, '1')).toBe(5_000); // never brings an attempt forward
    expect(at(503, '99999')).toBe(30_000); // at most the following step's length
    expect(at(500, '20')).toBe(5_000);
    expect(at(503, '99999', 8)).toBe(43_200_000); // the last step: not beyond it
  });

  it('a refused address (non-public host) is not retried; a network failure is', () => {
    const refused = { ...answer(null), refused: true };
    expect(afterFailure({ policy: 'standard', attempt: 1, result: refused, now, random: Math.random }).kind).toBe(
      'final',
    );
    expect(afterFailure({ policy: 'standard', attempt: 1, result: answer(null), now, random: Math.random }).kind).toBe(
      'retry',
    );
  });
});
