/**
 * The lane scheduler on its own (no I/O): a stalled endpoint keeps its concurrency and (almost)
 * no waiting line, another endpoint starts at once, a paced lane waits for its tokens.
 */
import type { PaceRule } from './domain/pacing';
import { createLaneScheduler, type LaneScheduler, type LaneSlot } from './lanes';

const never = () => new Promise<never>(() => undefined);
const tick = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `task` in a slot of lane `key`, released after it (what the dispatcher's flow does around a send) */
async function run<T>(
  lanes: LaneScheduler,
  key: string,
  pace: PaceRule | null,
  mayDefer: boolean,
  task: (slot: LaneSlot) => Promise<T>,
  owner?: string,
) {
  const acquired = await lanes.acquire(key, pace, mayDefer, owner);
  if (acquired.kind !== 'acquired') return acquired;
  try {
    return { kind: 'ran' as const, value: await task(acquired.slot) };
  } finally {
    acquired.slot.release();
  }
}

describe('lane scheduler', () => {
  it('a stalled lane holds only its concurrency; the rest is deferred, and other lanes run at once', async () => {
    const lanes = createLaneScheduler({ concurrency: 2, holdMs: 200, maxWaitingPerLane: 50, sweepMs: 20 });
    try {
      const first = [0, 1, 2, 3, 4].map(() => run(lanes, 'dead:443', null, true, never));
      // two in flight, three waiting (the lane has no history yet: it looks fast)
      expect(lanes.stats()).toMatchObject({ active: 2, waiting: 3 });
      await tick(300);
      // the deliveries in flight got old: the sweep gave the waiting ones back for parking
      await expect(Promise.all(first.slice(2))).resolves.toEqual([
        { kind: 'deferred' },
        { kind: 'deferred' },
        { kind: 'deferred' },
      ]);
      await expect(run(lanes, 'dead:443', null, true, never)).resolves.toEqual({ kind: 'deferred' });
      await expect(run(lanes, 'healthy:443', null, true, () => Promise.resolve('sent'))).resolves.toEqual({
        kind: 'ran',
        value: 'sent',
      });
      // without parking (mayDefer false) a message waits instead of being deferred
      const held = run(lanes, 'dead:443', null, false, never);
      expect(lanes.stats().waiting).toBe(1);
      lanes.releaseAll();
      await expect(held).resolves.toEqual({ kind: 'released' });
    } finally {
      lanes.close();
    }
  });

  it('paces a lane by its token bucket and frees the slot on release()', async () => {
    const lanes = createLaneScheduler({ concurrency: 8, holdMs: 5000, maxWaitingPerLane: 50 });
    try {
      const started: number[] = [];
      const t0 = Date.now();
      const runs = Array.from({ length: 4 }, () =>
        run(lanes, 'discord:1', { burst: 2, perSecond: 10 }, false, (control) => {
          started.push(Date.now() - t0);
          control.release();
          return Promise.resolve();
        }),
      );
      await Promise.all(runs);
      expect(started).toHaveLength(4);
      // two at once, then one per 100 ms
      expect(started[2]!).toBeGreaterThanOrEqual(90);
      expect(started[3]!).toBeGreaterThanOrEqual(190);
    } finally {
      lanes.close();
    }
  });

  it("shares a lane fairly between accounts: one account's backlog does not hold another's delivery back", async () => {
    const lanes = createLaneScheduler({ concurrency: 1, holdMs: 60_000, maxWaitingPerLane: 100 });
    try {
      const order: string[] = [];
      let open!: () => void;
      const gate = new Promise<void>((r) => (open = r));
      const job = (name: string, wait?: Promise<void>) => async () => {
        await wait;
        order.push(name);
      };
      // account a: one in flight (held), then a recovery of 20 queued behind it
      const runs = [run(lanes, 'host:443', null, false, job('a0', gate), 'a')];
      for (let i = 1; i <= 20; i++) runs.push(run(lanes, 'host:443', null, false, job(`a${i}`), 'a'));
      // account b's live delivery to the same host arrives last
      runs.push(run(lanes, 'host:443', null, false, job('b0'), 'b'));
      open();
      await Promise.all(runs);
      // b runs as soon as the lane frees, not after a's 20
      expect(order.slice(0, 2)).toEqual(['a0', 'b0']);
      expect(order).toHaveLength(22);
    } finally {
      lanes.close();
    }
  });

  it("a full line makes room for another account's delivery by parking the newest of the biggest backlog", async () => {
    const lanes = createLaneScheduler({ concurrency: 1, holdMs: 60_000, maxWaitingPerLane: 4 });
    try {
      const held = run(lanes, 'host:443', null, true, never, 'a');
      const backlog = [1, 2, 3, 4].map(() => run(lanes, 'host:443', null, true, never, 'a'));
      expect(lanes.stats()).toMatchObject({ active: 1, waiting: 4 });
      // a's fifth waits nowhere: the line is full
      await expect(run(lanes, 'host:443', null, true, never, 'a')).resolves.toEqual({ kind: 'deferred' });
      // b's delivery takes the place of a's newest waiter, which is parked
      const b = run(lanes, 'host:443', null, true, never, 'b');
      await expect(backlog[3]).resolves.toEqual({ kind: 'deferred' });
      expect(lanes.stats()).toMatchObject({ active: 1, waiting: 4 });
      lanes.releaseAll();
      await expect(b).resolves.toEqual({ kind: 'released' });
      void held;
    } finally {
      lanes.close();
    }
  });
});
