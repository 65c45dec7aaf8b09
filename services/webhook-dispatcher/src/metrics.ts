/** The dispatcher's Prometheus metrics (registered on `registry` when given). */
import client from 'prom-client';
import type { MonitorContextCache } from './contextCache';

export type DispatcherMetrics = ReturnType<typeof createMetrics>;

/** a step of one delivery inside the process, by one label: milliseconds normally, seconds when something backs up */
function stepHistogram<L extends string>(name: string, help: string, label: L, registers: client.Registry[]) {
  return new client.Histogram<L>({
    name,
    help,
    labelNames: [label],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers,
  });
}

/** queue name → messages waiting, read from the broker (null until the dispatcher set it up) */
type DeadLetterReader = () => Promise<Record<string, number>>;

export function createMetrics(registry: client.Registry | undefined) {
  const registers = registry ? [registry] : [];
  let readDeadLetters: DeadLetterReader | null = null;
  return {
    /** where `webhook_dispatcher_dlq_messages` reads its values at scrape time */
    setDeadLetterReader(read: DeadLetterReader | null) {
      readDeadLetters = read;
    },
    attempts: new client.Counter({
      name: 'webhook_delivery_attempts_total',
      help: 'Webhook delivery attempts by event, endpoint kind and outcome',
      labelNames: ['event', 'kind', 'outcome'] as const,
      registers,
    }),
    latency: new client.Histogram({
      name: 'webhook_delivery_duration_seconds',
      help: 'Time from sending a webhook request to the end of its response',
      labelNames: ['outcome'] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15],
      registers,
    }),
    hitAge: new client.Histogram({
      name: 'webhook_hit_age_seconds',
      help: 'Time from a hit being detected to its webhook being answered (live hits only)',
      // past every alert threshold (WebhookHitAgeHigh: p99 over 60 s): with 60 as the top finite
      // bucket, histogram_quantile could never return more than 60 and the alert never fire
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800],
      registers,
    }),
    /** messages waiting in the dispatcher's dead-letter queue, read from the broker at scrape time */
    deadLetters: new client.Gauge({
      name: 'webhook_dispatcher_dlq_messages',
      help: 'Messages in the dead-letter queue (read from RabbitMQ at scrape time)',
      labelNames: ['queue'] as const,
      registers,
      async collect() {
        if (!readDeadLetters) return;
        try {
          for (const [queue, n] of Object.entries(await readDeadLetters())) this.set({ queue }, n);
        } catch {
          // broker unreachable: the scrape keeps the last value (RabbitMQ alerts cover the outage)
        }
      },
    }),
    /** consume (or claim) → ready to go out: the monitor look-up, skip rules, body and secrets */
    prepare: stepHistogram(
      'webhook_dispatcher_prepare_seconds',
      'Time from a delivery being taken (message consumed, due row claimed) to being ready to send',
      'source',
      registers,
    ),
    /** a ready delivery waiting for its endpoint's lane (concurrency, pace, fair share between accounts) */
    laneWait: stepHistogram(
      'webhook_dispatcher_lane_wait_seconds',
      "Time a ready delivery waited for a slot in its endpoint's lane",
      'source',
      registers,
    ),
    /** an attempt row from the request to its commit: `batched` shares an insert, `with_due` carries its due row */
    record: stepHistogram(
      'webhook_dispatcher_record_seconds',
      'Time from an attempt row being written to its commit, by write (batched insert, or with its due row)',
      'write',
      registers,
    ),
    messages: new client.Counter({
      name: 'webhook_dispatcher_messages_total',
      help: 'Messages handled by routing key and result',
      labelNames: ['routing_key', 'result'] as const,
      registers,
    }),
  };
}

/**
 * The monitor cache's counts, read at scrape time: `webhook_dispatcher_monitor_lookups_total` and
 * `webhook_dispatcher_monitor_announcements_total` (changes heard, each dropping what it names)
 */
export function registerCacheMetrics(registry: client.Registry, cache: MonitorContextCache): void {
  const reported = { hit: 0, miss: 0, untrusted: 0 };
  new client.Counter({
    name: 'webhook_dispatcher_monitor_lookups_total',
    help: 'Monitor look-ups of deliveries: hit (from the cache), miss (read), untrusted (read: the cache was not trusted)',
    labelNames: ['result'] as const,
    registers: [registry],
    collect() {
      for (const result of ['hit', 'miss', 'untrusted'] as const) {
        this.inc({ result }, cache.counts[result] - reported[result]);
        reported[result] = cache.counts[result];
      }
    },
  });
  let announced = 0;
  new client.Counter({
    name: 'webhook_dispatcher_monitor_announcements_total',
    help: 'Monitor context changes announced by PostgreSQL and heard by this process',
    registers: [registry],
    collect() {
      this.inc(cache.announcements - announced);
      announced = cache.announcements;
    },
  });
}
