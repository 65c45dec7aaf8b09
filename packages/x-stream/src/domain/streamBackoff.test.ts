import { initialBackoff, nextDelay, type BackoffState, type DropKind } from './streamBackoff';

function delays(kind: DropKind, n: number, retryAfterMs: number | null = null): number[] {
  let state: BackoffState = initialBackoff;
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const next = nextDelay(state, kind, retryAfterMs);
    out.push(next.delayMs);
    state = next.state;
  }
  return out;
}

describe("X's reconnect back-off", () => {
  it('reconnects a dropped connection at once', () => {
    expect(delays('dropped', 3)).toEqual([0, 0, 0]);
  });
  it('backs off linearly by 250 ms for network errors, up to 16 s', () => {
    expect(delays('network', 4)).toEqual([250, 500, 750, 1000]);
    expect(delays('network', 100).at(-1)).toBe(16_000);
  });
  it('backs off exponentially from 5 s for HTTP errors, up to 320 s', () => {
    expect(delays('http', 8)).toEqual([5000, 10_000, 20_000, 40_000, 80_000, 160_000, 320_000, 320_000]);
  });
  it('waits a minute, doubling, after a 429, and never less than the reset', () => {
    expect(delays('rate_limited', 3)).toEqual([60_000, 120_000, 240_000]);
    expect(delays('rate_limited', 1, 600_000)).toEqual([600_000]);
  });
  it('starts over when the kind of failure changes', () => {
    const a = nextDelay(initialBackoff, 'http');
    const b = nextDelay(a.state, 'http');
    expect(b.delayMs).toBe(10_000);
    expect(nextDelay(b.state, 'network').delayMs).toBe(250);
  });
});
