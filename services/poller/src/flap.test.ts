/**
 * The source failing, told from accounts failing (domain/flap.ts), on the real PostgreSQL with
 * the local store: 2,000 of 2,100 watched accounts gone in one statement → no target marked, no
 * `monitor.target_unavailable` event, no `account.target.status` event (so no mail), the alert's
 * counter set, and the accounts looked at again (back: the suspects are forgotten); one account
 * gone among many healthy ones → marked after the window, its events written once.
 */
import { Registry } from 'prom-client';
import { createDbClient, type Db } from '@sts/db';
import { createTestDatabase } from '@sts/testing';
import { createTargetFlapGate, type TargetFlapGate } from './adapters/flap';
import { createProfileRepository, type ProfileRepository } from './adapters/profiles';

const WINDOW_MS = 1000;

describe('watched accounts reported unavailable together', () => {
  let handle: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;
  let registry: Registry;
  let gate: TargetFlapGate;
  let profiles: ProfileRepository;

  beforeAll(async () => {
    handle = await createTestDatabase();
    db = createDbClient({ url: handle.url, poolSize: 6 });
    registry = new Registry();
    const policy = { sharePercent: 20, windowMs: WINDOW_MS, minTargets: 10 };
    gate = createTargetFlapGate({ db, policy, source: 'local', registry });
    profiles = createProfileRepository(db, gate);
    const accounts = await Promise.all(
      Array.from({ length: 10 }, (_, i) => db.account.create({ data: { email: `flap${i}@example.com` } })),
    );
    const ids = accounts.map((a) => a.id);
    await db.$executeRaw`
      INSERT INTO social_users (id, username, username_key, name)
      SELECT 1000 + i, name, name, name FROM (
        SELECT i, CASE WHEN i < 2000 THEN 'gone' || i ELSE 'kept' || i END AS name FROM generate_series(0, 2099) AS i) s`;
    await db.$executeRaw`
      INSERT INTO monitors (account_id, target_username, target_key)
      SELECT (${ids}::uuid[])[1 + (u.id % 10)::int], u.username, u.username_key FROM social_users u`;
  }, 120_000);

  afterAll(async () => {
    await db?.$disconnect();
    await handle?.drop();
  });

  /** looks at the targets four at a time, as X's lookup records a round's answers */
  async function lookAll(keys: readonly string[]): Promise<void> {
    let next = 0;
    const worker = async () => {
      while (next < keys.length) await profiles.look(keys[next++]!, new Date());
    };
    await Promise.all(Array.from({ length: 4 }, worker));
  }

  const gone = Array.from({ length: 2000 }, (_, i) => `gone${i}`);
  const holds = async () => (await registry.getSingleMetric('poller_target_flap_holds_total')!.get()).values;
  const told = async () => ({
    events: await db.monitorEvent.count(),
    outbox: await db.outboxEvent.count({ where: { routingKey: 'monitor.target_unavailable' } }),
    accountEvents: await db.accountEvent.count({ where: { routingKey: 'account.target.status' } }),
    marked: await db.monitor.count({ where: { targetStatus: { not: 'ok' } } }),
  });
  const nothingTold = { events: 0, outbox: 0, accountEvents: 0, marked: 0 };
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it('2,000 watched accounts not found at once: none marked, no event, no mail, the alert counter set', async () => {
    expect(await db.pollTarget.count({ where: { activeMonitors: { gt: 0 } } })).toBe(2100);
    await db.$executeRaw`DELETE FROM social_users WHERE username_key LIKE 'gone%'`;
    await lookAll(gone);
    expect(await told()).toEqual(nothingTold);
    const [held] = await holds();
    expect(held!.labels).toEqual({ source: 'local' });
    // the first 420 (20 % of 2,100) wait for their window; every later one is the source failing
    expect(held!.value).toBeGreaterThanOrEqual(1500);
    expect(await db.targetSuspect.count()).toBe(2000);

    // looked at again after the window, the source still says so: still nothing told
    await sleep(WINDOW_MS + 100);
    const due = await gate.due(5000);
    expect(due.length).toBeGreaterThanOrEqual(400);
    await lookAll(due);
    expect(await told()).toEqual(nothingTold);

    // the source is right again: each next look forgets its suspect, nothing was ever told
    await db.$executeRaw`
      INSERT INTO social_users (id, username, username_key, name)
      SELECT 1000 + i, 'gone' || i, 'gone' || i, 'gone' || i FROM generate_series(0, 1999) AS i`;
    await sleep(5 * WINDOW_MS + 100);
    await lookAll(await gate.due(5000));
    expect(await db.targetSuspect.count()).toBe(0);
    expect(await told()).toEqual(nothingTold);
  }, 300_000);

  it('one account gone among healthy ones: marked after the window, told once', async () => {
    const before = (await holds())[0]!.value;
    await db.$executeRaw`DELETE FROM social_users WHERE username_key = 'kept2050'`;
    await profiles.look('kept2050', new Date());
    // within its window: a suspect, not marked yet
    expect(await told()).toEqual(nothingTold);
    expect(await gate.due(10)).toEqual([]);
    await sleep(WINDOW_MS + 100);
    const due = await gate.due(10);
    expect(due).toEqual(['kept2050']);
    await lookAll(due);
    expect(await told()).toEqual({ events: 1, outbox: 1, accountEvents: 1, marked: 1 });
    expect((await db.monitor.findFirstOrThrow({ where: { targetKey: 'kept2050' } })).targetStatus).toBe('not_found');
    expect(await db.targetSuspect.count()).toBe(0);
    expect((await holds())[0]!.value).toBe(before);
  }, 60_000);
});
