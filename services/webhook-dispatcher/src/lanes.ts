/**
 * Fair delivery: one lane per endpoint (see pacing.ts `laneKey`), each with a concurrency limit,
 * an optional pace (Discord/Slack token bucket) and a bounded in-memory waiting line.
 *
 * Every message the dispatcher holds occupies one of the broker's prefetch slots. A message for an
 * endpoint at its limit may wait here only while the endpoint is expected to take it soon: the
 * waiting line of a lane is bounded by how many deliveries the lane completes in `holdMs`
 * (estimated from its latency, the age of its oldest delivery in flight, and its pace). A fast
 * endpoint may keep a long line (its slots free up within milliseconds); a dead or slow one keeps
 * (almost) none. A message that does not fit is answered `deferred`: the caller parks it on the
 * broker (adapters/parking.ts) and acknowledges it, which frees the slot for other endpoints.
 * A sweep re-checks the lines as estimates change (a lane that just stalled gives its waiting
 * messages back for parking).
 */

import { TokenBucket, type PaceRule } from './domain/pacing';

export type LaneOutcome<T> = { kind: 'ran'; value: T } | { kind: 'deferred' } | { kind: 'released' };

export interface LaneControl {
  /** waits until the lane's pace allows the next request (for a send after a 429) */
  paced(): Promise<void>;
  /** the platform asked for a pause until `until` (ms, Date.now() clock) */
  blockUntil(until: number): void;
  /**
   * Done with the endpoint (the last answer is in): frees the lane's slot before the attempt is
   * written, so the lane's pace is the endpoint's, not the database's. Idempotent.
   */
  release(): void;
}

export interface LaneSchedulerOptions {
  concurrency: number;
  /** a message may wait in memory only if its lane is expected to start it within this time */
  holdMs: number;
  /** longest waiting line of one lane */
  maxWaitingPerLane: number;
  /** latency assumed for a lane without history (ms) */
  initialLatencyMs?: number;
  sweepMs?: number;
  now?: () => number;
}

interface Waiter {
  mayDefer: boolean;
  start: () => void;
  settle: (o: { kind: 'deferred' } | { kind: 'released' }) => void;
}

interface Lane {
  key: string;
  /** task id -> start time */
  active: Map<number, number>;
  waiting: Waiter[];
  bucket: TokenBucket | null;
  rule: PaceRule | null;
  /** moving average of the time a task holds its slot (ms), null before the first one */
  latencyMs: number | null;
  timer: NodeJS.Timeout | null;
  idleSince: number;
  /** when recent tasks released their slot (the last holdMs, at most a bounded number) */
  done: number[];
}

export interface LaneScheduler {
  /**
   * Runs `task` in lane `key` when its turn comes. `deferred`: the lane is backed up, park the
   * message instead (only when `mayDefer`). `released`: the scheduler is stopping.
   */
  run<T>(
    key: string,
    pace: PaceRule | null,
    mayDefer: boolean,
    task: (control: LaneControl) => Promise<T>,
  ): Promise<LaneOutcome<T>>;
  /** stop: every waiting message is answered `released`, new ones too */
  releaseAll(): void;
  stats(): { lanes: number; active: number; waiting: number };
  close(): void;
}

/**
 * A factory of small closures (each under 40 lines) sharing the lanes map and the sweep timer;
 * its length is the sum of those, not one long procedure.
 */
// eslint-disable-next-line max-lines-per-function -- a factory of small closures, see the comment above
export function createLaneScheduler(options: LaneSchedulerOptions): LaneScheduler {
  const now = options.now ?? Date.now;
  const initialLatency = options.initialLatencyMs ?? 50;
  const lanes = new Map<string, Lane>();
  let released = false;
  let taskIds = 0;

  function laneFor(key: string, rule: PaceRule | null): Lane {
    let lane = lanes.get(key);
    if (!lane) {
      lane = {
        key,
        active: new Map(),
        waiting: [],
        bucket: rule ? new TokenBucket(rule, now()) : null,
        rule,
        latencyMs: null,
        timer: null,
        idleSince: now(),
        done: [],
      };
      lanes.set(key, lane);
    }
    return lane;
  }

  /** how many messages this lane may keep waiting: what it is expected to start within holdMs */
  function allowedWaiting(lane: Lane): number {
    const t = now();
    let oldest = 0;
    for (const started of lane.active.values()) oldest = Math.max(oldest, t - started);
    const latency = Math.max(lane.latencyMs ?? initialLatency, oldest, 1);
    // what the lane really completed in the last holdMs counts too: when the whole process is
    // slow (CPU-starved) every latency looks long, but a lane that keeps completing is not stuck
    while (lane.done.length > 0 && lane.done[0]! < t - options.holdMs) lane.done.shift();
    let perHold = Math.max((options.holdMs * options.concurrency) / latency, lane.done.length);
    if (lane.rule && lane.bucket) {
      const blocked = lane.bucket.waitMs(t);
      perHold = Math.min(perHold, Math.max(0, ((options.holdMs - blocked) / 1000) * lane.rule.perSecond));
    }
    return Math.min(options.maxWaitingPerLane, Math.floor(perHold));
  }

  function canStart(lane: Lane): boolean {
    if (lane.active.size >= options.concurrency) return false;
    return !lane.bucket || lane.bucket.waitMs(now()) === 0;
  }

  function pump(lane: Lane): void {
    while (lane.waiting.length > 0 && canStart(lane)) {
      lane.bucket?.tryTake(now());
      lane.waiting.shift()!.start();
    }
    if (lane.waiting.length > 0 && lane.bucket && !lane.timer && lane.active.size < options.concurrency) {
      lane.timer = setTimeout(
        () => {
          lane.timer = null;
          pump(lane);
        },
        Math.max(1, lane.bucket.waitMs(now())),
      );
    }
  }

  function control(lane: Lane, release: () => void): LaneControl {
    return {
      release,
      paced: async () => {
        if (!lane.bucket) return;
        for (;;) {
          const wait = lane.bucket.waitMs(now());
          if (wait === 0 && lane.bucket.tryTake(now())) return;
          await new Promise((r) => setTimeout(r, Math.max(1, wait)));
        }
      },
      blockUntil: (until) => lane.bucket?.blockUntil(until, now()),
    };
  }

  async function execute<T>(lane: Lane, task: (c: LaneControl) => Promise<T>): Promise<LaneOutcome<T>> {
    const started = now();
    const id = ++taskIds;
    lane.active.set(id, started);
    const release = () => {
      if (!lane.active.delete(id)) return;
      const took = now() - started;
      lane.latencyMs = lane.latencyMs === null ? took : lane.latencyMs * 0.8 + took * 0.2;
      lane.idleSince = now();
      lane.done.push(lane.idleSince);
      if (lane.done.length > options.maxWaitingPerLane) lane.done.shift();
      pump(lane);
    };
    try {
      return { kind: 'ran', value: await task(control(lane, release)) };
    } finally {
      release();
    }
  }

  function sweep(): void {
    const t = now();
    for (const lane of lanes.values()) {
      if (lane.waiting.length > 0) {
        const allowed = allowedWaiting(lane);
        // give back the newest waiters beyond what the lane can start soon
        for (let i = lane.waiting.length - 1; i >= 0 && lane.waiting.length > allowed; i--) {
          const w = lane.waiting[i]!;
          if (!w.mayDefer) continue;
          lane.waiting.splice(i, 1);
          w.settle({ kind: 'deferred' });
        }
      } else if (
        lane.active.size === 0 &&
        !lane.timer &&
        t - lane.idleSince > 60_000 &&
        (!lane.bucket || lane.bucket.isFull(t))
      ) {
        lanes.delete(lane.key);
      }
    }
  }
  const sweeper = setInterval(sweep, options.sweepMs ?? 250);
  sweeper.unref();

  return {
    run(key, pace, mayDefer, task) {
      if (released) return Promise.resolve({ kind: 'released' });
      const lane = laneFor(key, pace);
      if (lane.waiting.length === 0 && canStart(lane)) {
        lane.bucket?.tryTake(now());
        return execute(lane, task);
      }
      if (mayDefer && lane.waiting.length >= allowedWaiting(lane)) return Promise.resolve({ kind: 'deferred' });
      return new Promise((resolve, reject) => {
        lane.waiting.push({
          mayDefer,
          start: () => void execute(lane, task).then(resolve, reject),
          settle: resolve,
        });
        pump(lane);
      });
    },
    releaseAll() {
      released = true;
      for (const lane of lanes.values()) {
        for (const w of lane.waiting.splice(0)) w.settle({ kind: 'released' });
        if (lane.timer) clearTimeout(lane.timer);
        lane.timer = null;
      }
    },
    stats() {
      let active = 0;
      let waiting = 0;
      for (const lane of lanes.values()) {
        active += lane.active.size;
        waiting += lane.waiting.length;
      }
      return { lanes: lanes.size, active, waiting };
    },
    close() {
      clearInterval(sweeper);
      for (const lane of lanes.values()) if (lane.timer) clearTimeout(lane.timer);
    },
  };
}
