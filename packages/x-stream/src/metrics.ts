/**
 * The `stream` mode's metrics, per replica (only the holder's move): `poller_x_stream_connected`
 * (1 while this replica's stream connection is up), `poller_x_stream_reconnects_total{reason}`,
 * `poller_x_stream_backfilled_posts_total`, `poller_x_stream_rules`,
 * `poller_x_stream_overflow_targets`, `poller_x_stream_owed_windows`, `poller_x_stream_owed_oldest_seconds`,
 * `poller_x_stream_backfill_reads_total{family,result}` and `detection_latency_seconds{source="x", mode="stream"}`.
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { StreamMetrics } from './streamMode';

export interface LatencyRecorder {
  observe(source: string, mode: string, hits: readonly { tweetCreatedAt: Date; detectedAt: Date }[]): void;
}

/** detection_latency_seconds when no other part of the poller registered it */
function ownLatency(registry: Registry): LatencyRecorder {
  const histogram =
    (registry.getSingleMetric('detection_latency_seconds') as Histogram<'source' | 'mode'> | undefined) ??
    new Histogram({
      name: 'detection_latency_seconds',
      help: "a post's created_at to its hit recorded, by source and mode",
      labelNames: ['source', 'mode'],
      buckets: [0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120, 300, 600],
      registers: [registry],
    });
  return {
    observe(source, mode, hits) {
      for (const h of hits)
        histogram.observe({ source, mode }, Math.max(0, (h.detectedAt.getTime() - h.tweetCreatedAt.getTime()) / 1000));
    },
  };
}

export function createStreamMetrics(
  registry: Registry,
  options: { latency?: LatencyRecorder; hits?: (n: number) => void } = {},
): StreamMetrics {
  const latency = options.latency ?? ownLatency(registry);
  const connected = new Gauge({
    name: 'poller_x_stream_connected',
    help: "1 while this replica's X filtered-stream connection is up",
    registers: [registry],
  });
  connected.set(0);
  const reconnects = new Counter({
    name: 'poller_x_stream_reconnects_total',
    help: 'X stream connections lost or refused, by reason (dropped, network, http, rate_limited, stall, budget)',
    labelNames: ['reason'],
    registers: [registry],
  });
  const backfilled = new Counter({
    name: 'poller_x_stream_backfilled_posts_total',
    help: 'posts read by the stream holder’s backfill searches (gaps, rule changes, overflow)',
    registers: [registry],
  });
  const rules = new Gauge({ name: 'poller_x_stream_rules', help: 'filtered-stream rules held', registers: [registry] });
  const overflow = new Gauge({
    name: 'poller_x_stream_overflow_targets',
    help: 'stream targets beyond X_MAX_RULES, polled by batched search instead',
    registers: [registry],
  });
  const owedRows = new Gauge({
    name: 'poller_x_stream_owed_windows',
    help: 'backfill windows (username × since) no search has read yet: gaps, new rules, refused searches',
    registers: [registry],
  });
  const owedAge = new Gauge({
    name: 'poller_x_stream_owed_oldest_seconds',
    help: 'age of the oldest owed backfill window (0: none)',
    registers: [registry],
  });
  const reads = new Counter({
    name: 'poller_x_stream_backfill_reads_total',
    help: 'reads of the owed backfill by family (search: a batched search; timeline: an account read through its user timeline when the search budget is spent) and result (ok, refused, failed, unreadable)',
    labelNames: ['family', 'result'],
    registers: [registry],
  });
  // every series from the start, so a rate() or an alert sees the first read
  for (const result of ['ok', 'refused', 'failed'])
    for (const family of ['search', 'timeline']) reads.inc({ family, result }, 0);
  reads.inc({ family: 'timeline', result: 'unreadable' }, 0);
  return {
    connected: (v) => connected.set(v),
    backfillRead: (family, result) => reads.inc({ family, result }),
    owed: (rows, age) => {
      owedRows.set(rows);
      owedAge.set(age);
    },
    reconnect: (reason) => reconnects.inc({ reason }),
    backfilled: (n) => backfilled.inc(n),
    hits: (n) => options.hits?.(n),
    detected: (hits) => latency.observe('x', 'stream', hits),
    rules: (count, overflowTargets) => {
      rules.set(count);
      overflow.set(overflowTargets);
    },
  };
}
