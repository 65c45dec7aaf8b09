/**
 * The public API as users reach it, for end-to-end tests: read-api and the gateway started as
 * processes from their composition roots (as `npm start` does) on a test database, Redis prefix
 * and RabbitMQ vhost of their own. Used by the management API's tests, the typed client's and the
 * MCP server's.
 */
import { randomBytes } from 'node:crypto';
import { generateApiKey, type ApiKeyScope } from '@sts/core';
import { createDbClient, type Db } from '@sts/db';
import { createTestDatabase, createTestRedis, createTestVhost } from './isolation';
import { spawnService, type ServiceProcess } from './process';

export interface ApiStack {
  /** the gateway's base URL, e.g. http://127.0.0.1:41234 */
  url: string;
  db: Db;
  redis: { url: string; prefix: string };
  amqpUrl: string;
  /** SECRETS_ENCRYPTION_KEY of the stack (base64) */
  secretsKey: string;
  readApi: ServiceProcess;
  gateway: ServiceProcess;
  /** a verified account on `plan` with one key of `scope` */
  account(plan?: 'free' | 'starter', scope?: ApiKeyScope): Promise<{ accountId: string; key: string }>;
  /** another key of the account */
  addKey(accountId: string, scope: ApiKeyScope): Promise<string>;
  stop(): Promise<void>;
}

export interface ApiStackOptions {
  /** extra environment of read-api (e.g. WEBHOOK_TEST_MAX_PER_MIN) */
  readApiEnv?: Record<string, string>;
  /** extra environment of the gateway (e.g. PLAN_FREE_MONTHLY_QUOTA) */
  gatewayEnv?: Record<string, string>;
}

const TOKEN = 'internal-token-for-api-stack-tests';

export async function startApiStack(opts: ApiStackOptions = {}): Promise<ApiStack> {
  const database = await createTestDatabase();
  const redis = createTestRedis();
  const vhost = await createTestVhost();
  const db = createDbClient({ url: database.url, poolSize: 4 });
  const secretsKey = randomBytes(32).toString('base64');
  const shared = {
    DATABASE_URL: database.url,
    REDIS_URL: redis.url,
    REDIS_KEY_PREFIX: redis.prefix,
    AMQP_URL: vhost.url,
    INTERNAL_TOKEN: TOKEN,
    LOG_LEVEL: 'warn',
  };
  const readApi = spawnService('services/read-api/src/main.ts', {
    ...shared,
    READ_API_PORT: '0',
    READ_API_HOST: '127.0.0.1',
    SECRETS_ENCRYPTION_KEY: secretsKey,
    // hooks.test stands for a customer's public endpoint (no DNS here)
    WEBHOOK_ALLOW_PRIVATE_HOSTS: 'hooks.test',
    ...opts.readApiEnv,
    LOG_LEVEL: 'info',
  });
  const started: ServiceProcess[] = [readApi];
  const stopAll = async () => {
    for (const p of started) p.child.kill('SIGTERM');
    await Promise.all(started.map((p) => p.exited));
    await db.$disconnect();
    await redis.cleanup();
    await database.drop();
  };
  try {
    const { port: readPort } = JSON.parse(await readApi.waitForLine(/read-api listening/)) as { port: number };
    const gateway = spawnService('services/gateway/src/main.ts', {
      ...shared,
      GATEWAY_PORT: '0',
      GATEWAY_HOST: '127.0.0.1',
      READ_API_URL: `http://127.0.0.1:${readPort}`,
      USAGE_FLUSH_MS: '100',
      // keys written straight to the database reach the gateway's live-key filter by its sync
      KEY_FILTER_SYNC_MS: '100',
      ...opts.gatewayEnv,
      LOG_LEVEL: 'info',
    });
    started.push(gateway);
    const { port } = JSON.parse(await gateway.waitForLine(/gateway listening/)) as { port: number };
    const addKey = async (accountId: string, scope: ApiKeyScope) => {
      const k = generateApiKey();
      await db.apiKey.create({ data: { accountId, keyHash: k.hash, prefix: k.prefix, scope } });
      await untilKeyKnown(`http://127.0.0.1:${port}`, k.key);
      return k.key;
    };
    return {
      url: `http://127.0.0.1:${port}`,
      db,
      redis: { url: redis.url, prefix: redis.prefix },
      amqpUrl: vhost.url,
      secretsKey,
      readApi,
      gateway,
      addKey,
      async account(plan = 'starter', scope = 'read') {
        const a = await db.account.create({
          data: { email: `${randomBytes(6).toString('hex')}@example.test`, plan, emailVerifiedAt: new Date() },
          select: { id: true },
        });
        return { accountId: a.id, key: await addKey(a.id, scope) };
      },
      stop: stopAll,
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}

/**
 * Waits until the gateway's live-key filter has the key: a stream request with a malformed monitor
 * id is refused after the key check (400, or 403 on Free; nothing charged) instead of 401. A key
 * the gateway never takes fails the test set-up.
 */
export async function untilKeyKnown(url: string, key: string): Promise<void> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const r = await fetch(`${url}/api/v1/stream?monitor=not-a-monitor`, {
      headers: { authorization: `Bearer ${key}` },
    });
    await r.arrayBuffer();
    if (r.status !== 401) return;
    if (Date.now() > deadline) throw new Error('the gateway did not take a new API key within 15 s');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
