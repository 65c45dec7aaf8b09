/**
 * A monitor's last check and error come from its target's cursor (withLastCheck): an active
 * monitor shows its target's last poll (none from before it existed) and error; pausing freezes
 * what it showed into its own row (the monitors_last_check_freeze trigger).
 */
import { createTestDatabase } from '@sts/testing';
import { createDbClient, type Db } from './client';
import { QUERY_CURSOR_KEY, queryCursorKeyOf, withLastCheck } from './rows';

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

  it('a query monitor has no target: its checks are the query intake cursor, and nothing per-target is written', async () => {
    const t = (s: number) => new Date(Date.UTC(2026, 0, 2, 0, 0, s));
    const before = await db.pollTarget.count();
    const changes = await db.$queryRaw<{ n: number }[]>`SELECT count(*)::int AS n FROM x_stream_changes`;
    const q = await db.monitor.create({ data: { accountId, query: 'launch OR release', createdAt: t(0) } });
    expect(q).toMatchObject({ targetUsername: null, targetKey: null, query: 'launch OR release' });
    expect(await db.pollTarget.count()).toBe(before);
    expect(await db.$queryRaw<{ n: number }[]>`SELECT count(*)::int AS n FROM x_stream_changes`).toEqual(changes);
    await db.pollCursor.create({ data: { targetKey: QUERY_CURSOR_KEY, lastPolledAt: t(5), lastError: null } });
    expect(await shown(q.id)).toMatchObject({ lastCheckAt: t(5) });
    // paused: frozen from the query cursor; the cursor moves on, the paused monitor does not
    await db.monitor.update({ where: { id: q.id }, data: { isActive: false } });
    await db.pollCursor.update({ where: { targetKey: QUERY_CURSOR_KEY }, data: { lastPolledAt: t(9) } });
    expect(await shown(q.id)).toMatchObject({ lastCheckAt: t(5) });
    await db.monitor.delete({ where: { id: q.id } });
    expect(await db.pollTarget.count()).toBe(before);
  });

  it("a query monitor read on X shows the later of the query cursor and its own, with that cursor's error", async () => {
    const t = (s: number) => new Date(Date.UTC(2026, 0, 3, 0, 0, s));
    const q = await db.monitor.create({ data: { accountId, query: 'rocket', createdAt: t(0) } });
    await db.pollCursor.upsert({
      where: { targetKey: QUERY_CURSOR_KEY },
      create: { targetKey: QUERY_CURSOR_KEY, lastPolledAt: t(5) },
      update: { lastPolledAt: t(5), lastError: null },
    });
    // its own cursor has an error and no check yet: the query cursor's check shows
    await db.pollCursor.create({ data: { targetKey: queryCursorKeyOf(q.id), lastError: 'X answered 503' } });
    expect(await shown(q.id)).toMatchObject({ lastCheckAt: t(5), lastError: null });
    await db.pollCursor.update({ where: { targetKey: queryCursorKeyOf(q.id) }, data: { lastPolledAt: t(8) } });
    expect(await shown(q.id)).toMatchObject({ lastCheckAt: t(8), lastError: 'X answered 503' });
    await db.monitor.delete({ where: { id: q.id } });
  });

  it('a paused query monitor read on X keeps the later of the query cursor and its own', async () => {
    const t = (s: number) => new Date(Date.UTC(2026, 0, 4, 0, 0, s));
    const setQueryCursor = (polled: Date, lastError: string | null) =>
      db.pollCursor.upsert({
        where: { targetKey: QUERY_CURSOR_KEY },
        create: { targetKey: QUERY_CURSOR_KEY, lastPolledAt: polled, lastError },
        update: { lastPolledAt: polled, lastError },
      });
    const onX = await db.monitor.create({ data: { accountId, query: 'comet', createdAt: t(0) } });
    const local = await db.monitor.create({ data: { accountId, query: 'meteor', createdAt: t(0) } });
    await setQueryCursor(t(5), null);
    await db.pollCursor.create({
      data: { targetKey: queryCursorKeyOf(onX.id), lastPolledAt: t(8), lastError: 'X answered 429' },
    });
    for (const id of [onX.id, local.id]) await db.monitor.update({ where: { id }, data: { isActive: false } });
    // both cursors move on: the paused monitors keep what they showed as they were paused
    await setQueryCursor(t(20), 'later');
    await db.pollCursor.update({ where: { targetKey: queryCursorKeyOf(onX.id) }, data: { lastPolledAt: t(21) } });
    expect(await shown(onX.id)).toMatchObject({ lastCheckAt: t(8), lastError: 'X answered 429' });
    expect(await shown(local.id)).toMatchObject({ lastCheckAt: t(5), lastError: null });
    // resumed, then paused with the query cursor the later one: that one is frozen
    await db.monitor.update({ where: { id: onX.id }, data: { isActive: true } });
    await setQueryCursor(t(30), null);
    await db.monitor.update({ where: { id: onX.id }, data: { isActive: false } });
    expect(await shown(onX.id)).toMatchObject({ lastCheckAt: t(30), lastError: null });
    await db.monitor.deleteMany({ where: { id: { in: [onX.id, local.id] } } });
  });

  it('a monitor has exactly one of a username and a query (CHECK monitors_username_or_query)', async () => {
    await expect(
      db.monitor.create({ data: { accountId, targetUsername: 'bob', targetKey: 'bob', query: 'launch' } }),
    ).rejects.toThrow(/monitors_username_or_query/);
    await expect(db.monitor.create({ data: { accountId } })).rejects.toThrow(/monitors_username_or_query/);
    await expect(db.monitor.create({ data: { accountId, targetUsername: 'bob' } })).rejects.toThrow(
      /monitors_username_or_query/,
    );
    await expect(db.monitor.create({ data: { accountId, query: 'x'.repeat(513) } })).rejects.toThrow(
      /monitors_username_or_query/,
    );
    const ok = await db.monitor.create({ data: { accountId, targetUsername: 'bob', targetKey: 'bob' } });
    expect(ok.query).toBeNull();
  });
});
