import { createFakeActivity, startFakeX, type FakeActivity, type FakeX, type FakeXUser } from './index';
import { waitFor } from '../wait';
import { collectStream } from './collect';

const AUTH = { authorization: 'Bearer test-token', 'content-type': 'application/json' };
let fake: FakeX;
let activity: FakeActivity;
let alice: FakeXUser;
let bob: FakeXUser;

beforeEach(async () => {
  activity = createFakeActivity({ keepAliveMs: 100, maxSubscriptions: 3, refusedTypes: ['profile.update.geo'] });
  fake = await startFakeX({ routes: activity.routes });
  alice = fake.state.addUser({ username: 'alice', description: 'old bio' });
  bob = fake.state.addUser({ username: 'bob' });
});
afterEach(() => fake.stop());

/** the parts of X's answers the tests read */
interface Answer {
  data: {
    subscription: { subscription_id: string };
    event_type: string;
  } & { [i: number]: { event_type: string } } & { length: number };
  meta: { next_token?: string; total_subscriptions: number };
  errors: { parameters: Record<string, string[]> }[];
  title: string;
}

interface Envelope {
  data: { event_uuid: string; payload: { after?: string } };
  errors: { disconnect_type: string }[];
}

async function call(method: string, path: string, body?: unknown): Promise<{ status: number; json: Answer }> {
  const res = await fetch(`${fake.url}${path}`, {
    method,
    headers: AUTH,
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  return { status: res.status, json: (await res.json()) as Answer };
}

const subscribe = (eventType: string, userId: string, tag?: string) =>
  call('POST', '/2/activity/subscriptions', {
    event_type: eventType,
    filter: { user_id: userId },
    ...(tag && { tag }),
  });

async function connect(query = '') {
  const conn = await collectStream(`${fake.url}/2/activity/stream${query}`, AUTH);
  return { ...conn, envelopes: () => conn.lines<Envelope>() };
}

describe('fake X Activity API subscriptions', () => {
  it('creates, lists (paged) and deletes subscriptions with X meta', async () => {
    const created = await subscribe('profile.update.bio', alice.id, 'sts');
    expect(created.status).toBe(200);
    expect(created.json.data.subscription).toMatchObject({
      event_type: 'profile.update.bio',
      filter: { user_id: alice.id },
      tag: 'sts',
    });
    expect(created.json.meta).toEqual({ total_subscriptions: 1 });
    await subscribe('post.delete', alice.id);
    const page1 = await call('GET', '/2/activity/subscriptions?max_results=1');
    expect(page1.json.data).toHaveLength(1);
    expect(page1.json.meta).toMatchObject({ total_subscriptions: 2, result_count: 1 });
    const page2 = await call(
      'GET',
      `/2/activity/subscriptions?max_results=1&pagination_token=${page1.json.meta.next_token}`,
    );
    expect(page2.json.data[0]!.event_type).toBe('post.delete');
    expect(page2.json.meta.next_token).toBeUndefined();

    const id = created.json.data.subscription.subscription_id;
    expect((await call('DELETE', `/2/activity/subscriptions/${id}`)).json).toEqual({
      data: { deleted: true },
      meta: { total_subscriptions: 1 },
    });
    expect((await call('DELETE', `/2/activity/subscriptions/${id}`)).status).toBe(404);
  });

  it('refuses bad fields, duplicates, a type the tier lacks and the subscription past the tier limit', async () => {
    const badType = await subscribe('profile.update.everything', alice.id);
    expect(badType.status).toBe(400);
    expect(badType.json.errors[0]!.parameters).toEqual({ event_type: ['profile.update.everything'] });
    expect((await subscribe('post.delete', 'alice')).json.errors[0]!.parameters).toHaveProperty(['filter.user_id']);
    expect((await subscribe('profile.update.geo', alice.id)).status).toBe(403);
    await subscribe('post.delete', alice.id);
    expect((await subscribe('post.delete', alice.id)).status).toBe(409);
    await subscribe('post.delete', bob.id);
    await subscribe('post.create', bob.id);
    const over = await subscribe('post.create', alice.id);
    expect(over.status).toBe(400);
    expect(over.json.title).toBe('SubscriptionCapExceeded');
    expect(activity.subscriptions()).toHaveLength(3);
  });
});

describe('fake X Activity API stream', () => {
  it('delivers subscribed events in X envelopes, keep-alives between, nothing unsubscribed', async () => {
    await subscribe('profile.update.bio', alice.id, 'bio');
    await subscribe('post.delete', alice.id);
    const conn = await connect();
    expect(conn.status).toBe(200);
    fake.state.update('alice', { description: 'new bio', name: 'Alice A' });
    const post = fake.state.post({ author: 'alice', text: 'hello' });
    fake.state.post({ author: 'bob', text: 'not subscribed' });
    fake.state.deletePost(post.id);
    await waitFor(() => conn.envelopes().length === 2);
    const [bio, deleted] = conn.envelopes();
    expect(bio!.data).toMatchObject({
      filter: { user_id: alice.id },
      event_type: 'profile.update.bio',
      tag: 'bio',
      payload: { before: 'old bio', after: 'new bio' },
    });
    expect(bio!.data.event_uuid).toMatch(/^-?[0-9]+$/);
    expect(deleted!.data).toMatchObject({
      event_type: 'post.delete',
      payload: { id: post.id, author_id: alice.id },
      includes: { users: [{ data: { id: alice.id, username: 'alice' } }] },
    });
    expect(fake.state.tweet(post.id)).toBeUndefined();
    await waitFor(() => /\r\n\r\n/.test(conn.text()));
    expect((await connect()).status).toBe(429);
    conn.close();
  });

  it('replays missed events after a disconnect with backfill_minutes or start_time, same event_uuid', async () => {
    await subscribe('profile.update.handle', alice.id);
    const first = await connect();
    const since = new Date().toISOString();
    fake.state.rename('alice', 'alice2');
    await waitFor(() => first.envelopes().length === 1);
    activity.disconnect();
    await waitFor(() => first.envelopes().length === 2);
    expect(first.envelopes()[1]!.errors[0]!.disconnect_type).toBe('OperationalDisconnect');
    fake.state.rename('alice2', 'alice3');

    const replay = await connect(`?start_time=${since}`);
    await waitFor(() => replay.envelopes().length === 2);
    expect(replay.envelopes().map((e) => e.data.payload.after)).toEqual(['alice2', 'alice3']);
    expect(replay.envelopes()[0]!.data.event_uuid).toBe(first.envelopes()[0]!.data.event_uuid);
    replay.close();
    await waitFor(() => activity.connections() === 0);
    const backfill = await connect('?backfill_minutes=2');
    await waitFor(() => backfill.envelopes().length === 2);
    backfill.close();
    expect((await connect('?backfill_minutes=6')).status).toBe(400);
  });
});
