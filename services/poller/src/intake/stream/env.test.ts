import { spawnService } from '@sts/testing';
import { loadPollerEnv } from '../../env';

describe('stream mode variables', () => {
  it('defaults: X Pro limits (1,024-character rules, 1,000 rules), 20 s settle, 5 s coalescing, no replay, 10 s lease', () => {
    const env = loadPollerEnv({});
    expect(env).toMatchObject({
      X_RULE_MAX_LENGTH: 1024,
      X_MAX_RULES: 1000,
      X_RULE_SETTLE_SECONDS: 20,
      X_RULE_COALESCE_SECONDS: 5,
      X_STREAM_BACKFILL_MINUTES: 0,
      X_STREAM_LEASE_SECONDS: 10,
      X_BACKFILL_LOOKUP: 'auto',
    });
    expect(loadPollerEnv({ X_BACKFILL_LOOKUP: 'off' }).X_BACKFILL_LOOKUP).toBe('off');
    expect(env.X_MONITOR_MODE).toBe('stream');
  });

  it.each([
    ['X_RULE_MAX_LENGTH', '19'],
    ['X_RULE_MAX_LENGTH', '4097'],
    ['X_RULE_MAX_LENGTH', 'long'],
    ['X_MAX_RULES', '0'],
    ['X_MAX_RULES', '1.5'],
    ['X_RULE_SETTLE_SECONDS', '-1'],
    ['X_STREAM_BACKFILL_MINUTES', '6'],
    ['X_STREAM_LEASE_SECONDS', '2'],
    ['X_RULE_COALESCE_SECONDS', '61'],
    ['X_BACKFILL_LOOKUP', 'sometimes'],
  ])('%s=%s stops the poller at start with exit code 2 naming the variable', async (name, value) => {
    const proc = spawnService('services/poller/src/main.ts', { [name]: value, LOG_LEVEL: 'error' });
    expect(await proc.exited).toBe(2);
    expect(proc.lines.join('\n')).toContain(name);
  });
});
