/**
 * The X Activity API intake on X (SOCIAL_SOURCE=x), against the fake X's XAA, with the real
 * PostgreSQL, Redis and RabbitMQ and the real webhook-dispatcher delivering to a local HTTPS
 * receiver:
 * - a watched account with a profile monitor gets its five profile subscriptions; a bio change
 *   X pushes is one signed `monitor.profile_changed` within seconds, without a user lookup, and the
 *   pushed account is then looked up for health only (X_HEALTH_LOOKUP_SECONDS);
 * - a handle change pushed: the monitors follow the account to its new username;
 * - X_ACTIVITY_MAX_SUBS full: paying accounts first, a Free-only account left polled (its change
 *   still found by the lookup); a deleted monitor's subscriptions are deleted;
 * - a disconnect: the change made meanwhile is replayed (`start_time`) and told once;
 * - X_INTAKE_ACTIVITY=all: `post.create` becomes the monitor's hit with no poll at all.
 */
import { createLogger } from '@sts/common';
import { createXSource, type XSource } from '@sts/social';
import { createFakeActivity, waitFor, waitForMany, type FakeActivity } from '@sts/testing';
import { Registry } from 'prom-client';
import { openXTestBed, type XTestBed } from '../test/xTestBed';
import { openDeliveryBed, type DeliveryBed } from '../test/deliveryBed';
import { createRedisLeases } from './adapters/lease';
import { createProfileRepository } from './adapters/profiles';
import { createHitWriter } from './adapters/hitWriter';
import { createScheduleStore } from './adapters/scheduleStore';
import { buildActivityIntake } from './intake/activity';
import type { ActivityIntake } from './intake/activity/intake';
import { createPoller, type Poller } from './poller';

const logger = createLogger({ service: 'x-activity-test', level: 'error' });

/** the activity intake as main.ts builds it, on the bed's fake X (syncs every 200 ms) */
function activityIntake(
  bed: XTestBed,
  source: XSource,
  o: { mode: 'profiles' | 'all'; maxSubs: number; registry: Registry; stallMs?: number },
): ActivityIntake {
  return buildActivityIntake(
    {
      X_API_BASE_URL: bed.fake.url,
      X_BEARER_TOKEN: 't',
      X_TIMEOUT_MS: 5000,
      X_INTAKE_ACTIVITY: o.mode,
      X_ACTIVITY_MAX_SUBS: o.maxSubs,
      X_STREAM_LEASE_SECONDS: 5,
    },
    {
      db: bed.db,
      schedule: createScheduleStore(bed.db),
      writer: createHitWriter(bed.db),
      governor: source.client.governor,
      logger,
      registry: o.registry,
      syncMs: 200,
      ...(o.stallMs !== undefined && { stallMs: o.stallMs }),
    },
  );
}

describe('the X Activity API intake', () => {
  let bed: XTestBed;
  let activity: FakeActivity;
  let poller: Poller;
  let intake: ActivityIntake;
  let deliveries: DeliveryBed;
  let starter: string;
  let free: string;
  const registry = new Registry();

  beforeAll(async () => {
    activity = createFakeActivity({ keepAliveMs: 200 });
    bed = await openXTestBed({ poolSize: 6, fakeX: { routes: activity.routes, limits: { users: 100_000 } } });
    starter = (await bed.db.account.create({ data: { email: 'xaa-starter@example.com', plan: 'starter' } })).id;
    free = (await bed.db.account.create({ data: { email: 'xaa-free@example.com', plan: 'free' } })).id;
    deliveries = await openDeliveryBed({ ...bed, logger, name: 'x-activity' });
    const source: XSource = createXSource({
      baseUrl: bed.fake.url,
      bearerToken: 't',
      redis: bed.redis,
      timeoutMs: 5000,
    });
    poller = createPoller({
      schedule: createScheduleStore(bed.db),
      writer: createHitWriter(bed.db),
      source,
      leases: createRedisLeases(bed.redis),
      logger,
      // every account looked at each second unless X pushes it (then hourly: health only)
      intervals: { plans: { free: { pollIntervalSec: 1 }, starter: { pollIntervalSec: 1 } } },
      tickMs: 100,
      concurrency: 8,
      batchSize: 100,
      pollTimeoutMs: 30_000,
      claimLimit: 200,
      profiles: createProfileRepository(bed.db),
      xAccounts: source,
      profileLookupMs: 300,
      healthLookupSec: 3600,
    });
    await poller.start();
    intake = activityIntake(bed, source, { mode: 'profiles', maxSubs: 10, registry, stallMs: 5000 });
    intake.start();
  });

  afterAll(async () => {
    await intake.stop();
    await poller.stop();
    await deliveries.close();
    await bed.close();
  });

  const delivered = (event: string, path: string) => deliveries.delivered(event, path);
  const pushed = async (key: string) =>
    (await bed.db.xActivityAccount.findUnique({ where: { targetKey: key } }))?.eventTypes ?? null;
  const subscribed = (userId: string) =>
    activity
      .subscriptions()
      .filter((s) => s.filter.user_id === userId)
      .map((s) => s.event_type)
      .sort();
  const usersReadsOf = (userId: string) =>
    bed.fake.requests.log.filter((r) => r.path === '/2/users' && r.params.get('ids')?.split(',').includes(userId))
      .length;
  /**
   * The account's lookup count once no lookup round that read it before it was pushed is still in
   * flight: the count has not moved for 1.5 s.
   */
  const settledReads = async (userId: string) => {
    let last = -1;
    const settled = await waitFor(
      async () => {
        const n = usersReadsOf(userId);
        if (n === last) return { n };
        last = n;
        await new Promise((r) => setTimeout(r, 1500));
        return null;
      },
      60_000,
      0,
    );
    return settled.n;
  };

  it('pushes a bio change as one signed monitor.profile_changed without a lookup; health looks are hourly', async () => {
    const user = bed.fake.state.addUser({ username: 'XaaBio', description: 'old bio' });
    const m = await deliveries.monitor(starter, 'XaaBio', 'xaabio', ['posts', 'profile']);
    await waitFor(async () => (await pushed('xaabio')) ?? null, 20_000);
    expect(subscribed(user.id)).toEqual([
      'profile.update.bio',
      'profile.update.handle',
      'profile.update.profile_picture',
      'profile.update.screenname',
      'profile.update.verified_badge',
    ]);
    await waitFor(() => activity.connections() === 1 || null, 20_000);
    // a lookup round that read the targets before the account was pushed may still be in flight
    const reads = await settledReads(user.id);

    bed.fake.state.update('XaaBio', { description: 'new bio' });
    const [req] = await waitForMany(() => delivered('monitor.profile_changed', 'xaabio'), 1, 20_000);
    expect(deliveries.signedBy(req!, m)).toBe(true);
    expect(JSON.parse(req!.rawBody.toString())).toMatchObject({
      event: 'monitor.profile_changed',
      userId: user.id,
      changed: ['description'],
      before: { description: 'old bio' },
      after: { description: 'new bio' },
    });
    // no lookup told it, and none follows (a second is 1 s for an account X does not push)
    await new Promise((r) => setTimeout(r, 2500));
    expect(usersReadsOf(user.id)).toBe(reads);
    expect(await bed.db.monitorEvent.count({ where: { monitorId: m, kind: 'monitor.profile_changed' } })).toBe(1);
  });

  it('a pushed handle change: the monitors follow the account to its new username', async () => {
    const user = bed.fake.state.addUser({ username: 'xaaold' });
    const m = await deliveries.monitor(starter, 'xaaold', 'xaarename', ['posts', 'profile']);
    await waitFor(async () => (await pushed('xaaold')) ?? null, 20_000);
    await waitFor(() => activity.connections() === 1 || null, 20_000);
    // a lookup round that read the targets before the account was pushed may still be in flight
    const reads = await settledReads(user.id);
    bed.fake.state.rename('xaaold', 'XaaNew');
    await waitFor(async () => {
      const row = await bed.db.monitor.findUniqueOrThrow({ where: { id: m } });
      return (row.targetKey === 'xaanew' && row.targetStatus === 'renamed') || null;
    }, 20_000);
    expect(usersReadsOf(user.id)).toBe(reads);
    // the next reconciliation records the account under its new target
    await waitFor(async () => (await pushed('xaanew')) ?? null, 20_000);
  });

  it('within X_ACTIVITY_MAX_SUBS: paying first, a Free-only account polled; a deleted monitor frees its room', async () => {
    // 10 subscriptions: two accounts of five, both taken by the tests above
    const user = bed.fake.state.addUser({ username: 'xaafree', description: 'a' });
    const m = await deliveries.monitor(free, 'xaafree', 'xaafree', ['posts', 'profile']);
    await waitFor(async () => (await bed.db.targetProfile.findUnique({ where: { targetKey: 'xaafree' } })) ?? null);
    await new Promise((r) => setTimeout(r, 1000));
    expect(await pushed('xaafree')).toBeNull();
    expect(subscribed(user.id)).toEqual([]);
    expect(await registry.getSingleMetricAsString('poller_x_activity_accounts')).toMatch(/path="polled"} 1/);
    // polled: a lookup finds the change
    const readsBefore = usersReadsOf(user.id);
    bed.fake.state.update('xaafree', { description: 'b' });
    await waitFor(
      async () =>
        (await bed.db.monitorEvent.count({ where: { monitorId: m, kind: 'monitor.profile_changed' } })) === 1 || null,
      20_000,
    );
    expect(usersReadsOf(user.id)).toBeGreaterThan(readsBefore);

    // a paying monitor goes: its account's subscriptions are deleted, the Free one takes the room
    const bio = await bed.db.monitor.findFirstOrThrow({ where: { targetKey: 'xaabio' } });
    await bed.db.monitor.delete({ where: { id: bio.id } });
    await waitFor(() => subscribed(user.id).length === 5 || null, 20_000);
    // recorded once the reconciliation ends
    await waitFor(
      async () => ((await pushed('xaabio')) === null && (await pushed('xaafree')) !== null) || null,
      20_000,
    );
    expect(activity.subscriptions()).toHaveLength(10);
  });

  it('a disconnect: the change made meanwhile is replayed from start_time and told once', async () => {
    bed.fake.state.addUser({ username: 'xaagap', name: 'Before' });
    await deliveries.monitor(starter, 'xaagap', 'xaagap', ['profile']);
    // room: the free account's monitor goes
    await bed.db.monitor.deleteMany({ where: { targetKey: 'xaafree' } });
    await waitFor(async () => (await pushed('xaagap')) ?? null, 20_000);
    await waitFor(() => activity.connections() === 1 || null, 20_000);
    const connects = activity.connects();
    activity.outage(true);
    bed.fake.state.update('xaagap', { name: 'During' });
    await new Promise((r) => setTimeout(r, 1500));
    activity.outage(false);
    await waitFor(() => activity.connects() > connects || null, 20_000);
    expect(activity.lastParams()?.get('start_time')).toBeTruthy();
    const [req] = await waitForMany(() => delivered('monitor.profile_changed', 'xaagap'), 1, 20_000);
    expect(JSON.parse(req!.rawBody.toString())).toMatchObject({ changed: ['name'], after: { name: 'During' } });
    await new Promise((r) => setTimeout(r, 1000));
    expect(delivered('monitor.profile_changed', 'xaagap')).toHaveLength(1);
  });
});

describe('X_INTAKE_ACTIVITY=all', () => {
  let bed: XTestBed;
  let activity: FakeActivity;
  let intake: ActivityIntake;
  let build: () => ActivityIntake;
  let deliveries: DeliveryBed;
  let starter: string;

  beforeAll(async () => {
    activity = createFakeActivity({ keepAliveMs: 200 });
    bed = await openXTestBed({ poolSize: 6, fakeX: { routes: activity.routes } });
    starter = (await bed.db.account.create({ data: { email: 'xaa-all@example.com', plan: 'starter' } })).id;
    deliveries = await openDeliveryBed({ ...bed, logger, name: 'x-activity-all' });
    const source = createXSource({ baseUrl: bed.fake.url, bearerToken: 't', redis: bed.redis, timeoutMs: 5000 });
    // no poller: a hit can only come from the activity stream
    build = () => activityIntake(bed, source, { mode: 'all', maxSubs: 100, registry: new Registry() });
    intake = build();
    intake.start();
  });

  afterAll(async () => {
    await intake.stop();
    await deliveries.close();
    await bed.close();
  });

  /**
   * `username` made on the fake X with the account id a first look would have recorded; resolves
   * once its subscriptions of `types` are held and the stream is connected
   */
  async function subscribed(username: string, types: readonly string[]): Promise<void> {
    const user = bed.fake.state.addUser({ username });
    await bed.db.targetProfile.create({
      data: { targetKey: username.toLowerCase(), userId: user.id, username, name: username, verified: false },
    });
    // X sends an event only to a subscription that exists
    await waitFor(
      () =>
        types.every((type) =>
          activity.subscriptions().some((s) => s.event_type === type && s.filter.user_id === user.id),
        ) || null,
      20_000,
    );
    await waitFor(() => activity.connections() === 1 || null, 20_000);
  }

  it("takes post.create for a username monitor's account: the post is one signed monitor.hit", async () => {
    const m = await deliveries.monitor(starter, 'XaaPoster', 'xaaposter', ['posts']);
    await subscribed('XaaPoster', ['post.create']);
    const post = bed.fake.state.post({ author: 'XaaPoster', text: 'pushed by XAA' });
    const hit = await waitFor(() => bed.db.hit.findFirst({ where: { monitorId: m, tweetId: post.id } }), 20_000);
    expect(hit.tweetText).toBe('pushed by XAA');
    const [req] = await waitForMany(
      () => deliveries.receiver.requests.filter((r) => r.path === '/xaaposter'),
      1,
      20_000,
    );
    expect(req!.headers['x-service-event']).toBe('monitor.hit');
    expect(deliveries.signedBy(req!, m)).toBe(true);
  });

  it('post.delete: one signed monitor.post_deleted with the hit sent for the post, only to the monitor asking', async () => {
    const m = await deliveries.monitor(starter, 'XaaDeleter', 'xaadeleter', ['posts', 'deletes']);
    const postsOnly = await deliveries.monitor(starter, 'XaaDeleter', 'xaadeleter-posts', ['posts']);
    // both subscriptions held before the post
    await subscribed('XaaDeleter', ['post.create', 'post.delete']);
    const kept = bed.fake.state.post({ author: 'XaaDeleter', text: 'oops, wrong account' });
    const hit = await waitFor(() => bed.db.hit.findFirst({ where: { monitorId: m, tweetId: kept.id } }), 20_000);
    bed.fake.state.deletePost(kept.id);
    await waitFor(
      async () =>
        (await bed.db.monitorEvent.count({ where: { kind: 'monitor.post_deleted', monitorId: m } })) === 1 || null,
      20_000,
    );
    const [req] = await waitForMany(() => deliveries.delivered('monitor.post_deleted', 'xaadeleter'), 1, 20_000);
    expect(deliveries.signedBy(req!, m)).toBe(true);
    expect(JSON.parse(req!.rawBody.toString())).toMatchObject({
      event: 'monitor.post_deleted',
      monitor: { id: m, targetUsername: 'XaaDeleter' },
      postId: kept.id,
      username: 'XaaDeleter',
      hit: { id: hit.id, text: 'oops, wrong account', createdAt: hit.tweetCreatedAt.toISOString() },
    });
    // a deletion replayed after a disconnect is not told again
    activity.disconnect();
    await waitFor(() => activity.connects() >= 2 || null, 20_000);
    await new Promise((r) => setTimeout(r, 1000));
    expect(await bed.db.monitorEvent.count({ where: { kind: 'monitor.post_deleted', monitorId: m } })).toBe(1);
    expect(await bed.db.monitorEvent.count({ where: { monitorId: postsOnly } })).toBe(0);
  });
  it('a restart: the next holder replays from where the last one recorded, and a post made between is one hit', async () => {
    const m = await deliveries.monitor(starter, 'XaaRestart', 'xaarestart', ['posts']);
    await subscribed('XaaRestart', ['post.create']);
    // the position is saved while the stream runs
    await waitFor(
      async () => (await bed.db.xStreamState.findUnique({ where: { name: 'x-activity' } }))?.aliveAt,
      20_000,
    );
    await intake.stop();
    const stoppedAt = Date.now();
    const saved = (await bed.db.xStreamState.findUnique({ where: { name: 'x-activity' } }))!.aliveAt!;
    const post = bed.fake.state.post({ author: 'XaaRestart', text: 'made while no replica held the stream' });
    const connects = activity.connects();
    intake = build();
    intake.start();
    await waitFor(() => activity.connects() > connects || null, 20_000);
    // from the saved position less the 5 s overlap, not X's whole 5-minute window
    const start = Date.parse(activity.lastParams()!.get('start_time')!);
    expect(start).toBeGreaterThanOrEqual(Math.floor((saved.getTime() - 5000) / 1000) * 1000);
    expect(stoppedAt - start).toBeLessThan(60_000);
    const hit = await waitFor(() => bed.db.hit.findFirst({ where: { monitorId: m, tweetId: post.id } }), 20_000);
    expect(hit.tweetText).toBe('made while no replica held the stream');
    await new Promise((r) => setTimeout(r, 1000));
    expect(await bed.db.hit.count({ where: { monitorId: m } })).toBe(1);
  });
});
