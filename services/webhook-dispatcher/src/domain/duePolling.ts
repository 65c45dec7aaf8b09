/**
 * When the due deliveries' poller (dueDeliveries.ts) looks again. Pure: the clock is passed in.
 *
 * Polled only every `pollMs`, the retries of an outage (due as evenly as their first attempts
 * failed, spread further by the schedule's jitter) would be claimed a poll's worth at once and go
 * out as one burst, which every other endpoint's deliveries in the process queue behind. So while
 * polls keep finding work (a claim less than `pollMs` ago) the next poll comes after `busyPollMs`
 * and what falls due is claimed a few rows at a time, close to its time; an idle process still
 * polls every `pollMs`.
 */
export interface PollTiming {
  pollMs: number;
  /** the interval while polls keep finding work (default: a tenth of pollMs) */
  busyPollMs?: number;
}

/** the default busy interval: a tenth of the idle one */
function busyPollMsOf(t: PollTiming): number {
  return t.busyPollMs ?? Math.max(1, Math.round(t.pollMs / 10));
}

/** ms until the next poll, given when a poll last claimed something (-Infinity: never) */
export function nextPollDelay(t: PollTiming, now: number, lastClaimAt: number): number {
  return now - lastClaimAt < t.pollMs ? busyPollMsOf(t) : t.pollMs;
}
