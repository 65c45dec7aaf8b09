/**
 * The dashboard with REDIS_MODE=cluster on a real Redis Cluster (three masters started by this
 * test): sessions live in the cluster and sign-out ends them; the sign-in throttle counts there
 * and answers 429 over its limit. Skips only when redis-server / redis-cli are not installed.
 */
import { createRedis, type RedisClient } from '@sts/common';
import {
  createTestDatabase,
  createTestVhost,
  redisClusterAvailable,
  startRedisCluster,
  type RedisClusterHandle,
} from '@sts/testing';
import { dashboardClient, listenEnv, start, type RunningDashboard } from '../test/dashboard';

const PREFIX = 'sts:';

(redisClusterAvailable() ? describe : describe.skip)('dashboard on a Redis Cluster', () => {
  let cluster: RedisClusterHandle;
  let dbHandle: { url: string; drop(): Promise<void> };
  let dash: RunningDashboard;
  let redis: RedisClient;
  let base = '';

  beforeAll(async () => {
    const [c, d, vhost] = await Promise.all([startRedisCluster(), createTestDatabase(), createTestVhost()]);
    cluster = c;
    dbHandle = d;
    dash = await start({
      DATABASE_URL: dbHandle.url,
      REDIS_MODE: 'cluster',
      REDIS_URL: cluster.url,
      REDIS_KEY_PREFIX: PREFIX,
      AMQP_URL: vhost.url,
      ...listenEnv(),
      SIGNIN_MAX_PER_EMAIL: '2',
      LOG_LEVEL: 'error',
    });
    base = dash.base;
    redis = createRedis({ REDIS_MODE: 'cluster', REDIS_URL: cluster.url, REDIS_KEY_PREFIX: PREFIX });
  }, 120_000);

  afterAll(async () => {
    redis?.disconnect();
    await dash?.stop();
    await dbHandle?.drop();
    await cluster?.stop();
  });

  /** a cookie-keeping client */
  const client = () => dashboardClient(base);

  it('keeps sessions in the cluster and ends them at sign-out', async () => {
    const c = client();
    const page = await c.req('/signup');
    const signup = await c.req('/signup', {
      _csrf: c.csrf(page.text),
      email: 'cluster@example.com',
      password: 'a good long password',
    });
    expect(signup.status).toBe(200); // "check your email": no session before sign-in
    const signinPage = await c.req('/signin');
    const signin = await c.req('/signin', {
      _csrf: c.csrf(signinPage.text),
      email: 'cluster@example.com',
      password: 'a good long password',
    });
    expect(signin.status).toBe(303);
    const sid = decodeURIComponent(c.cookie().slice('sts_dash='.length)).slice(2).split('.')[0]!;
    const stored = JSON.parse((await redis.get(`dashboard:sess:${sid}`)) ?? '{}') as { email?: string };
    expect(stored.email).toBe('cluster@example.com');
    const overview = await c.req('/');
    expect(overview.status).toBe(200);
    const ended = c.cookie();
    expect((await c.req('/signout', { _csrf: c.csrf(overview.text) })).location).toBe('/signin');
    expect(await redis.exists(`dashboard:sess:${sid}`)).toBe(0);
    // the ended session's cookie, sent again (the client itself dropped it at sign-out), signs nobody in
    expect((await c.req('/', undefined, { headers: { cookie: ended } })).status).toBe(303);
  });

  it('throttles sign-in attempts per email with 429 over the limit, counted in the cluster', async () => {
    const c = client();
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) {
      const page = await c.req('/signin');
      const r = await c.req('/signin', {
        _csrf: c.csrf(page.text),
        email: 'nobody@example.com',
        password: 'not the password',
      });
      statuses.push(r.status);
    }
    expect(statuses[2]).toBe(429);
    expect(statuses.slice(0, 2)).not.toContain(429);
  });
});
