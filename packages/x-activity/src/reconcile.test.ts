import { createProcessGovernor } from '@sts/social';
import { createFakeActivity, startFakeX, waitFor, type FakeActivity, type FakeX } from '@sts/testing';
import { createXActivityApi, SubscriptionReconciler, type WatchedAccount, type XaaEvent } from './index';

let fake: FakeX;
let activity: FakeActivity;

async function start(options: Parameters<typeof createFakeActivity>[0]) {
  activity = createFakeActivity({ keepAliveMs: 100, ...options });
  fake = await startFakeX({ routes: activity.routes });
  return createXActivityApi({ baseUrl: fake.url, bearerToken: 't', governor: createProcessGovernor() });
}
afterEach(() => fake.stop());

const profileTypes = ['profile.update.bio', 'profile.update.handle'] as const;

function account(n: number, paying: boolean, types: WatchedAccount['types'] = profileTypes): WatchedAccount {
  return { userId: String(1000 + n), targetKey: `t${String(n).padStart(2, '0')}`, paying, types };
}

describe('SubscriptionReconciler', () => {
  it('subscribes paying accounts first within X_ACTIVITY_MAX_SUBS, leaves the rest polled, removes the unwanted', async () => {
    const api = await start({});
    const reconciler = new SubscriptionReconciler({ api, tag: 'sts', max: 4 });
    const accounts = [account(1, false), account(2, true), account(3, true)];
    const first = await reconciler.reconcile(accounts);
    expect(first.complete).toBe(true);
    expect(first.pushed.map((a) => a.targetKey)).toEqual(['t02', 't03']);
    expect(first.polled.map((a) => a.targetKey)).toEqual(['t01']);
    expect(activity.subscriptions()).toHaveLength(4);

    // a paying account's monitor is deleted: its subscriptions go, the free one takes the room
    const second = await reconciler.reconcile([account(1, false), account(3, true)]);
    expect(second).toMatchObject({ removed: 2, created: 2 });
    expect(second.pushed.map((a) => a.targetKey)).toEqual(['t03', 't01']);
    expect(
      activity
        .subscriptions()
        .map((s) => s.filter.user_id)
        .sort(),
    ).toEqual(['1001', '1001', '1003', '1003']);

    // nothing changed: nothing is called but the list
    fake.requests.clear();
    await reconciler.reconcile([account(1, false), account(3, true)]);
    expect(fake.requests.log.map((r) => r.method)).toEqual(['GET']);
  });

  it('reports a type the tier refuses once, keeps its account polled and never retries it within the hour', async () => {
    const api = await start({ refusedTypes: ['post.delete'] });
    const reconciler = new SubscriptionReconciler({ api, tag: 'sts', max: 100 });
    const accounts = [account(1, true, ['post.delete']), account(2, true)];
    const first = await reconciler.reconcile(accounts);
    expect(first.refusedNow).toEqual([
      expect.objectContaining({ eventType: 'post.delete', userId: '1001', refusal: 'forbidden' }),
    ]);
    expect(first.polled.map((a) => a.targetKey)).toEqual(['t01']);
    expect(first.pushed.map((a) => a.targetKey)).toEqual(['t02']);
    fake.requests.clear();
    const second = await reconciler.reconcile(accounts);
    expect(second.refusedNow).toEqual([]);
    expect(fake.requests.count({ status: 403 })).toBe(0);
  });

  it("stops at X's own limit when it is below the configured one, and keeps other tags' subscriptions", async () => {
    const api = await start({ maxSubscriptions: 3 });
    await api.create({ eventType: 'post.create', userId: '42' }, 'someone-else');
    const reconciler = new SubscriptionReconciler({ api, tag: 'sts', max: 2500 });
    const first = await reconciler.reconcile([account(1, true), account(2, true)]);
    expect(first.refusedNow.map((r) => r.refusal)).toEqual(['limit']);
    expect(first.pushed.map((a) => a.targetKey)).toEqual(['t01']);
    expect(activity.subscriptions().map((s) => s.tag)).toEqual(['someone-else', 'sts', 'sts']);
    fake.requests.clear();
    const second = await reconciler.reconcile([account(1, true), account(2, true)]);
    expect(second.refusedNow).toEqual([]);
    expect(fake.requests.count({ status: 400 })).toBe(0);
  });
});

describe('XActivityApi stream', () => {
  it('reads envelopes, keep-alives and X disconnect notices; start_time replays the gap', async () => {
    const api = await start({});
    const user = fake.state.addUser({ username: 'alice', description: 'a' });
    await api.create({ eventType: 'profile.update.bio', userId: user.id }, 'sts');
    const events: XaaEvent[] = [];
    let bytes = 0;
    const handlers = { onEvent: (e: XaaEvent) => events.push(e), onActivity: () => void bytes++ };
    const abort = new AbortController();
    const { closed } = await api.connect(handlers, abort.signal);
    const since = new Date(Date.now() - 1000);
    fake.state.update('alice', { description: 'b' });
    await waitFor(() => events.length === 1);
    expect(events[0]).toMatchObject({
      userId: user.id,
      eventType: 'profile.update.bio',
      tag: 'sts',
      payload: { before: 'a', after: 'b' },
    });
    await waitFor(() => bytes >= 3);
    activity.disconnect();
    await expect(closed).rejects.toThrow(/operational-disconnect/);
    fake.state.update('alice', { description: 'c' });

    const again = await api.connect(handlers, abort.signal, { startTime: since });
    await waitFor(() => events.length === 3);
    expect(events.map((e) => e.payload.after)).toEqual(['b', 'b', 'c']);
    expect(events[1]!.uuid).toBe(events[0]!.uuid);
    abort.abort();
    await again.closed.catch(() => undefined);
  });
});
