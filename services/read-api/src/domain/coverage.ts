/** The coverage record's serialiser (@sts/api-contract CoverageRecord). */
import type { CoverageRecord } from '@sts/api-contract';
import type { LatencyStats, MonitorCoverage } from '@sts/db';

const iso = (d: Date | null) => (d === null ? null : d.toISOString());

const stats = (s: LatencyStats) => ({ count: s.count, p50_ms: s.p50Ms, p95_ms: s.p95Ms });

export function coverageRecord(c: MonitorCoverage & { monitorId: string }): CoverageRecord {
  const window = (w: MonitorCoverage['latency']['last24h']) => ({
    post_to_detected: stats(w.detected),
    detected_to_delivered: stats(w.delivered),
  });
  return {
    monitor_id: c.monitorId,
    covered_until: iso(c.coveredUntil),
    gaps: c.gaps.map((g) => ({
      from: g.from.toISOString(),
      to: iso(g.to),
      reason: g.reason,
      filled_at: iso(g.filledAt),
    })),
    latency: { last_24h: window(c.latency.last24h), last_7d: window(c.latency.last7d) },
    intake: c.intake && {
      path: c.intake.path,
      event_types: c.intake.eventTypes,
      confirmed_at: iso(c.intake.confirmedAt),
    },
  };
}
