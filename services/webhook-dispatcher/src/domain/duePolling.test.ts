/** When the due deliveries' poller looks again: soon while it keeps finding work, else every pollMs. */
import { nextPollDelay } from './duePolling';

describe('due polling', () => {
  const now = 1_800_000_000_000;

  it('idle (nothing claimed yet, or not within pollMs): every pollMs', () => {
    expect(nextPollDelay({ pollMs: 1000 }, now, -Infinity)).toBe(1000);
    expect(nextPollDelay({ pollMs: 1000, busyPollMs: 50 }, now, now - 1000)).toBe(1000);
    expect(nextPollDelay({ pollMs: 1000, busyPollMs: 50 }, now, now - 5000)).toBe(1000);
  });

  it('a claim less than pollMs ago: every busyPollMs (default a tenth of pollMs, at least 1 ms)', () => {
    expect(nextPollDelay({ pollMs: 1000, busyPollMs: 50 }, now, now)).toBe(50);
    expect(nextPollDelay({ pollMs: 1000, busyPollMs: 50 }, now, now - 999)).toBe(50);
    expect(nextPollDelay({ pollMs: 1000 }, now, now - 10)).toBe(100);
    expect(nextPollDelay({ pollMs: 5 }, now, now)).toBe(1);
  });
});
