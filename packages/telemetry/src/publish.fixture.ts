/**
 * For traces.test.ts: publishes one `monitor.hit` the way the poller's outbox relay does (the
 * @sts/messaging publisher), traced as service `poller`, then flushes its spans and exits. A child
 * process because the OTLP exporter runs in plain node (jest's module system cannot load it).
 * Env: OTEL_EXPORTER_OTLP_ENDPOINT, AMQP_URL, HIT (JSON: payload, accountId, hitId, messageId).
 */
import { createLogger } from '@sts/common';
import { AmqpClient, type PayloadOf } from '@sts/messaging';
import { startTelemetry } from './index';

async function main(): Promise<void> {
  const telemetry = startTelemetry({ serviceName: 'poller', endpoint: process.env.OTEL_EXPORTER_OTLP_ENDPOINT });
  const hit = JSON.parse(process.env.HIT ?? '{}') as {
    payload: PayloadOf<'monitor.hit'>;
    accountId: string;
    hitId: string;
    messageId: string;
  };
  const client = new AmqpClient({
    url: process.env.AMQP_URL ?? '',
    logger: createLogger({ service: 'poller', level: 'error' }),
    name: 'poller',
  });
  await client.start();
  await client.publish('monitor.hit', hit.payload, {
    messageId: hit.messageId,
    headers: { accountId: hit.accountId, hitId: hit.hitId },
  });
  await client.stop();
  await telemetry?.shutdown();
  process.stdout.write('{"message":"published"}\n');
}

void main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
