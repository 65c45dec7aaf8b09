/**
 * A monitor's last check and error come from its target's cursor (withLastCheck): an active
 * monitor shows its target's last poll (none from before it existed) and error; pausing freezes
 * what it showed into its own row (the monitors_last_check_freeze trigger).
 */
import { createTestDatabase } from '@sts/testing';
import { createDbClient, type Db } from './client';
import { withLastCheck } from './rows';

describe('withLastCheck', () => {
  let testDb: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;
  let accountId: string;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    db = createDbClient({ url: testDb.url, poolSize: 2 });
    accountId = (await db.account.create({ data: { email: 'rows@example.com' } })).id;
  });

  afterAll(async () => {
    await db.$disconnect();
    await testDb.drop();
  });

  const shown = async (id: string) =>
    (await withLastCheck(db, [await db.monitor.findUniqueOrThrow({ where: { id } })]))[0]!;
  const monitor = (key: string, createdAt: Date) =>
    db.monitor.create({ data: { accountId, targetUsername: key, targetKey: key, createdAt } });

  it('an active monitor shows its target cursor; a paused one what it showed when paused', async () => {
    const t = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s));
    const early = await monitor('alice', t(0));
    const late = await monitor('alice', t(20));
    const never = await monitor('nobody', t(0));
    await db.pollCursor.create({
      data: { targetKey: 'alice', lastPolledAt: t(10), lastError: 'upstream answered 503' },
    });
    expect(await shown(early.id)).toMatchObject({ lastCheckAt: t(10), lastError: 'upstream answered 503' });
    // created after the target's last poll: not checked yet (the target's error still shows)
    expect(await shown(late.id)).toMatchObject({ lastCheckAt: null, lastError: 'upstream answered 503' });
    expect(await shown(never.id)).toMatchObject({ lastCheckAt: null, lastError: null });

    await db.monitor.update({ where: { id: early.id }, data: { isActive: false } });
    // the target is polled again: the active monitors move on, the paused one keeps its values
    await db.pollCursor.update({ where: { targetKey: 'alice' }, data: { lastPolledAt: t(30), lastError: null } });
    expect(await shown(early.id)).toMatchObject({ lastCheckAt: t(10), lastError: 'upstream answered 503' });
    expect(await shown(late.id)).toMatchObject({ lastCheckAt: t(30), lastError: null });
    // resumed: its target's again
    await db.monitor.update({ where: { id: early.id }, data: { isActive: true } });
    expect(await shown(early.id)).toMatchObject({ lastCheckAt: t(30), lastError: null });
  });
});
