/**
 * A flood of well-formed unknown API keys from one address neither costs database work nor locks
 * out valid keys from that address: the gateway (its composition root, as a process) asks its
 * filter of live keys first, and learns new keys from apikey.changed on the event bus. Real
 * PostgreSQL (transactions counted by pg_stat_database), Redis and RabbitMQ; read-api running.
 */
import http from 'node:http';
import { Client } from 'pg';
import { createLogger, evictCachedApiKey } from '@sts/common';
import { generateApiKey, plansFromEnv } from '@sts/core';
import { createDbClient, type Db } from '@sts/db';
import { AmqpClient } from '@sts/messaging';
import { createSocialUser } from '@sts/social';
import {
  createTestDatabase,
  createTestRedis,
  createTestVhost,
  spawnService,
  waitFor,
  type ServiceProcess,
} from '@sts/testing';
import { createUseCases, type UseCases } from '@sts/usecases';
import { Redis } from 'ioredis';

const TOKEN = 'internal-token-for-tests-0123456789';
const FLOOD = 3000;
const logger = createLogger({ service: 'key-flood-test', level: 'error' });

/** PostgreSQL flushes a busy backend's counters at most once a second and an idle one's within 10 s. */
const STATS_SETTLE_MS = Number(process.env.STATS_SETTLE_MS ?? 11_000);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let dbHandle: Awaited<ReturnType<typeof createTestDatabase>>;
let redisHandle: ReturnType<typeof createTestRedis>;
let vhost: { url: string; vhost: string };
let db: Db;
let redis: Redis;
let amqp: AmqpClient;
let uc: UseCases;
let readApi: ServiceProcess;
let gateway: ServiceProcess;
let port: number;
const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });

function get(key: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: '/api/v1/users/flooduser', headers: { 'x-api-key': key }, agent },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** committed + rolled-back transactions of the test database, as PostgreSQL has counted them */
async function transactions(): Promise<number> {
  const c = new Client({ connectionString: dbHandle.url });
  await c.connect();
  try {
    const r = await c.query<{ n: string }>(
      'SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = current_database()',
    );
    return Number(r.rows[0]!.n);
  } finally {
    await c.end();
  }
}

beforeAll(async () => {
  dbHandle = await createTestDatabase();
  redisHandle = createTestRedis();
  vhost = await createTestVhost();
  db = createDbClient({ url: dbHandle.url, poolSize: 2 });
  redis = new Redis(redisHandle.url, { keyPrefix: redisHandle.prefix });
  amqp = new AmqpClient({ url: vhost.url, logger, name: 'key-flood-test' });
  await amqp.start();
  uc = createUseCases({
    db,
    plans: plansFromEnv({
      PLAN_FREE_MONTHLY_QUOTA: 1000,
      PLAN_FREE_PER_MINUTE: 1000,
      PLAN_FREE_POLL_INTERVAL_SECONDS: 300,
      PLAN_STARTER_MONTHLY_QUOTA: 1000,
      PLAN_STARTER_PER_MINUTE: 1000,
      PLAN_STARTER_POLL_INTERVAL_SECONDS: 60,
    }),
    monitorLimits: { free: 1, starter: 3 },
    publisher: amqp,
    evictApiKey: (hash) => evictCachedApiKey(redis, hash),
  });
  await createSocialUser(db, { username: 'flooduser', name: 'Flood' });
  const common = { DATABASE_URL: dbHandle.url, INTERNAL_TOKEN: TOKEN, LOG_LEVEL: 'error' };
  readApi = spawnService('services/read-api/src/main.ts', {
    ...common,
    READ_API_PORT: '0',
    READ_API_HOST: '127.0.0.1',
  });
  const readApiPort = (JSON.parse(await readApi.waitForLine(/read-api listening/)) as { port: number }).port;
  gateway = spawnService('services/gateway/src/main.ts', {
    ...common,
    GATEWAY_PORT: '0',
    GATEWAY_HOST: '127.0.0.1',
    READ_API_URL: `http://127.0.0.1:${readApiPort}`,
    REDIS_URL: redisHandle.url,
    REDIS_KEY_PREFIX: redisHandle.prefix,
    AMQP_URL: vhost.url,
    LOG_LEVEL: 'info',
    UNKNOWN_KEY_MAX_PER_MIN: '30',
  });
  port = (JSON.parse(await gateway.waitForLine(/gateway listening/)) as { port: number }).port;
  // its own apikey.changed queue is consumed (the filter is rebuilt after the subscription)
  await gateway.waitForLine(/apikey.changed subscribed/);
}, 60_000);

afterAll(async () => {
  agent.destroy();
  gateway?.child.kill('SIGTERM');
  await gateway?.exited;
  readApi?.child.kill('SIGTERM');
  await readApi?.exited;
  await amqp?.stop();
  redis?.disconnect();
  await db?.$disconnect();
  await redisHandle?.cleanup();
  await dbHandle?.drop();
});

describe('gateway under a flood of unknown keys from one address', () => {
  it('answers a valid key it never saw from the flooding address, and the flood costs (almost) no database work', async () => {
    const account = await db.account.create({ data: { email: 'flood@example.com', plan: 'starter' } });
    // created after the gateway built its filter: it learns the key from the event bus only
    const created = await uc.keys.create(account.id, { name: 'fresh' });

    await sleep(STATS_SETTLE_MS);
    const before = await transactions();
    const statuses = new Map<number, number>();
    for (let i = 0; i < FLOOD; i += 50) {
      const batch = await Promise.all(Array.from({ length: 50 }, () => get(generateApiKey().key)));
      for (const s of batch) statuses.set(s, (statuses.get(s) ?? 0) + 1);
    }
    expect(Object.fromEntries(statuses)).toEqual({ 401: FLOOD });
    await sleep(STATS_SETTLE_MS);
    const flood = (await transactions()) - before - 1; // less this test's own stats query
    expect(flood).toBeLessThan(100);

    // the same address (127.0.0.1), well past UNKNOWN_KEY_MAX_PER_MIN, a key this process never looked up
    expect(await get(created.key)).toBe(200);
    // revoked: the gateways hear of it, and the key is refused
    await uc.keys.revoke(account.id, created.id);
    const seen: number[] = [];
    await waitFor(async () => {
      seen.push(await get(created.key));
      return seen.at(-1) === 401;
    }, 10_000).catch((err: unknown) => {
      throw new Error(`${String(err)}; statuses ${seen.slice(-5).join(',')}`);
    });
  }, 120_000);
});
