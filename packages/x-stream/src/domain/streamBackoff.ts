/**
 * X's reconnect guidance for the filtered stream (docs: "Handling disconnections"), no I/O:
 * - an established connection that drops: reconnect at once;
 * - TCP/IP errors (refused, reset, stalled): back off linearly, +250 ms an attempt, up to 16 s;
 * - HTTP errors: exponentially from 5 s, doubling, up to 320 s;
 * - HTTP 429: exponentially from 1 minute, doubling (and never before X's rate-limit reset).
 */
export type DropKind = 'dropped' | 'network' | 'http' | 'rate_limited';

export interface BackoffState {
  kind: DropKind | null;
  attempts: number;
}

export const initialBackoff: BackoffState = { kind: null, attempts: 0 };

/** The wait before the next connect after a failure of `kind`, and the state after it. */
export function nextDelay(
  state: BackoffState,
  kind: DropKind,
  retryAfterMs: number | null = null,
): { delayMs: number; state: BackoffState } {
  const attempts = state.kind === kind ? state.attempts + 1 : 1;
  let delayMs: number;
  if (kind === 'dropped') delayMs = 0;
  else if (kind === 'network') delayMs = Math.min(250 * attempts, 16_000);
  else if (kind === 'http') delayMs = Math.min(5000 * 2 ** (attempts - 1), 320_000);
  else delayMs = Math.min(60_000 * 2 ** (attempts - 1), 3_600_000);
  if (retryAfterMs !== null) delayMs = Math.max(delayMs, retryAfterMs);
  return { delayMs, state: { kind, attempts } };
}
