import { ConfigError } from '@sts/common';
import { loadGatewayEnv } from './env';

const base = { INTERNAL_TOKEN: 'x'.repeat(24) };

describe('gateway environment', () => {
  it('pipelines up to 8 calls per upstream socket unless told otherwise; 1 turns it off', () => {
    expect(loadGatewayEnv(base).UPSTREAM_PIPELINE_DEPTH).toBe(8);
    expect(loadGatewayEnv({ ...base, UPSTREAM_PIPELINE_DEPTH: '1' }).UPSTREAM_PIPELINE_DEPTH).toBe(1);
  });

  it('pipelines routes read-api answers within 2 ms on average unless told otherwise', () => {
    expect(loadGatewayEnv(base).UPSTREAM_PIPELINE_MAX_MS).toBe(2);
    expect(loadGatewayEnv({ ...base, UPSTREAM_PIPELINE_MAX_MS: '0.5' }).UPSTREAM_PIPELINE_MAX_MS).toBe(0.5);
    expect(() => loadGatewayEnv({ ...base, UPSTREAM_PIPELINE_MAX_MS: '-1' })).toThrow(/UPSTREAM_PIPELINE_MAX_MS/);
  });

  it.each(['0', '65', '2.5', 'eight'])('refuses UPSTREAM_PIPELINE_DEPTH=%s, naming it', (value) => {
    let err: unknown;
    try {
      loadGatewayEnv({ ...base, UPSTREAM_PIPELINE_DEPTH: value });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toContain('UPSTREAM_PIPELINE_DEPTH');
  });

  it('ends a stream after STREAM_MAX_LIFETIME_S, a day unless told otherwise; refuses a bad value, naming it', () => {
    expect(loadGatewayEnv(base).STREAM_MAX_LIFETIME_S).toBe(86_400);
    expect(loadGatewayEnv({ ...base, STREAM_MAX_LIFETIME_S: '3600' }).STREAM_MAX_LIFETIME_S).toBe(3600);
    for (const value of ['0', '-1', '1.5', 'day'])
      expect(() => loadGatewayEnv({ ...base, STREAM_MAX_LIFETIME_S: value })).toThrow(/STREAM_MAX_LIFETIME_S/);
  });
});
