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
 *
 * A lane is shared fairly between the accounts (owners) sending to its endpoint: the next to start
 * is a waiter of the owner with the fewest deliveries running in the lane (oldest first among
 * equals), and when the line is full a newcomer of an owner with fewer waiters takes the place of
 * the newest waiter of the owner with the most (that one is parked). One account's backlog (a
 * Recover of a thousand deliveries) cannot starve another account's deliveries to the same host.
 */

import { allowedWaiting, canStart, LANE_IDLE_FORGET_MS, nextLatency, pruneDone } from './domain/laneRules';
import { TokenBucket, type PaceRule } from './domain/pacing';

/** what acquiring a lane's slot came to: the slot (release it when done), or the message goes back */
type Acquired = { kind: 'acquired'; slot: LaneSlot } | { kind: 'deferred' } | { kind: 'released' };

/** A slot held in a lane: the holder paces its further requests and releases it once. */
export interface LaneSlot {
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
  owner: string;
  mayDefer: boolean;
  /** takes the lane's slot for this waiter (synchronously: the caller counts it at once) */
  start: () => void;
  settle: (o: { kind: 'deferred' } | { kind: 'released' }) => void;
}

interface Lane {
  key: string;
  /** task id -> start time */
  active: Map<number, number>;
  /** owner -> tasks running */
  activeBy: Map<string, number>;
  /** owner -> sequence number of its latest start (round-robin between owners; bounded by the sweep) */
  startedBy: Map<string, number>;
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
   * A slot in lane `key` when its turn comes; the holder must release() it. `deferred`: the lane
   * is backed up, park the message instead (only when `mayDefer`). `released`: the scheduler is
   * stopping. `owner` (the account) is what the lane is shared fairly between.
   */
  acquire(key: string, pace: PaceRule | null, mayDefer: boolean, owner?: string): Promise<Acquired>;
  /** stop: every waiting message is answered `released`, new ones too */
  releaseAll(): void;
  stats(): { lanes: number; active: number; waiting: number };
  close(): void;
}

function newLane(key: string, rule: PaceRule | null, now: number): Lane {
  return {
    key,
    active: new Map(),
    activeBy: new Map(),
    startedBy: new Map(),
    waiting: [],
    bucket: rule ? new TokenBucket(rule, now) : null,
    rule,
    latencyMs: null,
    timer: null,
    idleSince: now,
    done: [],
  };
}

/** The lanes map and the sweep timer, with one method per step; the rules are in domain/laneRules.ts. */
class Lanes implements LaneScheduler {
  private readonly now: () => number;
  private readonly initialLatency: number;
  private readonly lanes = new Map<string, Lane>();
  private released = false;
  private taskIds = 0;
  private readonly sweeper: NodeJS.Timeout;

  constructor(private readonly options: LaneSchedulerOptions) {
    this.now = options.now ?? Date.now;
    this.initialLatency = options.initialLatencyMs ?? 50;
    this.sweeper = setInterval(() => this.sweep(), options.sweepMs ?? 250);
    this.sweeper.unref();
  }

  acquire(key: string, pace: PaceRule | null, mayDefer: boolean, owner = ''): Promise<Acquired> {
    if (this.released) return Promise.resolve({ kind: 'released' });
    const lane = this.laneFor(key, pace);
    if (lane.waiting.length === 0 && this.canStart(lane)) {
      lane.bucket?.tryTake(this.now());
      return Promise.resolve({ kind: 'acquired', slot: this.occupy(lane, owner) });
    }
    if (mayDefer && lane.waiting.length >= this.allowedWaiting(lane) && !this.makeRoomFor(lane, owner))
      return Promise.resolve({ kind: 'deferred' });
    return new Promise((resolve) => {
      lane.waiting.push({
        owner,
        mayDefer,
        start: () => resolve({ kind: 'acquired', slot: this.occupy(lane, owner) }),
        settle: resolve,
      });
      this.pump(lane);
    });
  }

  releaseAll(): void {
    this.released = true;
    for (const lane of this.lanes.values()) {
      for (const w of lane.waiting.splice(0)) w.settle({ kind: 'released' });
      if (lane.timer) clearTimeout(lane.timer);
      lane.timer = null;
    }
  }

  stats(): { lanes: number; active: number; waiting: number } {
    let active = 0;
    let waiting = 0;
    for (const lane of this.lanes.values()) {
      active += lane.active.size;
      waiting += lane.waiting.length;
    }
    return { lanes: this.lanes.size, active, waiting };
  }

  close(): void {
    clearInterval(this.sweeper);
    for (const lane of this.lanes.values()) if (lane.timer) clearTimeout(lane.timer);
  }

  private laneFor(key: string, rule: PaceRule | null): Lane {
    let lane = this.lanes.get(key);
    if (!lane) {
      lane = newLane(key, rule, this.now());
      this.lanes.set(key, lane);
    }
    return lane;
  }

  /** how many messages this lane may keep waiting: what it is expected to start within holdMs */
  private allowedWaiting(lane: Lane): number {
    const t = this.now();
    const { holdMs, concurrency, maxWaitingPerLane } = this.options;
    pruneDone(lane.done, t, holdMs);
    return allowedWaiting({
      now: t,
      activeStarts: lane.active.values(),
      latencyMs: lane.latencyMs,
      initialLatencyMs: this.initialLatency,
      doneRecently: lane.done.length,
      holdMs,
      concurrency,
      maxWaitingPerLane,
      pace: lane.rule && lane.bucket ? { perSecond: lane.rule.perSecond, blockedMs: lane.bucket.waitMs(t) } : null,
    });
  }

  private canStart(lane: Lane): boolean {
    const { bucket } = lane;
    return canStart(lane.active.size, this.options.concurrency, () => (bucket ? bucket.waitMs(this.now()) : 0));
  }

  /**
   * A full line takes `owner`'s newcomer only in place of a waiter of an owner with more waiters:
   * the newest deferrable one of the owner with the most is parked. False: no room made.
   */
  private makeRoomFor(lane: Lane, owner: string): boolean {
    const counts = new Map<string, number>();
    for (const w of lane.waiting) counts.set(w.owner, (counts.get(w.owner) ?? 0) + 1);
    const victim = heaviestDeferrable(lane.waiting, counts);
    if (victim < 0 || (counts.get(lane.waiting[victim]!.owner) ?? 0) <= (counts.get(owner) ?? 0) + 1) return false;
    lane.waiting.splice(victim, 1)[0]!.settle({ kind: 'deferred' });
    return true;
  }

  /**
   * The waiter to start next: of the owner with the fewest tasks running in the lane, then the
   * one whose last start is longest ago (round-robin), oldest first among an owner's waiters.
   */
  private nextWaiter(lane: Lane): Waiter {
    let best = 0;
    let bestRunning = Infinity;
    let bestStarted = Infinity;
    for (const [i, w] of lane.waiting.entries()) {
      const running = lane.activeBy.get(w.owner) ?? 0;
      const started = lane.startedBy.get(w.owner) ?? -1;
      if (running < bestRunning || (running === bestRunning && started < bestStarted)) {
        best = i;
        bestRunning = running;
        bestStarted = started;
      }
    }
    return lane.waiting.splice(best, 1)[0]!;
  }

  private pump(lane: Lane): void {
    while (lane.waiting.length > 0 && this.canStart(lane)) {
      lane.bucket?.tryTake(this.now());
      this.nextWaiter(lane).start();
    }
    if (lane.waiting.length > 0 && lane.bucket && !lane.timer && lane.active.size < this.options.concurrency) {
      lane.timer = setTimeout(
        () => {
          lane.timer = null;
          this.pump(lane);
        },
        Math.max(1, lane.bucket.waitMs(this.now())),
      );
    }
  }

  /** counts a start in the lane and hands out its slot */
  private occupy(lane: Lane, owner: string): LaneSlot {
    const started = this.now();
    const id = ++this.taskIds;
    lane.active.set(id, started);
    lane.activeBy.set(owner, (lane.activeBy.get(owner) ?? 0) + 1);
    lane.startedBy.delete(owner); // re-inserted last: the map stays in start order
    lane.startedBy.set(owner, id);
    if (lane.startedBy.size > this.options.maxWaitingPerLane * 2) {
      const oldest = lane.startedBy.keys().next();
      if (!oldest.done) lane.startedBy.delete(oldest.value);
    }
    const now = this.now;
    return {
      release: () => {
        if (!lane.active.delete(id)) return;
        const left = (lane.activeBy.get(owner) ?? 1) - 1;
        if (left > 0) lane.activeBy.set(owner, left);
        else lane.activeBy.delete(owner);
        lane.latencyMs = nextLatency(lane.latencyMs, now() - started);
        lane.idleSince = now();
        lane.done.push(lane.idleSince);
        if (lane.done.length > this.options.maxWaitingPerLane) lane.done.shift();
        this.pump(lane);
      },
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

  /** re-checks the waiting lines as estimates change; forgets lanes idle for long */
  private sweep(): void {
    const t = this.now();
    for (const lane of this.lanes.values()) {
      if (lane.waiting.length > 0) {
        const allowed = this.allowedWaiting(lane);
        // give back the waiters beyond what the lane can start soon: the newest of the owner with the most first
        while (lane.waiting.length > allowed) {
          const counts = new Map<string, number>();
          for (const w of lane.waiting) counts.set(w.owner, (counts.get(w.owner) ?? 0) + 1);
          const i = heaviestDeferrable(lane.waiting, counts);
          if (i < 0) break;
          lane.waiting.splice(i, 1)[0]!.settle({ kind: 'deferred' });
        }
      } else if (
        lane.active.size === 0 &&
        !lane.timer &&
        t - lane.idleSince > LANE_IDLE_FORGET_MS &&
        (!lane.bucket || lane.bucket.isFull(t))
      ) {
        this.lanes.delete(lane.key);
      }
    }
  }
}

/** the newest deferrable waiter of the owner with the most waiters (-1: none may be deferred) */
function heaviestDeferrable(waiting: readonly Waiter[], counts: ReadonlyMap<string, number>): number {
  let pick = -1;
  let most = 0;
  for (let i = waiting.length - 1; i >= 0; i--) {
    const w = waiting[i]!;
    const n = counts.get(w.owner) ?? 0;
    if (w.mayDefer && n > most) {
      most = n;
      pick = i;
    }
  }
  return pick;
}

export function createLaneScheduler(options: LaneSchedulerOptions): LaneScheduler {
  return new Lanes(options);
}
