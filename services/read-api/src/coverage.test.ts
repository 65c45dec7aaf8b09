/**
 * `GET /api/v1/monitors/:id/coverage` on PostgreSQL: the record's `intake` tells whether the
 * watched account is pushed by the X Activity API (with the event types this monitor uses) or
 * polled, and the answer is the contract's Coverage record.
 */
import { CoverageRecord } from '@sts/api-contract';
import { createLogger, createMetricsRegistry } from '@sts/common';
import { createDbClient, type Db } from '@sts/db';
import { createLocalSource } from '@sts/social';
import { createTestDatabase, rawRequest } from '@sts/testing';
import { createReadApi, type ReadApi } from './app';

const TOKEN = 'internal-token-for-tests-0123456789';
const PROFILE_TYPES = [
  'profile.update.bio',
  'profile.update.handle',
  'profile.update.profile_picture',
  'profile.update.screenname',
  'profile.update.verified_badge',
];

describe('coverage: pushed or polled', () => {
  let testDb: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;
  let app: ReadApi;
  let port: number;
  let account: string;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    db = createDbClient({ url: testDb.url, poolSize: 4 });
    account = (await db.account.create({ data: { email: 'intake@example.com', plan: 'starter' } })).id;
    app = createReadApi({
      db,
      source: createLocalSource({ db }),
      internalToken: TOKEN,
      logger: createLogger({ service: 'read-api-test', level: 'error' }),
      registry: createMetricsRegistry('read-api-coverage-test'),
      userCacheTtlMs: 0,
    });
    port = await app.listen(0, '127.0.0.1');
  });

  afterAll(async () => {
    await app.close();
    await db.$disconnect();
    await testDb.drop();
  });

  const coverage = async (id: string) => {
    const r = await rawRequest(port, 'GET', `/api/v1/monitors/${id}/coverage`, {
      headers: { 'x-internal-token': TOKEN, 'x-account-id': account, 'x-account-plan': 'starter' },
    });
    expect(r.status).toBe(200);
    // the answer is the documented record (api-contract's Coverage)
    return CoverageRecord.parse(r.json?.data);
  };

  it('answers intake: polled, then pushed with the event types the monitor uses; null for a query monitor', async () => {
    const m = await db.monitor.create({
      data: { accountId: account, targetUsername: 'Pat', targetKey: 'pat', events: ['posts', 'profile', 'deletes'] },
    });
    expect((await coverage(m.id)).intake).toEqual({ path: 'polled', event_types: [], confirmed_at: null });

    await db.targetProfile.create({
      data: { targetKey: 'pat', userId: '77', username: 'Pat', name: 'Pat', verified: false },
    });
    const confirmed = new Date('2026-12-01T10:00:00.123Z');
    await db.xActivityAccount.create({
      data: { targetKey: 'pat', userId: '77', eventTypes: [...PROFILE_TYPES, 'post.delete'], updatedAt: confirmed },
    });
    await db.$executeRaw`
      INSERT INTO x_stream_lease (name, holder, fence, expires_at)
      VALUES ('x-activity', 'replica-a', 1, now() + interval '1 minute')`;
    expect((await coverage(m.id)).intake).toEqual({
      path: 'pushed',
      event_types: [...PROFILE_TYPES, 'post.delete'].sort(),
      confirmed_at: confirmed.toISOString(),
    });

    const q = await db.monitor.create({ data: { accountId: account, query: 'launch' } });
    expect((await coverage(q.id)).intake).toBeNull();
  });
});
