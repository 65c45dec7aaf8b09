/**
 * The poller's fleet-wide metrics, computed at scrape time (no timer) and exported by ONE replica
 * only — the metrics reporter (adapters/reporter.ts) — since they describe the shared database,
 * not the replica: every replica exporting them would double sums and alerts.
 *
 * - outbox lag: `poller_outbox_pending` and `poller_outbox_oldest_pending_seconds`;
 * - poll lag (now − a target's last successful poll, or − its oldest active monitor's creation
 *   when it never had one): `poller_poll_lag_seconds{target}` for the `maxTargetSeries` most
 *   lagging targets, and over every active target `poller_poll_lag_max_seconds`,
 *   `poller_active_targets` and `poller_targets_by_poll_lag{le}` (cumulative counts).
 *
 * Per-target series are bounded (1,000s of targets, one reporter, a cap on series); the summary
 * gauges see every target whatever the cap. `poller_metrics_reporter` (1 or 0) is exported by
 * every replica and says which one reports.
 */
import type client from 'prom-client';
import type { Db } from '@sts/db';
import type { MetricsReporter } from './adapters/reporter';

/** seconds; the cumulative buckets of poller_targets_by_poll_lag */
const POLL_LAG_BUCKETS = [60, 300, 900, 3600, 21_600, 86_400] as const;

export interface FleetMetricsOptions {
  registry: client.Registry;
  reporter: MetricsReporter;
  db: Db;
  /** the outbox's unpublished rows and the age of the oldest (OutboxRelay.lag) */
  outboxLag: () => Promise<{ pending: number; oldestMs: number }>;
  /** most per-target series (the most lagging targets); default 1000 */
  maxTargetSeries?: number;
  now?: () => number;
}

interface Sample {
  labels: Record<string, string | number>;
  value: number;
}

interface Snapshot {
  pending: number;
  oldestSeconds: number;
  /** every active target's lag in seconds, largest first */
  lags: { target: string; seconds: number }[];
}

/**
 * A gauge whose samples come from `samples()` at scrape time; none when it answers null. A plain
 * prom-client Gauge without labels always exports a value (0 after reset), which would make
 * the replicas that do not report look like they report 0.
 */
function scrapeGauge(
  registry: client.Registry,
  name: string,
  help: string,
  samples: () => Promise<Sample[] | null>,
): void {
  const metric = {
    name,
    help,
    type: 'gauge',
    aggregator: 'omit',
    async get() {
      return { name, help, type: 'gauge', aggregator: 'omit', values: (await samples()) ?? [] };
    },
    reset() {},
  };
  registry.registerMetric(metric as unknown as client.Metric);
}

async function pollLags(db: Db, now: number): Promise<Snapshot['lags']> {
  const rows = await db.$queryRaw<{ target: string; since: Date }[]>`
    SELECT m.target_key AS target, coalesce(c.last_success_at, min(m.created_at)) AS since
    FROM monitors m LEFT JOIN poll_cursors c ON c.target_key = m.target_key
    WHERE m.is_active
    GROUP BY m.target_key, c.last_success_at`;
  return rows
    .map((r) => ({ target: r.target, seconds: Math.max(0, (now - r.since.getTime()) / 1000) }))
    .sort((a, b) => b.seconds - a.seconds);
}

export function createFleetMetrics(options: FleetMetricsOptions): void {
  const { registry, reporter, db } = options;
  const now = options.now ?? Date.now;
  const maxTargetSeries = options.maxTargetSeries ?? 1000;
  let last: { at: number; snapshot: Promise<Snapshot | null> } | undefined;

  /** one reporter check and one set of queries per scrape, shared by the gauges */
  function snapshot(): Promise<Snapshot | null> {
    const at = Date.now();
    if (last && at - last.at < 1000) return last.snapshot;
    // a failed query (PostgreSQL down) exports nothing for these gauges rather than failing the scrape
    const taken = (async () => {
      if (!(await reporter.isReporter())) return null;
      const [outbox, lags] = await Promise.all([options.outboxLag(), pollLags(db, now())]);
      return { pending: outbox.pending, oldestSeconds: outbox.oldestMs / 1000, lags };
    })().catch(() => null);
    last = { at, snapshot: taken };
    return taken;
  }
  const one = (value: number): Sample[] => [{ labels: {}, value }];

  scrapeGauge(registry, 'poller_metrics_reporter', '1 on the replica that reports the fleet-wide metrics', async () =>
    one((await snapshot()) === null ? 0 : 1),
  );
  scrapeGauge(registry, 'poller_outbox_pending', 'events written but not yet published (reporter only)', async () => {
    const s = await snapshot();
    return s && one(s.pending);
  });
  scrapeGauge(
    registry,
    'poller_outbox_oldest_pending_seconds',
    'age of the oldest event not yet published, 0 when none (reporter only)',
    async () => {
      const s = await snapshot();
      return s && one(s.oldestSeconds);
    },
  );
  scrapeGauge(
    registry,
    'poller_poll_lag_seconds',
    `now minus the target's last successful poll, for the ${maxTargetSeries} most lagging targets (reporter only)`,
    async () => {
      const s = await snapshot();
      return s && s.lags.slice(0, maxTargetSeries).map((l) => ({ labels: { target: l.target }, value: l.seconds }));
    },
  );
  scrapeGauge(
    registry,
    'poller_poll_lag_max_seconds',
    'largest poll lag of any active target (reporter only)',
    async () => {
      const s = await snapshot();
      return s && one(s.lags[0]?.seconds ?? 0);
    },
  );
  scrapeGauge(registry, 'poller_active_targets', 'targets with an active monitor (reporter only)', async () => {
    const s = await snapshot();
    return s && one(s.lags.length);
  });
  scrapeGauge(
    registry,
    'poller_targets_by_poll_lag',
    'active targets whose poll lag is at most `le` seconds, cumulative (reporter only)',
    async () => {
      const s = await snapshot();
      if (s === null) return null;
      return [...POLL_LAG_BUCKETS, Infinity].map((le) => ({
        labels: { le: le === Infinity ? '+Inf' : String(le) },
        value: s.lags.filter((l) => l.seconds <= le).length,
      }));
    },
  );
}

/** seconds; detection_latency_seconds reaches well past any alert threshold (10 min) */
export const DETECTION_LATENCY_BUCKETS = [0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120, 300, 600] as const;

/**
 * `detection_latency_seconds{source, mode}`: a post's `created_at` to its hit recorded, one
 * observation per new hit, by this replica (a histogram sums over replicas). `source` is the
 * social source (`local`, `x`); `mode` how the hit was found: `push` (the local store's
 * notification), `poll` (the tick), or X's `search`, `timeline`, `stream`.
 */
export function createDetectionLatency(registry: client.Registry, Histogram: typeof client.Histogram) {
  const histogram = new Histogram({
    name: 'detection_latency_seconds',
    help: "a post's created_at to its hit recorded, by source and mode",
    labelNames: ['source', 'mode'] as const,
    buckets: [...DETECTION_LATENCY_BUCKETS],
    registers: [registry],
  });
  return {
    observe(source: string, mode: string, hits: readonly { tweetCreatedAt: Date; detectedAt: Date }[]): void {
      for (const h of hits) {
        const seconds = Math.max(0, (h.detectedAt.getTime() - h.tweetCreatedAt.getTime()) / 1000);
        histogram.observe({ source, mode }, seconds);
      }
    },
  };
}
