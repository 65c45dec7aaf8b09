/** The dispatcher's Prometheus metrics (registered on `registry` when given). */
import client from 'prom-client';

export type DispatcherMetrics = ReturnType<typeof createMetrics>;

export function createMetrics(registry: client.Registry | undefined) {
  const registers = registry ? [registry] : [];
  return {
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
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    }),
    messages: new client.Counter({
      name: 'webhook_dispatcher_messages_total',
      help: 'Messages handled by routing key and result',
      labelNames: ['routing_key', 'result'] as const,
      registers,
    }),
  };
}
