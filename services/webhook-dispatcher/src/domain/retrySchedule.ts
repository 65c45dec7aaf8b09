/**
 * A webhook's retry schedule (`retry_policy`). Pure: time and randomness are passed in.
 *
 *   none      one attempt (a failure is final)
 *   standard  after a failed attempt the next one follows after 5 s, 30 s, 2 min, 10 min, 30 min,
 *             2 h, 6 h and 12 h (each step ±10 %), nine attempts in about 21 h; the ninth's
 *             failure ends the schedule: its attempt is logged `exhausted`
 *
 * Every failed answer is retried (any non-2xx, a timeout, a connection error), except a refused
 * address (the URL names a non-public host: no later attempt can reach it). A `Retry-After` on a
 * 429 or 503 is honoured within the schedule: it may postpone the next attempt up to the length of
 * the step after it, never extend the schedule or bring an attempt forward.
 */
import { retryAfterMs, type RateLimitAnswer } from './pacing';

type RetryPolicy = 'none' | 'standard';

/** the waits after the 1st … 8th failed attempt (ms) */
export const STANDARD_STEPS_MS: readonly number[] = [
  5_000, 30_000, 120_000, 600_000, 1_800_000, 7_200_000, 21_600_000, 43_200_000,
];
const JITTER = 0.1;

/** what follows a failed attempt: another one at `at`, the end of a schedule, or nothing (no schedule) */
export type AfterFailure = { kind: 'retry'; attempt: number; at: Date } | { kind: 'exhausted' } | { kind: 'final' };

export interface FailedAttempt {
  policy: RetryPolicy;
  /** the failed attempt's number (1: the first) */
  attempt: number;
  result: RateLimitAnswer & { refused: boolean };
  now: number;
  /** in [0, 1) */
  random: () => number;
}

export function afterFailure({ policy, attempt, result, now, random }: FailedAttempt): AfterFailure {
  if (policy === 'none' || result.refused) return { kind: 'final' };
  const step = STANDARD_STEPS_MS[attempt - 1];
  if (step === undefined) return { kind: 'exhausted' };
  let wait = Math.round(step * (1 - JITTER + 2 * JITTER * random()));
  const asked =
    result.statusCode === 429 || result.statusCode === 503
      ? retryAfterMs(result.headers, result.responseSnippet, now)
      : null;
  if (asked !== null) wait = Math.max(wait, Math.min(asked, STANDARD_STEPS_MS[attempt] ?? step));
  return { kind: 'retry', attempt: attempt + 1, at: new Date(now + wait) };
}
