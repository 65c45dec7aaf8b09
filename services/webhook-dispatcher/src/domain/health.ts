/**
 * Endpoint health: after FAILING_AFTER failed deliveries in a row an endpoint is
 * "failing"; once such a streak has lasted DISABLE_AFTER_MS it is disabled (live hits are logged as
 * skipped, not sent) until a delivery succeeds, which in practice is a test webhook (test pings
 * still go out). Any success resets the streak. The counting itself is one SQL statement
 * (adapters/attemptWriter.ts `recordHealth`); these are its rules and the words the log shows.
 */
export const FAILING_AFTER = 5;
export const DISABLE_AFTER_MS = 3 * 86_400_000;

export interface EndpointHealth {
  consecutiveFailures: number;
  firstFailureAt: Date | null;
  disabledAt: Date | null;
}

export type HealthState = 'ok' | 'failing' | 'disabled';

export function healthState(h: EndpointHealth): HealthState {
  if (h.disabledAt) return 'disabled';
  return h.consecutiveFailures >= FAILING_AFTER ? 'failing' : 'ok';
}

/**
 * Whether the outcome of a send must be counted. A success on an endpoint that the look-up saw
 * healthy changes nothing, so it costs no statement: the hot path of a healthy endpoint is as
 * before. (A failure of a concurrent delivery logged meanwhile then survives this success; the
 * order of concurrent outcomes is arbitrary anyway.)
 */
export function healthNeedsUpdate(h: EndpointHealth, delivered: boolean): boolean {
  return !delivered || h.consecutiveFailures > 0 || h.disabledAt !== null;
}

/** The attempt log's reason for a live hit not sent to a disabled endpoint. */
export function disabledReason(h: EndpointHealth): string {
  const since = (h.firstFailureAt ?? h.disabledAt)!.toISOString();
  return `endpoint disabled: only failures since ${since} (${h.consecutiveFailures} in a row); the hit is recorded; send a test webhook, a success re-enables it`;
}
