/** The fake X answers in X's formats and enforces its windows (what the X source's tests rely on). */
import { startFakeX, type FakeX } from './index';

interface Body {
  data?: unknown;
  includes?: { users: Array<{ username: string }> };
  meta?: { next_token?: string; result_count?: number };
  errors?: Array<Record<string, unknown>>;
  [k: string]: unknown;
}

const ids = (b: Body) => (b.data as Array<{ id: string }>).map((t) => t.id);

async function get(fake: FakeX, path: string, token = 'tok') {
  const res = await fetch(`${fake.url}${path}`, { headers: { authorization: `Bearer ${token}` } });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Body };
}

describe('fake X', () => {
  let fake: FakeX;
  beforeEach(async () => {
    fake = await startFakeX({ limits: { users: 3, search: 4 }, windowMs: 60_000, bearerToken: 'tok' });
    fake.state.addUser({ username: 'alice', id: '11' });
    fake.state.addUser({ username: 'bob', id: '12' });
    fake.state.addUser({ username: 'carol', id: '13' });
  });
  afterEach(() => fake.stop());

  it('looks up usernames in one call with partial errors for missing and suspended accounts', async () => {
    fake.state.suspend('carol');
    const r = await get(fake, '/2/users/by?usernames=Alice,ghost,carol&user.fields=created_at');
    expect(r.status).toBe(200);
    expect(r.body.data).toEqual([{ id: '11', name: 'alice', username: 'alice', created_at: expect.any(String) }]);
    expect(r.body.errors).toEqual([
      expect.objectContaining({ value: 'ghost', title: 'Not Found Error', parameter: 'usernames' }),
      expect.objectContaining({ value: 'carol', title: 'Forbidden', detail: 'User has been suspended: [carol].' }),
    ]);
    expect(r.headers.get('x-rate-limit-limit')).toBe('3');
    expect(r.headers.get('x-rate-limit-remaining')).toBe('2');
    const tooMany = Array.from({ length: 101 }, (_, i) => `u${i}`).join(',');
    const bad = await get(fake, `/2/users/by?usernames=${tooMany}`);
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ title: 'Invalid Request', errors: [{ parameters: { usernames: [tooMany] } }] });
    fake.state.rename('alice', 'alice2');
    const renamed = await get(fake, '/2/users/by/username/alice');
    expect(renamed.body.errors![0]).toMatchObject({ title: 'Not Found Error', value: 'alice' });
  });

  it('user lookups answer most_recent_tweet_id when asked (absent without posts), and its expansion', async () => {
    fake.state.post({ author: 'alice', text: 'older', createdAt: new Date(Date.now() - 60_000) });
    const newest = fake.state.post({ author: 'alice', text: 'newest' });
    // a post made with an older time does not become the most recent
    fake.state.post({ author: 'alice', text: 'late', createdAt: new Date(Date.now() - 30_000) });
    const r = await get(fake, '/2/users/by?usernames=alice,bob&user.fields=most_recent_tweet_id');
    expect(r.body.data).toEqual([
      { id: '11', name: 'alice', username: 'alice', most_recent_tweet_id: newest.id },
      { id: '12', name: 'bob', username: 'bob' },
    ]);
    expect(r.body.includes).toBeUndefined();
    const byId = await get(fake, '/2/users?ids=11,12&expansions=most_recent_tweet_id&tweet.fields=created_at');
    expect(byId.body.data).toEqual([
      { id: '11', name: 'alice', username: 'alice' },
      { id: '12', name: 'bob', username: 'bob' },
    ]);
    expect(byId.body.includes).toEqual({
      tweets: [{ id: newest.id, text: 'newest', edit_history_tweet_ids: [newest.id], created_at: newest.created_at }],
    });
    const one = await get(fake, '/2/users/by/username/alice?user.fields=most_recent_tweet_id');
    expect(one.body.data).toEqual({ id: '11', name: 'alice', username: 'alice', most_recent_tweet_id: newest.id });
  });

  it('answers 429 with reset headers past the window, per family, and counts requests', async () => {
    for (let i = 0; i < 3; i++) expect((await get(fake, '/2/users/by/username/bob')).status).toBe(200);
    const r = await get(fake, '/2/users/by/username/bob');
    expect(r.status).toBe(429);
    expect(r.body).toEqual({
      title: 'Too Many Requests',
      detail: 'Too Many Requests',
      type: 'about:blank',
      status: 429,
    });
    expect(r.headers.get('x-rate-limit-remaining')).toBe('0');
    const reset = Number(r.headers.get('x-rate-limit-reset'));
    expect(reset * 1000).toBeGreaterThan(Date.now());
    expect(reset * 1000).toBeLessThanOrEqual(Date.now() + 61_000);
    expect((await get(fake, '/2/users/12/tweets')).status).toBe(200); // another family
    expect(fake.requests.count({ family: 'users', status: 429 })).toBe(1);
    expect(fake.requests.byFamily()).toEqual({ users: { 200: 3, 429: 1 }, timeline: { 200: 1 } });
    expect((await get(fake, '/2/users/12/tweets', 'wrong')).status).toBe(401);
    // a plan change: the limit moves, the current window included, and the headers say so
    fake.limits.setLimit('users', 5);
    const raised = await get(fake, '/2/users/by/username/bob');
    expect(raised.status).toBe(200);
    expect(raised.headers.get('x-rate-limit-limit')).toBe('5');
    expect(raised.headers.get('x-rate-limit-remaining')).toBe('1');
  });

  it("a user timeline pages back to since_id with the timeline family's headers; a missing account is a partial error", async () => {
    const posts = Array.from({ length: 7 }, (_, i) =>
      fake.state.post({ author: 'alice', text: `t${i}`, createdAt: new Date(Date.now() - (10 - i) * 1000) }),
    );
    const first = await get(fake, `/2/users/11/tweets?max_results=5&since_id=${posts[0]!.id}&expansions=author_id`);
    expect(first.status).toBe(200);
    expect(ids(first.body)).toEqual(
      posts
        .slice(2)
        .map((t) => t.id)
        .reverse(),
    );
    expect(first.body.includes!.users.map((u) => u.username)).toEqual(['alice']);
    expect(first.body.meta).toMatchObject({ result_count: 5, newest_id: posts[6]!.id, oldest_id: posts[2]!.id });
    expect(first.headers.get('x-rate-limit-limit')).toBe('1500');
    expect(first.headers.get('x-rate-limit-remaining')).toBe('1499');
    const next = await get(
      fake,
      `/2/users/11/tweets?max_results=5&since_id=${posts[0]!.id}&pagination_token=${first.body.meta!.next_token!}`,
    );
    expect(ids(next.body)).toEqual([posts[1]!.id]);
    expect(next.body.meta!.next_token).toBeUndefined();
    const ghost = await get(fake, '/2/users/99/tweets');
    expect(ghost.body.errors![0]).toMatchObject({ title: 'Not Found Error', resource_type: 'user', value: '99' });
  });

  it('looks posts up by ids (up to 100) with one partial error per missing id, on the tweets family', async () => {
    const a = fake.state.post({ author: 'alice', text: 'one' });
    const b = fake.state.post({ author: 'bob', text: 'two' });
    const r = await get(fake, `/2/tweets?ids=${a.id},404,${b.id}&expansions=author_id&tweet.fields=author_id`);
    expect(r.status).toBe(200);
    expect(r.body.data).toEqual([
      { id: a.id, text: 'one', edit_history_tweet_ids: [a.id], author_id: '11' },
      { id: b.id, text: 'two', edit_history_tweet_ids: [b.id], author_id: '12' },
    ]);
    expect(r.body.includes!.users.map((u) => u.username).sort()).toEqual(['alice', 'bob']);
    expect(r.body.errors).toEqual([
      {
        value: '404',
        detail: 'Could not find tweet with ids: [404].',
        title: 'Not Found Error',
        resource_type: 'tweet',
        parameter: 'ids',
        resource_id: '404',
        type: 'https://api.twitter.com/2/problems/resource-not-found',
      },
    ]);
    expect(r.headers.get('x-rate-limit-limit')).toBe('450');
    expect(fake.requests.count({ family: 'tweets' })).toBe(1);
    const none = await get(fake, '/2/tweets?ids=404');
    expect(none.body).toEqual({ errors: [expect.objectContaining({ value: '404', parameter: 'ids' })] });
    const tooMany = Array.from({ length: 101 }, (_, i) => String(i + 1)).join(',');
    const bad = await get(fake, `/2/tweets?ids=${tooMany}`);
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ title: 'Invalid Request', errors: [{ parameters: { ids: [tooMany] } }] });
    expect((await get(fake, '/2/tweets?ids=')).status).toBe(400);
    expect((await get(fake, '/2/tweets?ids=12x')).status).toBe(400);
    expect(fake.requests.count({ family: 'tweets' })).toBe(2);
  });

  it('searches from: groups with since_id and next_token paging, and refuses queries over 512 characters', async () => {
    const base = Date.now() - 60_000;
    for (let i = 0; i < 24; i++) {
      fake.state.post({
        author: ['alice', 'bob', 'carol'][i % 3]!,
        text: `post ${i}`,
        createdAt: new Date(base + i * 1000),
      });
    }
    const wanted = fake.state.newestFirst((t) => t.author_id !== '13').map((t) => t.id);
    expect(wanted).toHaveLength(16);
    const q = encodeURIComponent('from:alice OR from:BOB');
    const path = `/2/tweets/search/recent?query=${q}&max_results=10&expansions=author_id&tweet.fields=author_id`;
    const first = await get(fake, path);
    expect(ids(first.body)).toEqual(wanted.slice(0, 10));
    expect(first.body.includes!.users.map((u) => u.username).sort()).toEqual(['alice', 'bob']);
    expect(first.body.meta).toMatchObject({ result_count: 10, newest_id: wanted[0], oldest_id: wanted[9] });
    const second = await get(fake, `${path}&next_token=${first.body.meta!.next_token}`);
    expect(ids(second.body)).toEqual(wanted.slice(10));
    expect(second.body.meta!.next_token).toBeUndefined();
    const forged = await get(fake, `${path}&next_token=bogus`);
    expect(forged.status).toBe(400);
    expect(forged.body.errors![0]!.parameters).toEqual({ next_token: ['bogus'] });
    const since = await get(fake, `${path}&since_id=${wanted[3]}`);
    expect(ids(since.body)).toEqual(wanted.slice(0, 3));
    expect((await get(fake, path)).status).toBe(429); // the search window of 4 is spent (the refused token counted)
    const long = `from:${'a'.repeat(15)} OR `.repeat(30);
    const tooLong = await get(fake, `/2/tweets/search/recent?query=${encodeURIComponent(long)}`);
    expect(tooLong.status).toBe(400);
    expect(tooLong.body).toMatchObject({
      title: 'Invalid Request',
      type: 'https://api.twitter.com/2/problems/invalid-request',
    });
    expect(tooLong.body.errors![0]!.message).toMatch(/too long/);
  });
});
