/**
 * OpenTelemetry end to end, with an in-process OTLP/HTTP receiver standing in for the
 * collector: the services run as processes with OTEL_EXPORTER_OTLP_ENDPOINT pointing at it.
 * - gateway → read-api: the gateway's CLIENT span and read-api's SERVER span are one trace, the
 *   second a child of the first (W3C traceparent in the forwarded head);
 * - a hit published the way the poller's outbox relay does (the @sts/messaging publisher, traced
 *   as service `poller` in publish.fixture.ts) → RabbitMQ (traceparent in the AMQP headers) → the
 *   dispatcher's CONSUMER span → its `webhook attempt` span, one trace; the dispatcher's log
 *   lines written in it carry its trace id.
 * Without the variable nothing is exported (the gateway/read-api/dispatcher suites run so).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createSecretBox, generateApiKey } from '@sts/core';
import { createDbClient, type Db } from '@sts/db';
import { createSocialUser } from '@sts/social';
import {
  createAccount,
  createHit,
  createMonitor,
  createTestDatabase,
  createTestRedis,
  createTestVhost,
  rawRequest,
  spawnService,
  startHttpsReceiver,
  waitFor,
  type ServiceProcess,
} from '@sts/testing';
import { createUpstreamClient } from '@sts/http1';
import { startTelemetry, tracingEnabled } from './index';

interface ReceivedSpan {
  service: string;
  name: string;
  kind: number;
  traceId: string;
  spanId: string;
  parentSpanId: string;
}
type AnyValue = { stringValue?: string };
interface ExportRequest {
  resourceSpans: {
    resource: { attributes: { key: string; value: AnyValue }[] };
    scopeSpans: { spans: Omit<ReceivedSpan, 'service'>[] }[];
  }[];
}

/** OTLP/HTTP JSON receiver: POST /v1/traces */
async function startReceiver(): Promise<{ url: string; spans: ReceivedSpan[]; close(): Promise<void> }> {
  const spans: ReceivedSpan[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces' || !/json/.test(req.headers['content-type'] ?? ''))
        return void res.writeHead(415).end();
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as ExportRequest;
      for (const rs of body.resourceSpans) {
        const service = rs.resource.attributes.find((a) => a.key === 'service.name')?.value.stringValue ?? '';
        for (const ss of rs.scopeSpans)
          for (const s of ss.spans) spans.push({ ...s, service, parentSpanId: s.parentSpanId ?? '' });
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

const TOKEN = 'internal-token-for-tests-0123456789';
const SPAN_KIND = { SERVER: 2, CLIENT: 3, PRODUCER: 4, CONSUMER: 5 };
let receiver: Awaited<ReturnType<typeof startReceiver>>;
let testDb: Awaited<ReturnType<typeof createTestDatabase>>;
let db: Db;
const children: ServiceProcess[] = [];

beforeAll(async () => {
  receiver = await startReceiver();
  testDb = await createTestDatabase();
  db = createDbClient({ url: testDb.url, poolSize: 2 });
});

afterAll(async () => {
  for (const c of children) c.child.kill('SIGKILL');
  await db?.$disconnect();
  await testDb?.drop();
  await receiver?.close();
});

const spanNamed = (service: string, name: string) =>
  receiver.spans.find((s) => s.service === service && s.name === name);

it('traces a call from the gateway through read-api (one trace, read-api a child of the gateway)', async () => {
  const redis = createTestRedis();
  const account = await createAccount(db, 'free');
  const key = generateApiKey();
  await db.apiKey.create({ data: { accountId: account.id, keyHash: key.hash, prefix: key.prefix } });
  await createSocialUser(db, { username: 'traced', name: 'Traced' });
  const common = { DATABASE_URL: testDb.url, INTERNAL_TOKEN: TOKEN, LOG_LEVEL: 'error' };
  const otel = { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url };
  const readApi = spawnService('services/read-api/src/main.ts', { ...common, ...otel, READ_API_PORT: '0' });
  children.push(readApi);
  const readApiPort = (JSON.parse(await readApi.waitForLine(/read-api listening/)) as { port: number }).port;
  const gateway = spawnService('services/gateway/src/main.ts', {
    ...common,
    ...otel,
    GATEWAY_PORT: '0',
    READ_API_URL: `http://127.0.0.1:${readApiPort}`,
    REDIS_URL: redis.url,
    REDIS_KEY_PREFIX: redis.prefix,
  });
  children.push(gateway);
  try {
    const { port } = JSON.parse(await gateway.waitForLine(/gateway listening/)) as { port: number };
    const r = await rawRequest(port, 'GET', '/api/v1/users/traced', {
      headers: { authorization: `Bearer ${key.key}` },
    });
    expect(r.status).toBe(200);
    await waitFor(
      () => Promise.resolve(!!spanNamed('gateway', 'upstream GET') && !!spanNamed('read-api', 'read-api GET')),
      20_000,
    );
    const client = spanNamed('gateway', 'upstream GET')!;
    const server = spanNamed('read-api', 'read-api GET')!;
    expect(client.kind).toBe(SPAN_KIND.CLIENT);
    expect(server.kind).toBe(SPAN_KIND.SERVER);
    expect(server.traceId).toBe(client.traceId);
    expect(server.parentSpanId).toBe(client.spanId);
    expect(client.traceId).toMatch(/^[0-9a-f]{32}$/);
  } finally {
    gateway.child.kill('SIGTERM');
    readApi.child.kill('SIGTERM');
    await Promise.all([gateway.exited, readApi.exited]);
    await redis.cleanup();
  }
});

it('traces a hit from its publication through RabbitMQ to the webhook attempt, trace ids in the logs', async () => {
  const KEY = randomBytes(32).toString('base64');
  const https = await startHttpsReceiver();
  const amqpUrl = (await createTestVhost()).url;
  const account = await createAccount(db, 'starter');
  const monitor = await createMonitor(db, createSecretBox(KEY), { accountId: account.id, url: `${https.url}/hook` });
  const dispatcher = spawnService('services/webhook-dispatcher/src/main.ts', {
    DATABASE_URL: testDb.url,
    AMQP_URL: amqpUrl,
    SECRETS_ENCRYPTION_KEY: KEY,
    WEBHOOK_ALLOW_PRIVATE_HOSTS: 'localhost',
    LOG_LEVEL: 'debug',
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
  });
  children.push(dispatcher);
  await dispatcher.waitForLine(/webhook-dispatcher started/, 30_000);
  try {
    // a process publishes the hit like the poller's outbox relay, traced as the poller
    const hit = await createHit(db, monitor);
    const publisher = spawnService('packages/telemetry/src/publish.fixture.ts', {
      AMQP_URL: amqpUrl,
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      HIT: JSON.stringify({
        payload: hit.payload,
        accountId: monitor.accountId,
        hitId: hit.id,
        messageId: randomUUID(),
      }),
    });
    expect(await publisher.exited).toBe(0);
    await https.waitForRequests(1);
    await waitFor(
      () =>
        Promise.resolve(
          !!spanNamed('webhook-dispatcher', 'webhook attempt') && !!spanNamed('poller', 'publish monitor.hit'),
        ),
      20_000,
    );
    const produced = spanNamed('poller', 'publish monitor.hit')!;
    const consumed = spanNamed('webhook-dispatcher', 'process monitor.hit')!;
    const attempt = spanNamed('webhook-dispatcher', 'webhook attempt')!;
    expect([produced.kind, consumed.kind, attempt.kind]).toEqual([
      SPAN_KIND.PRODUCER,
      SPAN_KIND.CONSUMER,
      SPAN_KIND.CLIENT,
    ]);
    expect(consumed.traceId).toBe(produced.traceId);
    expect(consumed.parentSpanId).toBe(produced.spanId);
    expect(attempt.traceId).toBe(produced.traceId);
    expect(attempt.parentSpanId).toBe(consumed.spanId);
    // every line the dispatcher logged while handling the message carries the trace id
    const traced = dispatcher.lines.filter((l) => l.includes(produced.traceId));
    expect(traced.length).toBeGreaterThan(0);
    for (const l of traced)
      expect(JSON.parse(l)).toMatchObject({
        trace_id: produced.traceId,
        span_id: expect.stringMatching(/^[0-9a-f]{16}$/),
      });
  } finally {
    dispatcher.child.kill('SIGTERM');
    await dispatcher.exited;
    await https.close();
  }
});

it('is off without OTEL_EXPORTER_OTLP_ENDPOINT: no provider, no traceparent on the wire', async () => {
  expect(startTelemetry({ serviceName: 'gateway', endpoint: undefined })).toBeNull();
  expect(tracingEnabled()).toBe(false);
  const heads: string[] = [];
  const upstream = http.createServer((req, res) => {
    heads.push(JSON.stringify(req.headers));
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': '2' }).end('{}');
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  const client = createUpstreamClient({
    url: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
    timeoutMs: 5000,
  });
  try {
    const answer = await client.forward('GET', '/api/v1/users/x', 'accept: application/json\r\n', null);
    expect(answer.status).toBe(200);
    expect(heads).toHaveLength(1);
    expect(heads[0]).not.toMatch(/traceparent/);
  } finally {
    client.close();
    await new Promise((r) => upstream.close(r));
  }
});
