/**
 * The gateway's AMQP use: one connection per process carrying both its consumers (apikey.changed
 * for the live-key filter, monitor.hit for the streams), and both work again after the broker
 * closes that connection (management API). The gateway runs as a process against real
 * PostgreSQL, Redis and RabbitMQ (a vhost of this test).
 */
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { createLogger } from '@sts/common';
import { createSecretBox, generateApiKey } from '@sts/core';
import { createDbClient, type Db } from '@sts/db';
import { AmqpClient } from '@sts/messaging';
import {
  closeConnectionsNamed,
  createAccountWithKey,
  createHit,
  createMonitor,
  createTestDatabase,
  createTestRedis,
  createTestVhost,
  management,
  spawnService,
  type ServiceProcess,
  waitFor,
} from '@sts/testing';

const box = createSecretBox(Buffer.alloc(32, 7));

let dbHandle: Awaited<ReturnType<typeof createTestDatabase>>;
let redisHandle: ReturnType<typeof createTestRedis>;
let vhost: { url: string; vhost: string };
let db: Db;
let publisher: AmqpClient;
let gateway: ServiceProcess;
let port: number;

beforeAll(async () => {
  dbHandle = await createTestDatabase();
  db = createDbClient({ url: dbHandle.url, poolSize: 2 });
  redisHandle = createTestRedis();
  vhost = await createTestVhost();
  publisher = new AmqpClient({
    url: vhost.url,
    logger: createLogger({ service: 'test', level: 'error' }),
    name: 'test',
  });
  await publisher.start();
}, 60_000);

afterAll(async () => {
  gateway?.child.kill('SIGTERM');
  await gateway?.exited;
  await publisher?.stop();
  await db?.$disconnect();
  await redisHandle?.cleanup();
  await dbHandle?.drop();
});

/** the vhost's connections the gateway opened (its AmqpClient names them "gateway") */
async function gatewayConnections(): Promise<string[]> {
  const r = await management('GET', `/api/vhosts/${encodeURIComponent(vhost.vhost)}/connections`);
  expect(r.ok).toBe(true);
  const all = (await r.json()) as { name: string; client_properties?: { connection_name?: string } }[];
  return all.filter((c) => c.client_properties?.connection_name !== 'test').map((c) => c.name);
}

const count = (re: RegExp) => gateway.lines.filter((l) => re.test(l)).length;

/** the live hits of one open stream, collected as they arrive */
function openStream(key: string): Promise<{ texts: string[]; close(): void }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: '/api/v1/stream', headers: { authorization: `Bearer ${key}` } },
      (res) => {
        expect(res.statusCode).toBe(200);
        const texts: string[] = [];
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          for (const m of chunk.matchAll(/^data: (\{.*\})$/gm))
            texts.push((JSON.parse(m[1]!) as { tweet: { text: string } }).tweet.text);
        });
        res.on('error', () => undefined);
        resolve({ texts, close: () => req.destroy() });
      },
    );
    req.on('error', reject);
    req.end();
  });
}

it('holds one AMQP connection for key changes and live hits, and both work again after the broker closes it', async () => {
  // known at start (the filter is built from PostgreSQL before listening)
  const account = await createAccountWithKey(db, 'starter');
  const monitor = await createMonitor(db, box, { accountId: account.accountId, targetUsername: 'nasa' });
  gateway = spawnService('services/gateway/src/main.ts', {
    DATABASE_URL: dbHandle.url,
    INTERNAL_TOKEN: 'internal-token-for-tests-0123456789',
    LOG_LEVEL: 'info',
    GATEWAY_PORT: '0',
    GATEWAY_HOST: '127.0.0.1',
    READ_API_URL: 'http://127.0.0.1:1',
    REDIS_URL: redisHandle.url,
    REDIS_KEY_PREFIX: redisHandle.prefix,
    AMQP_URL: vhost.url,
    // new keys reach the filter by apikey.changed only (the database sync and rebuild are far off)
    KEY_FILTER_SYNC_MS: '600000',
    KEY_FILTER_REBUILD_MS: '86400000',
    PLAN_STARTER_PER_MINUTE: '100000',
  });
  port = (JSON.parse(await gateway.waitForLine(/gateway listening/)) as { port: number }).port;
  await waitFor(() => count(/apikey.changed subscribed/) === 1 && count(/monitor.hit subscribed/) === 1, 20_000);
  await waitFor(async () => (await gatewayConnections()).length === 1, 10_000);

  const stream = await openStream(account.key);
  const hit = async (text: string) => {
    const h = await createHit(db, monitor, text);
    await publisher.publish('monitor.hit', h.payload, {
      messageId: randomUUID(),
      headers: { accountId: account.accountId, hitId: h.id },
    });
  };
  await hit('before');
  await waitFor(() => stream.texts.includes('before'), 10_000);

  /** a key written to the database and announced on apikey.changed, as the dashboard does */
  const announcedKeyWorks = async () => {
    const k = generateApiKey();
    await db.apiKey.create({ data: { accountId: account.accountId, keyHash: k.hash, prefix: k.prefix } });
    await publisher.publish(
      'apikey.changed',
      { keyHash: k.hash, change: 'created', occurredAt: new Date().toISOString() },
      { messageId: randomUUID(), headers: { accountId: account.accountId } },
    );
    // refused after the key check (bad monitor id: 400, nothing charged) instead of 401
    await waitFor(async () => {
      const r = await fetch(`http://127.0.0.1:${port}/api/v1/stream?monitor=x`, {
        headers: { authorization: `Bearer ${k.key}` },
      });
      await r.arrayBuffer();
      return r.status === 400;
    }, 10_000);
  };
  await announcedKeyWorks();

  expect(await closeConnectionsNamed(vhost.vhost, 'gateway')).toBe(1);
  await hit('while reconnecting');
  await waitFor(() => count(/apikey.changed subscribed/) === 2 && count(/monitor.hit subscribed/) === 2, 30_000);
  await waitFor(async () => (await gatewayConnections()).length === 1, 10_000);
  // the stream stayed open: what was published while the feed was down is read again, then live hits flow
  await waitFor(() => stream.texts.includes('while reconnecting'), 10_000);
  await hit('after');
  await waitFor(() => stream.texts.includes('after'), 10_000);
  expect(stream.texts).toEqual(['before', 'while reconnecting', 'after']);
  await announcedKeyWorks();
  stream.close();
}, 120_000);
