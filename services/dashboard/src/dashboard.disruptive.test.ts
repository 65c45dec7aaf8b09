/**
 * A RabbitMQ outage never takes the dashboard off the Ingress. The dashboard runs
 * against a PRIVATE RabbitMQ node (packages/testing engines.ts, never the shared one), which is
 * stopped while the dashboard serves: pages keep answering 200 and /readyz stays ready (it checks
 * only what serving pages needs).
 */
import { randomBytes } from 'node:crypto';
import { createTestDatabase, createTestRedis, startPrivateRabbitMq, waitFor, type PrivateRabbitMq } from '@sts/testing';
import { start, type RunningDashboard } from '../test/dashboard';

let rabbit: PrivateRabbitMq;
let db: { url: string; drop(): Promise<void> };
let redis: { url: string; prefix: string; cleanup(): Promise<void> };
let dash: RunningDashboard;

beforeAll(async () => {
  rabbit = await startPrivateRabbitMq();
  db = await createTestDatabase();
  redis = createTestRedis();
  dash = await start({
    DATABASE_URL: db.url,
    REDIS_URL: redis.url,
    REDIS_KEY_PREFIX: redis.prefix,
    AMQP_URL: rabbit.url,
    DASHBOARD_PORT: '0',
    DASHBOARD_HOST: '127.0.0.1',
    OPS_PORT: '0',
    SESSION_SECRET: randomBytes(32).toString('base64url'),
    SECRETS_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    LOG_LEVEL: 'error',
  });
}, 180_000);

afterAll(async () => {
  await dash?.stop();
  await rabbit?.stop().catch(() => undefined);
  await redis?.cleanup();
  await db?.drop();
}, 60_000);

const readyz = async () => (await fetch(`http://127.0.0.1:${dash.opsPort}/readyz`)).status;
const page = async (path: string) => (await fetch(`http://127.0.0.1:${dash.port}${path}`)).status;

it('serves its pages and stays ready with RabbitMQ stopped', async () => {
  await waitFor(async () => (await readyz()) === 200, 30_000);
  expect(await page('/signin')).toBe(200);

  await rabbit.stop();
  // the broker is gone: the pages and the readiness probe do not care
  for (let i = 0; i < 5; i++) {
    expect(await page('/signin')).toBe(200);
    expect(await page('/signup')).toBe(200);
    expect(await readyz()).toBe(200);
    await new Promise((r) => setTimeout(r, 500));
  }
  const body = (await (await fetch(`http://127.0.0.1:${dash.opsPort}/readyz`)).json()) as { checks: object };
  expect(Object.keys(body.checks).sort()).toEqual(['migrations', 'postgres', 'redis']);
}, 180_000);
