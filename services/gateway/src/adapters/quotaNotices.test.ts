import { createDbClient, type Db } from '@sts/db';
import { plansFromEnv, usagePeriod } from '@sts/core';
import { createTestDatabase } from '@sts/testing';
import { createQuotaNotices, QUOTA_NOTICE_MARGIN_MS } from './quotaNotices';

const plans = plansFromEnv({
  PLAN_FREE_MONTHLY_QUOTA: 1000,
  PLAN_FREE_PER_MINUTE: 10,
  PLAN_FREE_POLL_INTERVAL_SECONDS: 300,
  PLAN_STARTER_MONTHLY_QUOTA: 150_000,
  PLAN_STARTER_PER_MINUTE: 30,
  PLAN_STARTER_POLL_INTERVAL_SECONDS: 60,
});

describe('quota notices (real PostgreSQL)', () => {
  let t: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;

  beforeAll(async () => {
    t = await createTestDatabase();
    db = createDbClient({ url: t.url, poolSize: 2 });
  });
  afterAll(async () => {
    await db.$disconnect();
    await t.drop();
  });

  const usage = async (used: number, updatedAt: Date, at: Date) => {
    const a = await db.account.create({ data: { email: `${Math.random()}@example.com` } });
    await db.$executeRaw`INSERT INTO usage_monthly (account_id, period, used, updated_at)
      VALUES (${a.id}::uuid, ${usagePeriod(at)}, ${used}, ${updatedAt})`;
    return a.id;
  };
  const thresholds = async (accountId: string) =>
    (
      await db.accountEvent.findMany({ where: { accountId }, orderBy: { dedupKey: 'asc' }, select: { dedupKey: true } })
    ).map((e) => e.dedupKey.split(':').pop());

  it('reads the rows changed since its last look (less a margin), however long ago that was', async () => {
    const t0 = new Date();
    let clock = t0;
    const round = createQuotaNotices(db, plans, () => clock);
    const stale = await usage(990, new Date(t0.getTime() - 10 * 60_000), t0); // untouched for 10 minutes
    const fresh = await usage(850, new Date(t0.getTime() - 5000), t0);
    expect(await round()).toBe(1);
    expect(await thresholds(fresh)).toEqual(['80']);
    expect(await thresholds(stale)).toEqual([]); // not read: changed before the first look's minute

    // the next round comes late (3 minutes): a row written just after the last look is still seen,
    // which a fixed "last minute" window would have missed
    const late = await usage(1000, new Date(t0.getTime() + 1000), t0);
    const justBefore = await usage(900, new Date(t0.getTime() - QUOTA_NOTICE_MARGIN_MS + 2000), t0);
    clock = new Date(t0.getTime() + 3 * 60_000);
    expect(await round()).toBe(3);
    expect(await thresholds(late)).toEqual(['100', '80']);
    expect(await thresholds(justBefore)).toEqual(['80']);
    // once per account, month and threshold
    expect(await round()).toBe(0);
  });
});
