/**
 * The composition root as the gateway's tests and `npm start` run it: a child process
 * `node --import tsx services/read-api/src/main.ts`, which prints a line when listening and exits
 * 0 on SIGTERM. Configuration errors name the variable and exit 2.
 */
import { ConfigError } from '@sts/common';
import { createDbClient, loadMigrations } from '@sts/db';
import { createSocialUser } from '@sts/social';
import { createTestDatabase, rawRequest, spawnService } from '@sts/testing';
import { loadReadApiEnv } from './env';

const TOKEN = 'internal-token-for-tests-0123456789';

const start = (env: Record<string, string>) => spawnService('services/read-api/src/main.ts', env);

describe('read-api main', () => {
  let testDb: Awaited<ReturnType<typeof createTestDatabase>>;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    const db = createDbClient({ url: testDb.url, poolSize: 1 });
    await createSocialUser(db, { username: 'carol', name: 'Carol' });
    await db.$disconnect();
  });

  afterAll(async () => {
    await testDb.drop();
  });

  it('prints a line when listening, serves, and exits 0 on SIGTERM', async () => {
    // LOG_LEVEL=error as the test runner sets it: the start and stop lines still appear
    const proc = start({ READ_API_PORT: '0', INTERNAL_TOKEN: TOKEN, DATABASE_URL: testDb.url, LOG_LEVEL: 'error' });
    try {
      const line = await proc.waitForLine(/read-api listening/);
      const { port, opsPort } = JSON.parse(line) as { port: number; opsPort: number };
      expect(port).toBeGreaterThan(0);
      const ready = await rawRequest(opsPort, 'GET', '/readyz');
      expect(ready.json).toEqual({ status: 'ok', checks: { postgres: 'ok', migrations: 'ok', redis: 'ok' } });
      const r = await rawRequest(port, 'GET', '/api/v1/users/carol', { headers: { 'x-internal-token': TOKEN } });
      expect(r.status).toBe(200);
      expect(r.json!.data).toMatchObject({ username: 'carol', name: 'Carol' });
      proc.child.kill('SIGTERM');
      expect(await proc.exited).toBe(0);
      expect(proc.lines.some((l) => l.includes('read-api stopped'))).toBe(true);
    } finally {
      proc.child.kill('SIGKILL');
    }
  });

  it('is not ready while a migration is pending', async () => {
    const db = createDbClient({ url: testDb.url, poolSize: 1 });
    const last = (await loadMigrations()).at(-1)!.name;
    await db.$executeRaw`UPDATE "_prisma_migrations" SET rolled_back_at = now() WHERE migration_name = ${last}`;
    const proc = start({ READ_API_PORT: '0', INTERNAL_TOKEN: TOKEN, DATABASE_URL: testDb.url, LOG_LEVEL: 'error' });
    try {
      const { opsPort } = JSON.parse(await proc.waitForLine(/read-api listening/)) as { opsPort: number };
      const ready = await rawRequest(opsPort, 'GET', '/readyz');
      expect(ready.status).toBe(503);
      expect(ready.json).toEqual({
        status: 'unavailable',
        checks: { postgres: 'ok', migrations: 'failed', redis: 'ok' },
      });
    } finally {
      proc.child.kill('SIGKILL');
      await db.$executeRaw`UPDATE "_prisma_migrations" SET rolled_back_at = NULL WHERE migration_name = ${last}`;
      await db.$disconnect();
    }
  });

  it('refuses to start without INTERNAL_TOKEN, naming it', async () => {
    const proc = start({ READ_API_PORT: '0', DATABASE_URL: testDb.url });
    expect(await proc.exited).toBe(2);
    expect(proc.lines.join('\n')).toContain('INTERNAL_TOKEN is required but not set');
  });

  it('validates the environment', () => {
    const problems = (env: Record<string, string>): string[] => {
      try {
        loadReadApiEnv(env);
        return [];
      } catch (err) {
        if (err instanceof ConfigError) return err.problems;
        throw err;
      }
    };
    expect(loadReadApiEnv({ INTERNAL_TOKEN: TOKEN })).toMatchObject({
      READ_API_PORT: 3002,
      OPS_PORT: 3102,
      SOCIAL_SOURCE: 'local',
      X_API_BASE_URL: 'https://api.x.com',
      USER_CACHE_TTL_MS: 5000,
    });
    expect(problems({ INTERNAL_TOKEN: 'short' })).toEqual(['INTERNAL_TOKEN: must be at least 16 characters']);
    expect(problems({ INTERNAL_TOKEN: TOKEN, SOCIAL_SOURCE: 'x' })).toEqual([
      'X_BEARER_TOKEN: is required when SOCIAL_SOURCE=x',
    ]);
    expect(problems({ INTERNAL_TOKEN: TOKEN, SOCIAL_SOURCE: 'twitter' })[0]).toMatch(/^SOCIAL_SOURCE: /);
    expect(problems({ INTERNAL_TOKEN: TOKEN, READ_API_PORT: 'abc' })[0]).toMatch(/^READ_API_PORT: /);
    expect(problems({ INTERNAL_TOKEN: TOKEN, DATABASE_URL: 'mysql://x' })[0]).toMatch(/^DATABASE_URL: /);
    expect(loadReadApiEnv({ INTERNAL_TOKEN: TOKEN, X_RATE_LIMITS: 'timeline=900, search=180' })).toMatchObject({
      READ_CACHE_PROFILE_TTL_MS: 30_000,
      READ_CACHE_TIMELINE_TTL_MS: 5000,
      READ_CACHE_TWEET_TTL_MS: 60_000,
      READ_CACHE_SEARCH_TTL_MS: 10_000,
      X_USER_CACHE_TTL_SECONDS: 3600,
      X_LOW_PRIORITY_RESERVE_PERCENT: 20,
      X_RATE_LIMITS: { timeline: 900, search: 180 },
    });
    for (const [name, value] of [
      ['READ_CACHE_PROFILE_TTL_MS', '-1'],
      ['READ_CACHE_TIMELINE_TTL_MS', '1.5'],
      ['READ_CACHE_TWEET_TTL_MS', '3600001'],
      ['READ_CACHE_SEARCH_TTL_MS', 'soon'],
      ['X_USER_CACHE_TTL_SECONDS', '0'],
      ['X_USER_CACHE_TTL_SECONDS', '604801'],
      ['X_LOW_PRIORITY_RESERVE_PERCENT', '91'],
      ['X_RATE_LIMITS', 'timeline'],
      ['X_RATE_LIMITS', 'firehose=5'],
      ['X_RATE_LIMITS', 'search=0'],
    ] as const) {
      expect(problems({ INTERNAL_TOKEN: TOKEN, [name]: value })[0]).toMatch(new RegExp(`^${name}: `));
    }
  });

  it.each([
    ['READ_CACHE_PROFILE_TTL_MS', '-5'],
    ['READ_CACHE_TIMELINE_TTL_MS', 'often'],
    ['READ_CACHE_TWEET_TTL_MS', '99999999'],
    ['READ_CACHE_SEARCH_TTL_MS', '0.5'],
    ['X_USER_CACHE_TTL_SECONDS', '0'],
    ['X_LOW_PRIORITY_RESERVE_PERCENT', 'half'],
    ['X_RATE_LIMITS', 'users=many'],
  ])('refuses %s=%j with exit code 2, naming it', async (name, value) => {
    const proc = start({ READ_API_PORT: '0', INTERNAL_TOKEN: TOKEN, DATABASE_URL: testDb.url, [name]: value });
    expect(await proc.exited).toBe(2);
    expect(proc.lines.join('\n')).toContain(name);
  });

  it('with SOCIAL_SOURCE=x checks Redis for readiness', async () => {
    const proc = start({
      READ_API_PORT: '0',
      INTERNAL_TOKEN: TOKEN,
      DATABASE_URL: testDb.url,
      SOCIAL_SOURCE: 'x',
      X_BEARER_TOKEN: 't',
      X_API_BASE_URL: 'http://127.0.0.1:9',
      REDIS_URL: process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379',
      LOG_LEVEL: 'error',
    });
    try {
      const { opsPort } = JSON.parse(await proc.waitForLine(/read-api listening/)) as { opsPort: number };
      const ready = await rawRequest(opsPort, 'GET', '/readyz');
      expect(ready.json).toEqual({ status: 'ok', checks: { postgres: 'ok', migrations: 'ok', redis: 'ok' } });
    } finally {
      proc.child.kill('SIGKILL');
    }
  });
});
