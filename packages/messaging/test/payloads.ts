/**
 * This package's own test data (the general helpers are @sts/testing's): sample payloads of the
 * event contracts.
 */
import type { MonitorHitEvent, MonitorTestEvent } from '../src/contracts';

let seq = 0;

export function hitPayload(over: Partial<MonitorHitEvent> = {}): MonitorHitEvent {
  seq++;
  return {
    event: 'monitor.hit',
    monitor: { id: 'mon_1', targetUsername: 'alice', query: null, keywords: ['launch', 'big news'] },
    tweet: {
      id: `17900000000000${String(seq).padStart(5, '0')}`,
      text: 'The launch is today: big news',
      authorUsername: 'alice',
      createdAt: '2024-05-01T12:00:00.000Z',
    },
    detectedAt: '2024-05-01T12:00:05.123Z',
    ...over,
  };
}

export function testPayload(): MonitorTestEvent {
  return {
    event: 'monitor.test',
    monitor: { id: 'mon_2', targetUsername: 'bob', query: null, keywords: null },
    test: true,
  };
}
