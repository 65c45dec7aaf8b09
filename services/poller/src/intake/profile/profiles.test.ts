/**
 * Profile changes and target health on the real PostgreSQL, Redis and RabbitMQ, with the real webhook-dispatcher
 * process delivering to a local HTTPS receiver:
 * - a profile change of a watched local account (the users trigger, LISTEN) → one signed
 *   `monitor.profile_changed` delivery with the fields before and after, only to the monitor that
 *   asked for profile events;
 * - the account suspended (the local store's flag) → `target_status` suspended on its monitors,
 *   one `monitor.target_unavailable` per monitor, one `account.target.status` account event (the
 *   mail), polls backed off; back → `ok`, polled at once, no more webhook events, one
 *   `account.target.status` (status ok: the "available again" notice);
 * - a rename → the monitors follow the account (same id) to its new username;
 * - a deleted account → `target_status` not_found, one `monitor.target_unavailable` per monitor.
 */
import { createLogger } from '@sts/common';
import type { Db } from '@sts/db';
import { createLocalSource, createSocialUser } from '@sts/social';
import { waitFor, waitForMany, openTestStore, type TestStore } from '@sts/testing';
import { createProfileRepository } from '../../adapters/profiles';
import { openDeliveryBed, type DeliveryBed } from '../../../test/deliveryBed';
import type { Poller } from '../../poller';
import { plans, testPoller } from '../../../test/poller';

const logger = createLogger({ service: 'profiles-test', level: 'error' });

describe('profile changes and target health on the local store', () => {
  let bed: TestStore;
  let db: Db;
  let poller: Poller;
  let deliveries: DeliveryBed;

  beforeAll(async () => {
    bed = await openTestStore({ poolSize: 6 });
    db = bed.db;
    deliveries = await openDeliveryBed({ ...bed, logger, name: 'profiles' });
    poller = testPoller(
      { db, redis: bed.redis },
      {
        source: createLocalSource({ db }),
        logger,
        intervals: { plans, overrideSec: 1 },
        tickMs: 100,
        databaseUrl: bed.dbDirectUrl,
        profiles: createProfileRepository(db),
      },
    );
    await poller.start();
  });

  afterAll(async () => {
    await poller.stop();
    await deliveries.close();
    await bed.close();
  });

  const monitor = (target: string, path: string, events?: string[]) => deliveries.watch(target, path, events);
  const delivered = (event: string, path?: string) => deliveries.delivered(event, path);
  const snapshot = (key: string) => db.targetProfile.findUnique({ where: { targetKey: key } });

  it('a profile change is one signed monitor.profile_changed delivery with before and after', async () => {
    await createSocialUser(db, { username: 'Changer', name: 'Old Name', description: 'old bio' });
    const wants = await monitor('Changer', 'changer-profile', ['posts', 'profile']);
    await monitor('Changer', 'changer-posts');
    // the first poll takes the snapshot the change is compared with
    await waitFor(async () => (await snapshot('changer')) !== null, 20_000);

    await db.$executeRaw`UPDATE social_users SET name = 'New Name', description = 'new bio', verified = true WHERE username_key = 'changer'`;
    const [req] = await waitForMany(() => delivered('monitor.profile_changed'), 1, 30_000);
    expect(req!.path).toBe('/changer-profile');
    expect(deliveries.signedBy(req!, wants)).toBe(true);
    const body = JSON.parse(req!.rawBody.toString()) as Record<string, unknown>;
    expect(body).toMatchObject({
      event: 'monitor.profile_changed',
      monitor: { id: wants, targetUsername: 'Changer' },
      changed: ['name', 'description', 'verified'],
      before: { username: 'Changer', name: 'Old Name', description: 'old bio', verified: false },
      after: { username: 'Changer', name: 'New Name', description: 'new bio', verified: true },
    });
    // logged like a hit (redeliverable), once; the posts-only monitor got nothing
    await waitFor(
      async () => (await db.deliveryAttempt.count({ where: { event: 'monitor.profile_changed' } })) === 1,
      10_000,
    );
    const attempt = await db.deliveryAttempt.findFirstOrThrow({ where: { event: 'monitor.profile_changed' } });
    expect(attempt).toMatchObject({ monitorId: wants, outcome: 'delivered' });
    expect(await db.monitorEvent.count({ where: { id: attempt.hitId! } })).toBe(1);
    expect(await db.monitorEvent.count({ where: { kind: 'monitor.profile_changed' } })).toBe(1);
    // an update that changes nothing watched sends nothing
    await db.$executeRaw`UPDATE social_users SET followers_count = 5 WHERE username_key = 'changer'`;
    await db.$executeRaw`UPDATE social_users SET name = 'Newer' WHERE username_key = 'changer'`;
    await waitFor(
      async () => (await db.monitorEvent.count({ where: { kind: 'monitor.profile_changed' } })) === 2,
      20_000,
    );
    const second = await db.monitorEvent.findFirstOrThrow({
      where: { kind: 'monitor.profile_changed' },
      orderBy: { createdAt: 'desc' },
    });
    expect(second.payload).toMatchObject({ changed: ['name'], before: { name: 'New Name' }, after: { name: 'Newer' } });
  });

  it('a suspended account: target_status, one event per monitor, one mail, backed-off polls; back: ok', async () => {
    await createSocialUser(db, { username: 'sleeper', name: 'Sleeper' });
    const a = await monitor('sleeper', 'sleeper-a');
    const b = await monitor('sleeper', 'sleeper-b', ['posts', 'profile']);
    await waitFor(async () => (await snapshot('sleeper'))?.status === 'ok', 20_000);

    await db.$executeRaw`UPDATE social_users SET status = 'suspended' WHERE username_key = 'sleeper'`;
    await waitFor(async () => {
      const ms = await db.monitor.findMany({ where: { id: { in: [a, b] } }, select: { targetStatus: true } });
      return ms.every((m) => m.targetStatus === 'suspended');
    }, 20_000);
    const sent = await waitForMany(
      () => delivered('monitor.target_unavailable').filter((r) => r.path.startsWith('/sleeper')),
      2,
      30_000,
    );
    expect(sent.map((r) => r.path).sort()).toEqual(['/sleeper-a', '/sleeper-b']);
    const bodyA = JSON.parse(sent.find((r) => r.path === '/sleeper-a')!.rawBody.toString()) as Record<string, unknown>;
    expect(bodyA).toMatchObject({
      event: 'monitor.target_unavailable',
      monitor: { id: a },
      status: 'suspended',
      previousStatus: 'ok',
      username: 'sleeper',
      newUsername: null,
    });
    expect(
      deliveries.signedBy(
        sent.find((r) => r.path === '/sleeper-a')!,
        a,
      ),
    ).toBe(true);
    // one account event (the mail) for the account's two monitors
    const mails = await db.accountEvent.findMany({ where: { routingKey: 'account.target.status' } });
    expect(mails).toHaveLength(1);
    expect(mails[0]!.payload).toMatchObject({ status: 'suspended', username: 'sleeper' });
    expect([...(mails[0]!.payload as { monitorIds: string[] }).monitorIds].sort()).toEqual([a, b].sort());

    // polls back off: the next poll schedules the target 10 intervals on, not 1
    const suspendedAt = Date.now();
    await waitFor(async () => {
      const c = await db.pollCursor.findUnique({ where: { targetKey: 'sleeper' } });
      return (c?.lastPolledAt?.getTime() ?? 0) > suspendedAt;
    }, 20_000);
    await waitFor(async () => {
      const c = await db.pollCursor.findUniqueOrThrow({ where: { targetKey: 'sleeper' } });
      const t = await db.pollTarget.findUniqueOrThrow({ where: { targetKey: 'sleeper' } });
      return t.nextDueAt.getTime() - c.lastPolledAt!.getTime() >= 9_000;
    }, 10_000);

    // a second notification of the same state tells nothing again
    await db.$executeRaw`UPDATE social_users SET description = 'still away' WHERE username_key = 'sleeper'`;
    await waitFor(
      async () => (await db.monitorEvent.count({ where: { kind: 'monitor.profile_changed', monitorId: b } })) === 1,
      20_000,
    );
    expect(
      await db.monitorEvent.count({ where: { kind: 'monitor.target_unavailable', monitorId: { in: [a, b] } } }),
    ).toBe(2);

    // back: ok on both monitors, polled at once (not 10 s later), no webhook event, one notice
    await db.$executeRaw`UPDATE social_users SET status = 'active' WHERE username_key = 'sleeper'`;
    const backAt = Date.now();
    await waitFor(async () => {
      const ms = await db.monitor.findMany({ where: { id: { in: [a, b] } }, select: { targetStatus: true } });
      return ms.every((m) => m.targetStatus === 'ok');
    }, 20_000);
    await waitFor(async () => {
      const c = await db.pollCursor.findUniqueOrThrow({ where: { targetKey: 'sleeper' } });
      return c.lastPolledAt!.getTime() > backAt;
    }, 8_000);
    expect(
      await db.monitorEvent.count({ where: { kind: 'monitor.target_unavailable', monitorId: { in: [a, b] } } }),
    ).toBe(2);
    const told = await db.accountEvent.findMany({
      where: { routingKey: 'account.target.status' },
      orderBy: { createdAt: 'asc' },
    });
    expect(told.map((e) => e.payload)).toMatchObject([
      { status: 'suspended', username: 'sleeper' },
      { status: 'ok', previousStatus: 'suspended', username: 'sleeper', newUsername: null },
    ]);
    expect([...(told[1]!.payload as { monitorIds: string[] }).monitorIds].sort()).toEqual([a, b].sort());
  });

  it('a rename: the monitors follow the account to its new username and say renamed', async () => {
    const user = await createSocialUser(db, { username: 'oldhandle', name: 'Handle' });
    const m = await monitor('oldhandle', 'rename', ['posts', 'profile']);
    await waitFor(async () => (await snapshot('oldhandle')) !== null, 20_000);

    await db.$executeRaw`UPDATE social_users SET username = 'NewHandle', username_key = 'newhandle' WHERE id = ${BigInt(user.id)}`;
    await waitFor(async () => {
      const row = await db.monitor.findUniqueOrThrow({ where: { id: m } });
      return row.targetKey === 'newhandle' && row.targetStatus === 'renamed';
    }, 20_000);
    expect((await db.monitor.findUniqueOrThrow({ where: { id: m } })).targetUsername).toBe('NewHandle');
    expect(await snapshot('oldhandle')).toBeNull();
    expect((await snapshot('newhandle'))?.userId).toBe(user.id);
    const events = await db.monitorEvent.findMany({ where: { monitorId: m }, orderBy: { kind: 'asc' } });
    expect(events.map((e) => e.kind)).toEqual(['monitor.profile_changed', 'monitor.target_unavailable']);
    expect(events[0]!.payload).toMatchObject({ changed: ['username'], after: { username: 'NewHandle' } });
    expect(events[1]!.payload).toMatchObject({ status: 'renamed', username: 'oldhandle', newUsername: 'NewHandle' });
  });

  it('a deleted account: not_found on its monitors, one monitor.target_unavailable each, one mail', async () => {
    await createSocialUser(db, { username: 'doomed', name: 'Doomed' });
    const a = await monitor('doomed', 'doomed-a');
    const b = await monitor('doomed', 'doomed-b', ['posts', 'profile']);
    await waitFor(async () => (await snapshot('doomed'))?.status === 'ok', 20_000);

    await db.$executeRaw`DELETE FROM social_users WHERE username_key = 'doomed'`;
    await waitFor(async () => {
      const ms = await db.monitor.findMany({ where: { id: { in: [a, b] } }, select: { targetStatus: true } });
      return ms.every((m) => m.targetStatus === 'not_found');
    }, 20_000);
    const sent = await waitForMany(
      () => delivered('monitor.target_unavailable').filter((r) => r.path.startsWith('/doomed')),
      2,
      30_000,
    );
    expect(sent.map((r) => r.path).sort()).toEqual(['/doomed-a', '/doomed-b']);
    const toB = sent.find((r) => r.path === '/doomed-b')!;
    expect(deliveries.signedBy(toB, b)).toBe(true);
    expect(JSON.parse(toB.rawBody.toString())).toMatchObject({
      event: 'monitor.target_unavailable',
      monitor: { id: b },
      status: 'not_found',
      previousStatus: 'ok',
      username: 'doomed',
      newUsername: null,
    });
    const mails = await db.accountEvent.findMany({
      where: { routingKey: 'account.target.status', payload: { path: ['username'], equals: 'doomed' } },
    });
    expect(mails).toHaveLength(1);
    expect(mails[0]!.payload).toMatchObject({ status: 'not_found' });
    // the looks after failed polls of the gone account tell nothing again
    const polledAt = Date.now();
    await waitFor(async () => {
      const c = await db.pollCursor.findUnique({ where: { targetKey: 'doomed' } });
      return (c?.lastPolledAt?.getTime() ?? 0) > polledAt;
    }, 20_000);
    await waitFor(() => poller.profiles!.idle(), 5_000);
    expect(
      await db.monitorEvent.count({ where: { kind: 'monitor.target_unavailable', monitorId: { in: [a, b] } } }),
    ).toBe(2);
  });
});
