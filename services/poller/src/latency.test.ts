import { Histogram, Registry } from 'prom-client';
import { createDetectionLatency, DETECTION_LATENCY_BUCKETS } from './metrics';

describe('detection_latency_seconds', () => {
  it('observes created_at → hit recorded per new hit, by source and mode, with buckets up to 600 s', async () => {
    const registry = new Registry();
    const latency = createDetectionLatency(registry, Histogram);
    const at = new Date('2026-11-24T00:00:10.000Z');
    const hit = (secondsBefore: number) => ({
      tweetCreatedAt: new Date(at.getTime() - secondsBefore * 1000),
      detectedAt: at,
    });
    latency.observe('local', 'push', [hit(0.2), hit(1.5)]);
    latency.observe('x', 'search', [hit(45), hit(900)]);
    const text = await registry.metrics();
    /** the cumulative count of one bucket, whatever the order prom-client writes the labels in */
    const bucket = (source: string, mode: string, le: string) => {
      for (const line of text.split('\n')) {
        if (!line.startsWith('detection_latency_seconds_bucket{')) continue;
        const labels = line.slice(line.indexOf('{') + 1, line.lastIndexOf('}'));
        const want = [`le="${le}"`, `source="${source}"`, `mode="${mode}"`];
        if (want.every((w) => labels.split(',').includes(w))) return Number(line.slice(line.lastIndexOf(' ') + 1));
      }
      return NaN;
    };
    expect(Math.max(...DETECTION_LATENCY_BUCKETS)).toBe(600);
    expect(bucket('local', 'push', '0.25')).toBe(1);
    expect(bucket('local', 'push', '1')).toBe(1);
    expect(bucket('local', 'push', '2')).toBe(2);
    expect(bucket('x', 'search', '30')).toBe(0);
    expect(bucket('x', 'search', '60')).toBe(1);
    expect(bucket('x', 'search', '600')).toBe(1);
    expect(bucket('x', 'search', '+Inf')).toBe(2);
    // a clock that puts a hit before its post counts as 0, never negative
    latency.observe('local', 'poll', [{ tweetCreatedAt: new Date(at.getTime() + 500), detectedAt: at }]);
    const after = await registry.metrics();
    expect(after).toMatch(/detection_latency_seconds_sum\{[^}]*mode="poll"[^}]*\} 0\n/);
  });
});
