/**
 * Poll lag as PostgreSQL computes it for the metrics reporter: bucket counts, maximum and count
 * over every active target, and only the most lagging targets as rows.
 */
import { createDbClient, type Db } from '@sts/db';
import { createTestDatabase } from '@sts/testing';
import { pollLagSummary } from './metrics';

describe('poll lag summary (real PostgreSQL)', () => {
  let t: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;
  const now = Date.now();

  beforeAll(async () => {
    t = await createTestDatabase();
    db = createDbClient({ url: t.url, poolSize: 2 });
    const [a] = await db.$queryRaw<
      { id: string }[]
    >`INSERT INTO accounts (email) VALUES ('lag@example.com') RETURNING id`;
    // 2,000 targets with one active monitor each (the triggers keep poll_targets), 2 paused ones
    await db.$executeRaw`
      INSERT INTO monitors (account_id, target_username, target_key, is_active, created_at)
      SELECT ${a!.id}::uuid, 't' || n, 't' || n, n <= 2000, ${new Date(now - 7200_000)}
      FROM generate_series(1, 2002) n`;
    // target tN last succeeded N * 30 s ago; t1999 and t2000 never did (lag: their monitor's 2 h)
    await db.$executeRaw`
      INSERT INTO poll_cursors (target_key, last_success_at)
      SELECT 't' || n, ${new Date(now)}::timestamptz - n * interval '30 seconds' FROM generate_series(1, 1998) n
      UNION ALL SELECT 't2001', ${new Date(now - 999_000_000)}`;
  });
  afterAll(async () => {
    await db.$disconnect();
    await t.drop();
  });

  it('counts every active target into cumulative buckets and returns only the top few', async () => {
    const s = await pollLagSummary(db, now, 5);
    expect(s.targets).toBe(2000);
    expect(s.maxSeconds).toBeCloseTo(1998 * 30, 0);
    expect(s.worst.map((w) => w.target)).toEqual(['t1998', 't1997', 't1996', 't1995', 't1994']);
    // lag n*30 s for n ≤ 1998, 7,200 s for two targets; buckets 60, 300, 900, 3600, 21600, 86400, +Inf
    const lags = [...Array.from({ length: 1998 }, (_, i) => (i + 1) * 30), 7200, 7200];
    const expected = [60, 300, 900, 3600, 21_600, 86_400, Infinity].map((le) => lags.filter((l) => l <= le).length);
    expect(s.buckets).toEqual(expected);
  });
});
