/**
 * Profile changes and target health on X (SOCIAL_SOURCE=x), against the fake X, with the real PostgreSQL, Redis
 * and RabbitMQ and the real webhook-dispatcher delivering to a local HTTPS receiver. X pushes no
 * profile change: the poller looks the watched accounts up in batches (`GET /2/users?ids=`):
 * - a changed name and bio → one signed `monitor.profile_changed`, only to the opted-in monitor;
 * - suspended → `target_status` suspended, one `monitor.target_unavailable` per monitor, one
 *   `account.target.status` (the mail), polls backed off; back → `ok`, polled at once;
 * - renamed → the monitors follow the account (same id) to its new username;
 * - deleted → `not_found`, one `monitor.target_unavailable` per monitor;
 * - 150 targets → 2 lookups per interval, counted in the fleet's budget;
 * - a poll that fails on the account (timeline and search modes) has it looked at at once.
 */
import { createLogger } from '@sts/common';
import { createRedisGovernor, createXSource, type XSource } from '@sts/social';
import { waitFor, waitForMany } from '@sts/testing';
import { openXTestBed, type XTestBed } from '../../../test/xTestBed';
import { createRedisLeases } from '../../adapters/lease';
import { createProfileRepository } from '../../adapters/profiles';
import { createXProfileLookup, type XProfileLookupDeps } from './xLookup';
import { openDeliveryBed, type DeliveryBed } from '../../../test/deliveryBed';
import type { Poller } from '../../poller';
import { plans, testPoller, type TestPollerOptions } from '../../../test/poller';

const logger = createLogger({ service: 'x-profiles-test', level: 'error' });

/** a poller on the fake X whose source is also its account lookup (Starter polls every second) */
function xPoller(bed: XTestBed, source: XSource, extra: Partial<TestPollerOptions>): Poller {
  return testPoller(
    { db: bed.db, redis: bed.redis },
    {
      source,
      logger,
      intervals: { plans, overrideSec: 1 },
      tickMs: 100,
      profiles: createProfileRepository(bed.db),
      xAccounts: source,
      ...extra,
    },
  );
}

/** the account lookup on the fake X (Starter every minute, Free every five) */
function xLookup(bed: XTestBed, source: XSource, extra: Partial<XProfileLookupDeps> & Pick<XProfileLookupDeps, 'now'>) {
  return createXProfileLookup({
    source,
    repository: createProfileRepository(bed.db),
    leases: createRedisLeases(bed.redis),
    logger,
    intervals: { plans },
    ...extra,
  });
}

describe('profile changes and target health on X', () => {
  let bed: XTestBed;
  let poller: Poller;
  let deliveries: DeliveryBed;

  beforeAll(async () => {
    bed = await openXTestBed({ poolSize: 6 });
    deliveries = await openDeliveryBed({ ...bed, logger, name: 'x-profiles' });
    const source = createXSource({ baseUrl: bed.fake.url, bearerToken: 't', redis: bed.redis, timeoutMs: 5000 });
    poller = xPoller(bed, source, { profileLookupMs: 300 });
    await poller.start();
  });

  afterAll(async () => {
    await poller.stop();
    await deliveries.close();
    await bed.close();
  });

  const monitor = (target: string, path: string, events?: string[]) => deliveries.watch(target, path, events);
  const delivered = (event: string, prefix: string) => deliveries.deliveredUnder(event, prefix);
  const snapshot = (key: string) => bed.db.targetProfile.findUnique({ where: { targetKey: key } });
  const statuses = async (ids: string[]) =>
    (await bed.db.monitor.findMany({ where: { id: { in: ids } }, select: { targetStatus: true } })).map(
      (m) => m.targetStatus,
    );
  const eventCount = (kind: string, ids: string[]) =>
    bed.db.monitorEvent.count({ where: { kind, monitorId: { in: ids } } });

  it('a changed name and bio is one signed monitor.profile_changed, only to the opted-in monitor', async () => {
    const user = bed.fake.state.addUser({ username: 'XChanger', name: 'Old Name', description: 'old bio' });
    const wants = await monitor('XChanger', 'xchanger-profile', ['posts', 'profile']);
    const other = await monitor('XChanger', 'xchanger-posts');
    // the first look takes the snapshot (by name), the next ones read the account by id
    await waitFor(async () => (await snapshot('xchanger'))?.userId === user.id || null, 20_000);

    bed.fake.state.update('XChanger', { name: 'New Name', description: 'new bio' });
    const [req] = await waitForMany(() => delivered('monitor.profile_changed', 'xchanger'), 1, 30_000);
    expect(req!.path).toBe('/xchanger-profile');
    expect(deliveries.signedBy(req!, wants)).toBe(true);
    expect(JSON.parse(req!.rawBody.toString())).toMatchObject({
      event: 'monitor.profile_changed',
      monitor: { id: wants, targetUsername: 'XChanger' },
      userId: user.id,
      changed: ['name', 'description'],
      before: { username: 'XChanger', name: 'Old Name', description: 'old bio', verified: false },
      after: { username: 'XChanger', name: 'New Name', description: 'new bio', verified: false },
    });
    const byId = bed.fake.requests.log.filter((r) => r.path === '/2/users' && r.params.get('ids')?.includes(user.id));
    expect(byId.length).toBeGreaterThan(0);
    // later looks see the same profile: told once; the posts-only monitor got nothing
    const looked = bed.fake.requests.count({ family: 'users' });
    await waitFor(() => bed.fake.requests.count({ family: 'users' }) >= looked + 3 || null, 20_000);
    expect(await eventCount('monitor.profile_changed', [wants, other])).toBe(1);
    expect(delivered('monitor.profile_changed', 'xchanger')).toHaveLength(1);
  });

  it('suspended: target_status, one event per monitor, one mail, backed-off polls; back: ok, polled at once', async () => {
    bed.fake.state.addUser({ username: 'xsleeper' });
    const a = await monitor('xsleeper', 'xsleeper-a');
    const b = await monitor('xsleeper', 'xsleeper-b', ['posts', 'profile']);
    await waitFor(async () => (await snapshot('xsleeper'))?.userId != null || null, 20_000);

    bed.fake.state.suspend('xsleeper');
    await waitFor(async () => (await statuses([a, b])).every((s) => s === 'suspended') || null, 20_000);
    const sent = await waitForMany(() => delivered('monitor.target_unavailable', 'xsleeper'), 2, 30_000);
    expect(sent.map((r) => r.path).sort()).toEqual(['/xsleeper-a', '/xsleeper-b']);
    const toA = sent.find((r) => r.path === '/xsleeper-a')!;
    expect(deliveries.signedBy(toA, a)).toBe(true);
    expect(JSON.parse(toA.rawBody.toString())).toMatchObject({
      event: 'monitor.target_unavailable',
      monitor: { id: a },
      status: 'suspended',
      previousStatus: 'ok',
      username: 'xsleeper',
      newUsername: null,
    });
    const mails = await bed.db.accountEvent.findMany({
      where: { routingKey: 'account.target.status', payload: { path: ['username'], equals: 'xsleeper' } },
    });
    expect(mails).toHaveLength(1);
    expect(mails[0]!.payload).toMatchObject({ status: 'suspended', previousStatus: 'ok' });
    expect([...(mails[0]!.payload as { monitorIds: string[] }).monitorIds].sort()).toEqual([a, b].sort());

    // the next poll schedules the target 10 intervals on, not 1
    const suspendedAt = Date.now();
    await waitFor(async () => {
      const c = await bed.db.pollCursor.findUnique({ where: { targetKey: 'xsleeper' } });
      const t = await bed.db.pollTarget.findUniqueOrThrow({ where: { targetKey: 'xsleeper' } });
      const polled = c?.lastPolledAt?.getTime() ?? 0;
      return (polled > suspendedAt && t.nextDueAt.getTime() - polled >= 9_000) || null;
    }, 20_000);
    // more looks of the same state tell nothing again
    const looked = bed.fake.requests.count({ family: 'users' });
    await waitFor(() => bed.fake.requests.count({ family: 'users' }) >= looked + 3 || null, 20_000);
    expect(await eventCount('monitor.target_unavailable', [a, b])).toBe(2);

    // back: ok on both monitors, polled at once (not 10 s later), no webhook event; the account
    // is told once that the target is available again (a digest notice)
    bed.fake.state.suspend('xsleeper', false);
    const backAt = Date.now();
    await waitFor(async () => (await statuses([a, b])).every((s) => s === 'ok') || null, 20_000);
    await waitFor(async () => {
      const c = await bed.db.pollCursor.findUniqueOrThrow({ where: { targetKey: 'xsleeper' } });
      return c.lastPolledAt!.getTime() > backAt || null;
    }, 8_000);
    expect(await eventCount('monitor.target_unavailable', [a, b])).toBe(2);
    const notices = await bed.db.accountEvent.findMany({
      where: { routingKey: 'account.target.status', payload: { path: ['username'], equals: 'xsleeper' } },
      orderBy: { createdAt: 'asc' },
    });
    expect(notices.map((n) => (n.payload as { status: string }).status)).toEqual(['suspended', 'ok']);
    expect(notices[1]!.payload).toMatchObject({ status: 'ok', previousStatus: 'suspended' });
  });

  it('a rename: the monitors follow the account (by id) to its new username and say renamed', async () => {
    const user = bed.fake.state.addUser({ username: 'xoldhandle' });
    const m = await monitor('xoldhandle', 'xrename', ['posts', 'profile']);
    await waitFor(async () => (await snapshot('xoldhandle'))?.userId === user.id || null, 20_000);

    bed.fake.state.rename('xoldhandle', 'XNewHandle');
    await waitFor(async () => {
      const row = await bed.db.monitor.findUniqueOrThrow({ where: { id: m } });
      return (row.targetKey === 'xnewhandle' && row.targetStatus === 'renamed') || null;
    }, 20_000);
    expect((await bed.db.monitor.findUniqueOrThrow({ where: { id: m } })).targetUsername).toBe('XNewHandle');
    expect(await snapshot('xoldhandle')).toBeNull();
    expect((await snapshot('xnewhandle'))?.userId).toBe(user.id);
    const events = await bed.db.monitorEvent.findMany({ where: { monitorId: m }, orderBy: { kind: 'asc' } });
    expect(events.map((e) => e.kind)).toEqual(['monitor.profile_changed', 'monitor.target_unavailable']);
    expect(events[0]!.payload).toMatchObject({ changed: ['username'], after: { username: 'XNewHandle' } });
    expect(events[1]!.payload).toMatchObject({ status: 'renamed', username: 'xoldhandle', newUsername: 'XNewHandle' });
    // the new username is polled (a post of the renamed account becomes a hit)
    const post = bed.fake.state.post({ author: 'XNewHandle', text: 'after the rename' });
    await waitFor(
      async () => (await bed.db.hit.count({ where: { monitorId: m, tweetId: post.id } })) === 1 || null,
      20_000,
    );
  });

  it('a deleted account: not_found and one monitor.target_unavailable per monitor', async () => {
    bed.fake.state.addUser({ username: 'xdoomed' });
    const a = await monitor('xdoomed', 'xdoomed-a');
    const b = await monitor('xdoomed', 'xdoomed-b');
    await waitFor(async () => (await snapshot('xdoomed'))?.userId != null || null, 20_000);

    bed.fake.state.remove('xdoomed');
    await waitFor(async () => (await statuses([a, b])).every((s) => s === 'not_found') || null, 20_000);
    await waitFor(async () => (await eventCount('monitor.target_unavailable', [a, b])) === 2 || null, 10_000);
    const event = await bed.db.monitorEvent.findFirstOrThrow({ where: { monitorId: a } });
    expect(event.payload).toMatchObject({ status: 'not_found', previousStatus: 'ok', username: 'xdoomed' });
    const looked = bed.fake.requests.count({ family: 'users' });
    await waitFor(() => bed.fake.requests.count({ family: 'users' }) >= looked + 3 || null, 20_000);
    expect(await eventCount('monitor.target_unavailable', [a, b])).toBe(2);
  });
});

describe('the X account lookup: batched at the plan interval, in the fleet budget', () => {
  let bed: XTestBed;
  beforeAll(async () => {
    bed = await openXTestBed({ poolSize: 4 });
  });
  afterAll(() => bed.close());

  it('150 targets are 2 users calls per interval (names first, then ids), none between', async () => {
    const account = (await bed.db.account.create({ data: { email: 'batch@example.com', plan: 'starter' } })).id;
    for (let i = 0; i < 150; i++) {
      bed.fake.state.addUser({ username: `xb${i}` });
      await bed.db.monitor.create({ data: { accountId: account, targetUsername: `xb${i}`, targetKey: `xb${i}` } });
    }
    const governor = createRedisGovernor(bed.redis, { limits: { users: 300 } });
    const source = createXSource({ baseUrl: bed.fake.url, bearerToken: 't', redis: bed.redis, governor });
    let now = new Date();
    const lookup = xLookup(bed, source, {
      now: () => now,
      everyMs: 1000,
    });
    const users = () => bed.fake.requests.log.filter((r) => r.family === 'users');

    expect(await lookup.run()).toBe(150);
    expect(users().map((r) => [r.path, (r.params.get('usernames') ?? r.params.get('ids'))!.split(',').length])).toEqual(
      [
        ['/2/users/by', 100],
        ['/2/users/by', 50],
      ],
    );
    expect(await bed.db.targetProfile.count({ where: { userId: { not: null }, status: 'ok' } })).toBe(150);
    // within the interval: nothing due, no call
    now = new Date(now.getTime() + 30_000);
    expect(await lookup.run()).toBe(0);
    expect(users()).toHaveLength(2);
    // an interval later: by id, two calls
    now = new Date(now.getTime() + 30_000);
    expect(await lookup.run()).toBe(150);
    expect(
      users()
        .slice(2)
        .map((r) => [r.path, r.params.get('ids')!.split(',').length]),
    ).toEqual([
      ['/2/users', 100],
      ['/2/users', 50],
    ]);
    expect(users().every((r) => r.status === 200)).toBe(true);
    // every call went through the fleet's budget
    expect((await governor.budget('users')).remaining).toBe(300 - 4);
  });
});

describe('the X account lookup in 15 s rounds: once per plan interval, never a round early', () => {
  let bed: XTestBed;
  beforeAll(async () => {
    bed = await openXTestBed({ poolSize: 4 });
  });
  afterAll(() => bed.close());

  it('a Starter target looked at is not looked at again until its 60 s have passed', async () => {
    const account = (await bed.db.account.create({ data: { email: 'rounds@example.com', plan: 'starter' } })).id;
    const names = Array.from({ length: 120 }, (_, i) => `xr${i}`);
    for (const u of names) bed.fake.state.addUser({ username: u });
    await bed.db.monitor.createMany({
      data: names.map((u) => ({ accountId: account, targetUsername: u, targetKey: u })),
    });
    const source = createXSource({ baseUrl: bed.fake.url, bearerToken: 't', redis: bed.redis });
    const start = Date.now();
    let now = new Date(start);
    const lookup = xLookup(bed, source, {
      now: () => now,
      everyMs: 15_000,
    });
    const calls = () => bed.fake.requests.log.filter((r) => r.family === 'users').length;
    const looked: number[] = [];
    // five minutes of rounds, each 15 s after the last
    for (let s = 0; s <= 300; s += 15) {
      now = new Date(start + s * 1000);
      if ((await lookup.run()) > 0) looked.push(s);
    }
    // once a minute (two calls of 100 + 20 each), not every 45 s
    expect(looked).toEqual([0, 60, 120, 180, 240, 300]);
    expect(calls()).toBe(12);
  });
});

describe('X account lookup beside the stream backfill', () => {
  let bed: XTestBed;
  beforeAll(async () => {
    bed = await openXTestBed({ poolSize: 4 });
  });
  afterAll(async () => {
    await bed.close();
  });

  it('a never-looked-at target the stream backfill will look at is left to it, then looked at here', async () => {
    const account = (await bed.db.account.create({ data: { email: 'left@example.com', plan: 'starter' } })).id;
    for (const u of ['xleft', 'xright']) bed.fake.state.addUser({ username: u });
    await bed.db.monitor.createMany({
      data: ['xleft', 'xright'].map((u) => ({ accountId: account, targetUsername: u, targetKey: u })),
    });
    const source = createXSource({ baseUrl: bed.fake.url, bearerToken: 't', redis: bed.redis });
    let leaving = true;
    const asked: string[] = [];
    const lookup = xLookup(bed, source, {
      now: () => new Date(),
      leavesFirstLook: (t) => {
        asked.push(t.targetKey);
        return leaving && t.targetKey === 'xleft';
      },
    });
    const before = bed.fake.requests.log.length;
    expect(await lookup.run()).toBeGreaterThanOrEqual(1);
    expect(await bed.db.targetProfile.findUnique({ where: { targetKey: 'xright' } })).not.toBeNull();
    expect(await bed.db.targetProfile.findUnique({ where: { targetKey: 'xleft' } })).toBeNull();
    expect(asked).toContain('xleft');
    const names = bed.fake.requests.log.slice(before).flatMap((r) => (r.params.get('usernames') ?? '').split(','));
    expect(names).not.toContain('xleft');
    // the stream did not look (no stream alive, or past its time): the round looks itself
    leaving = false;
    await lookup.run();
    expect(await bed.db.targetProfile.findUnique({ where: { targetKey: 'xleft' } })).toMatchObject({ status: 'ok' });
  });
});

describe.each(['timeline', 'search'] as const)('X %s mode: a poll failing on the account has it looked at', (mode) => {
  let bed: XTestBed;
  let poller: Poller;
  beforeAll(async () => {
    bed = await openXTestBed({ poolSize: 4 });
    // a 1 s user cache: the search resolves its names on every poll (as once the cache TTL ran out)
    const source = createXSource({ baseUrl: bed.fake.url, bearerToken: 't', redis: bed.redis, userCacheTtlSeconds: 1 });
    poller = xPoller(bed, source, {
      // no periodic round within the test: only the looks the polls ask for
      profileLookupMs: 600_000,
      ...(mode === 'search' ? { search: { source, maxQueryLength: 512, overlapMs: 30_000 } } : {}),
    });
    await poller.start();
  });
  afterAll(async () => {
    await poller.stop();
    await bed.close();
  });

  it('a new target is looked at after its first poll; a suspension its poll meets sets target_status', async () => {
    const account = (await bed.db.account.create({ data: { email: `${mode}@example.com`, plan: 'starter' } })).id;
    bed.fake.state.addUser({ username: `${mode}_acct` });
    const m = await bed.db.monitor.create({
      data: { accountId: account, targetUsername: `${mode}_acct`, targetKey: `${mode}_acct` },
    });
    const looked = await waitFor(async () => {
      const p = await bed.db.targetProfile.findUnique({ where: { targetKey: `${mode}_acct` } });
      return p?.userId != null ? p.checkedAt : null;
    }, 20_000);
    // two polls after the look: the later one was claimed with the status known (asks for no look)
    await waitFor(async () => {
      const c = await bed.db.pollCursor.findUnique({ where: { targetKey: `${mode}_acct` } });
      return (c?.lastSuccessAt?.getTime() ?? 0) > looked.getTime() + 1500 || null;
    }, 20_000);
    await waitFor(() => poller.accounts!.idle() || null, 5_000);

    // only the poll meets the suspension (no periodic round): its failure asks for the look
    bed.fake.state.suspend(`${mode}_acct`);
    await waitFor(async () => {
      const row = await bed.db.monitor.findUniqueOrThrow({ where: { id: m.id } });
      return row.targetStatus === 'suspended' || null;
    }, 20_000);
    expect(await bed.db.monitorEvent.count({ where: { monitorId: m.id, kind: 'monitor.target_unavailable' } })).toBe(1);
    const cursor = await bed.db.pollCursor.findUniqueOrThrow({ where: { targetKey: `${mode}_acct` } });
    expect(cursor.lastError).toMatch(/suspended/);
  });
});
