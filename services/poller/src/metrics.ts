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
 * PostgreSQL computes the summary (bucket counts, maximum, count) over every active target and
 * returns one row with at most `maxTargetSeries` per-target values (pollLagSummary): a scrape's
 * cost on the reporter does not grow with the number of targets, and the per-target series are
 * capped; the summary gauges see every target whatever the cap. `poller_metrics_reporter` (1 or 0) is exported by
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
  lag: LagSummary;
}

/** Poll lag over every active target, summarised in SQL: one row, plus the most lagging targets. */
interface LagSummary {
  targets: number;
  maxSeconds: number;
  /** cumulative counts, one per POLL_LAG_BUCKETS bound and +Inf */
  buckets: number[];
  /** the most lagging targets, largest first (at most maxTargetSeries) */
  worst: { target: string; seconds: number }[];
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

/**
 * One row per active target from poll_targets (the trigger-kept count of active monitors), its
 * lag from poll_cursors.last_success_at, or from its oldest active monitor's creation when it never
 * succeeded (a subquery through monitors(target_key, is_active), evaluated only then). PostgreSQL
 * returns the bucket counts and the `top` most lagging targets, never a row per target.
 */
const LAG_SQL = `
  WITH lag AS (
    SELECT t.target_key AS target,
           greatest(0, extract(epoch FROM $1::timestamptz - coalesce(c.last_success_at,
             (SELECT min(m.created_at) FROM monitors m WHERE m.target_key = t.target_key AND m.is_active),
             t.changed_at)))::float8 AS seconds
    FROM poll_targets t LEFT JOIN poll_cursors c ON c.target_key = t.target_key
    WHERE t.active_monitors > 0)
  SELECT count(*)::int AS targets, coalesce(max(seconds), 0)::float8 AS max_seconds,
         array[${POLL_LAG_BUCKETS.map((b) => `count(*) FILTER (WHERE seconds <= ${b})`).join(', ')}, count(*)]::int[] AS buckets,
         coalesce((SELECT json_agg(w) FROM (SELECT target, seconds FROM lag ORDER BY seconds DESC, target LIMIT $2) w), '[]') AS worst
  FROM lag`;

export async function pollLagSummary(db: Db, now: number, top: number): Promise<LagSummary> {
  const [row] = await db.$queryRawUnsafe<
    { targets: number; max_seconds: number; buckets: number[]; worst: { target: string; seconds: number }[] }[]
  >(LAG_SQL, new Date(now), top);
  return {
    targets: row?.targets ?? 0,
    maxSeconds: row?.max_seconds ?? 0,
    buckets: row?.buckets ?? [],
    worst: row?.worst ?? [],
  };
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
      const [outbox, lag] = await Promise.all([options.outboxLag(), pollLagSummary(db, now(), maxTargetSeries)]);
      return { pending: outbox.pending, oldestSeconds: outbox.oldestMs / 1000, lag };
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
      return s && s.lag.worst.map((l) => ({ labels: { target: l.target }, value: l.seconds }));
    },
  );
  scrapeGauge(
    registry,
    'poller_poll_lag_max_seconds',
    'largest poll lag of any active target (reporter only)',
    async () => {
      const s = await snapshot();
      return s && one(s.lag.maxSeconds);
    },
  );
  scrapeGauge(registry, 'poller_active_targets', 'targets with an active monitor (reporter only)', async () => {
    const s = await snapshot();
    return s && one(s.lag.targets);
  });
  scrapeGauge(
    registry,
    'poller_targets_by_poll_lag',
    'active targets whose poll lag is at most `le` seconds, cumulative (reporter only)',
    async () => {
      const s = await snapshot();
      if (s === null) return null;
      return [...POLL_LAG_BUCKETS, Infinity].map((le, i) => ({
        labels: { le: le === Infinity ? '+Inf' : String(le) },
        value: s.lag.buckets[i] ?? 0,
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
