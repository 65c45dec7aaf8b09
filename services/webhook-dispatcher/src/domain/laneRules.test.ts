import { allowedWaiting, canStart, nextLatency, pruneDone, type LaneEstimate } from './laneRules';

const base: LaneEstimate = {
  now: 10_000,
  activeStarts: [],
  latencyMs: null,
  initialLatencyMs: 50,
  doneRecently: 0,
  holdMs: 1000,
  concurrency: 2,
  maxWaitingPerLane: 100,
  pace: null,
};

describe('lane rules', () => {
  it('lets a lane keep waiting what it is expected to start within holdMs', () => {
    expect(allowedWaiting(base)).toBe(40); // 1000 ms × 2 slots / 50 ms
    expect(allowedWaiting({ ...base, latencyMs: 10 })).toBe(100); // capped
    expect(allowedWaiting({ ...base, latencyMs: 400 })).toBe(5);
  });

  it('takes the age of the oldest task in flight as the latency when it is longer (a stalled lane keeps almost none)', () => {
    expect(allowedWaiting({ ...base, latencyMs: 20, activeStarts: [9_000, 6_000] })).toBe(0);
  });

  it('counts what the lane really completed in the last holdMs', () => {
    expect(allowedWaiting({ ...base, latencyMs: 2000, doneRecently: 7 })).toBe(7);
  });

  it('bounds a paced lane by its pace and the time its bucket is blocked', () => {
    expect(allowedWaiting({ ...base, latencyMs: 10, pace: { perSecond: 5, blockedMs: 0 } })).toBe(5);
    expect(allowedWaiting({ ...base, latencyMs: 10, pace: { perSecond: 5, blockedMs: 600 } })).toBe(2);
    expect(allowedWaiting({ ...base, latencyMs: 10, pace: { perSecond: 5, blockedMs: 5000 } })).toBe(0);
  });

  it('starts a task only under the concurrency and when the pace allows, asking the pace only then', () => {
    let asked = 0;
    const wait = (ms: number) => () => (asked++, ms);
    expect(canStart(1, 2, wait(0))).toBe(true);
    expect(canStart(1, 2, wait(30))).toBe(false);
    expect(asked).toBe(2);
    expect(canStart(2, 2, wait(0))).toBe(false);
    expect(asked).toBe(2);
  });

  it('moves the latency estimate a fifth of the way to each new sample', () => {
    expect(nextLatency(null, 120)).toBe(120);
    expect(nextLatency(100, 200)).toBeCloseTo(120);
  });

  it('forgets completions older than holdMs', () => {
    const done = [8_000, 9_100, 9_500];
    pruneDone(done, 10_000, 1000);
    expect(done).toEqual([9_100, 9_500]);
  });
});
