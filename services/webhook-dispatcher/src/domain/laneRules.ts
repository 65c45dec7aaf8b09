/**
 * The lane scheduler's rules (lanes.ts), without I/O or timers: how many messages a lane may keep
 * waiting, when a task may start, how a lane's latency estimate moves, when an idle lane is
 * forgotten.
 */

export interface LaneEstimate {
  /** now, ms */
  now: number;
  /** start times of the lane's tasks in flight */
  activeStarts: Iterable<number>;
  /** moving average of the time a task holds its slot (ms), null before the first one */
  latencyMs: number | null;
  /** latency assumed for a lane without history (ms) */
  initialLatencyMs: number;
  /** tasks the lane completed within the last holdMs */
  doneRecently: number;
  holdMs: number;
  concurrency: number;
  maxWaitingPerLane: number;
  /** the lane's pace, if it has one: requests per second and ms until its bucket allows the next */
  pace: { perSecond: number; blockedMs: number } | null;
}

/**
 * How many messages a lane may keep waiting: what it is expected to start within holdMs, from its
 * latency (at least the age of its oldest task in flight), what it really completed in the last
 * holdMs, and its pace.
 */
export function allowedWaiting(e: LaneEstimate): number {
  let oldest = 0;
  for (const started of e.activeStarts) oldest = Math.max(oldest, e.now - started);
  const latency = Math.max(e.latencyMs ?? e.initialLatencyMs, oldest, 1);
  // what the lane really completed in the last holdMs counts too: when the whole process is
  // slow (CPU-starved) every latency looks long, but a lane that keeps completing is not stuck
  let perHold = Math.max((e.holdMs * e.concurrency) / latency, e.doneRecently);
  if (e.pace) perHold = Math.min(perHold, Math.max(0, ((e.holdMs - e.pace.blockedMs) / 1000) * e.pace.perSecond));
  return Math.min(e.maxWaitingPerLane, Math.floor(perHold));
}

/** drops the completion times older than holdMs from the front of `done` (oldest first) */
export function pruneDone(done: number[], now: number, holdMs: number): void {
  while (done.length > 0 && done[0]! < now - holdMs) done.shift();
}

/**
 * A task may start when the lane is under its concurrency and its pace (if any) allows one now
 * (`paceWaitMs` is asked only then).
 */
export const canStart = (active: number, concurrency: number, paceWaitMs: () => number) =>
  active < concurrency && paceWaitMs() === 0;

/** the lane's latency estimate after a task held its slot `took` ms */
export const nextLatency = (latencyMs: number | null, took: number) =>
  latencyMs === null ? took : latencyMs * 0.8 + took * 0.2;

/** how long a lane must have been idle (nothing active, nothing waiting, pace full) before it is forgotten */
export const LANE_IDLE_FORGET_MS = 60_000;
