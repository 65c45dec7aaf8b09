/**
 * Batched user resolution on the fake X and the shared Redis: one users/by call for up to 100
 * names, the cache shared by two source instances (two replicas), renamed and suspended accounts
 * reported with a message the poller records as `last_error`.
 */
import { Redis } from 'ioredis';
import { createTestRedis, startFakeX, type FakeX } from '@sts/testing';
import { SourceUserError } from '../types';
import { createXSource } from './source';

describe('X user resolution (batched, cached in Redis)', () => {
  let fake: FakeX;
  let redisA: Redis;
  let redisB: Redis;
  let cleanup: () => Promise<void>;
  const names = Array.from({ length: 150 }, (_, i) => `acct${i}`);

  beforeEach(async () => {
    const t = createTestRedis();
    cleanup = t.cleanup;
    redisA = new Redis(t.url, { keyPrefix: t.prefix });
    redisB = new Redis(t.url, { keyPrefix: t.prefix });
    fake = await startFakeX();
    names.forEach((username) => fake.state.addUser({ username }));
  });

  afterEach(async () => {
    await fake.stop();
    redisA.disconnect();
    redisB.disconnect();
    await cleanup();
  });

  const source = (redis: Redis, ttl = 3600) =>
    createXSource({ baseUrl: fake.url, bearerToken: 't', redis, userCacheTtlSeconds: ttl });

  it('resolves up to 100 names per call and shares the cache between replicas', async () => {
    const a = source(redisA);
    const first = await a.resolveUsers(names.slice(0, 100));
    expect(fake.requests.count({ family: 'users' })).toBe(1);
    expect(fake.requests.log[0]!.params.get('usernames')!.split(',')).toHaveLength(100);
    expect([...first.values()].every((r) => r.status === 'ok')).toBe(true);
    expect(first.get('acct7')).toMatchObject({
      status: 'ok',
      user: { id: fake.state.user('acct7')!.id, username: 'acct7' },
    });
    // 150 names, 100 cached: one call for the other 50
    const all = await a.resolveUsers(names.map((n) => n.toUpperCase()));
    expect(all.size).toBe(150);
    expect(fake.requests.count({ family: 'users' })).toBe(2);
    expect(fake.requests.log[1]!.params.get('usernames')!.split(',')).toHaveLength(50);
    // another replica: everything from Redis, no call
    const b = source(redisB);
    const again = await b.resolveUsers(names);
    expect(fake.requests.count({ family: 'users' })).toBe(2);
    expect(again.get('acct149')).toEqual(all.get('acct149'));
    // a timeline read on the other replica needs no lookup
    fake.state.post({ author: 'acct3', text: 'hello' });
    const page = await b.getUserTimeline('acct3', { limit: 5 });
    expect(page!.items.map((t) => t.text)).toEqual(['hello']);
    expect(fake.requests.count({ family: 'users' })).toBe(2);
    expect(fake.requests.count({ family: 'timeline' })).toBe(1);
  });

  it('concurrent resolutions (concurrent polls) share one users/by call', async () => {
    const a = source(redisA);
    const each = await Promise.all(names.slice(0, 40).map((n) => a.resolveUsers([n])));
    expect(each.every((m) => m.size === 1 && [...m.values()][0]!.status === 'ok')).toBe(true);
    expect(fake.requests.count({ family: 'users' })).toBe(1);
    expect(fake.requests.log[0]!.params.get('usernames')!.split(',')).toHaveLength(40);
    // a poll of each: one timeline call per target, no lookup
    fake.requests.clear();
    const poll = { position: null, notBefore: new Date(0), limit: 10, firstPage: true };
    await Promise.all(names.slice(0, 10).map((n) => a.pollTweets(n, poll)));
    expect(fake.requests.byFamily()).toEqual({ timeline: { 200: 10 } });
  });

  it('reports renamed, suspended and unknown accounts; the poll of such a target fails with that message', async () => {
    const a = source(redisA, 1);
    await a.resolveUsers(['acct1', 'acct2']);
    fake.state.rename('acct1', 'newname1');
    fake.state.suspend('acct2');
    await new Promise((r) => setTimeout(r, 1100)); // the TTL of 1 s lapses
    const b = source(redisB, 1);
    const r = await b.resolveUsers(['acct1', 'acct2', 'ghost']);
    expect(r.get('acct1')).toEqual({
      status: 'renamed',
      id: fake.state.user('newname1')!.id,
      newUsername: 'newname1',
      message: `@acct1 was renamed on X: account ${fake.state.user('newname1')!.id} is now @newname1`,
    });
    expect(r.get('acct2')).toEqual({ status: 'suspended', message: '@acct2 is suspended on X' });
    expect(r.get('ghost')).toEqual({ status: 'not_found', message: 'target user @ghost not found on X' });
    const poll = { position: null, notBefore: new Date(0), limit: 10, firstPage: true };
    await expect(b.pollTweets('acct1', poll)).rejects.toMatchObject({
      name: 'SourceUserError',
      reason: 'renamed',
      newUsername: 'newname1',
      message: expect.stringContaining('is now @newname1'),
    });
    await expect(b.pollTweets('acct2', poll)).rejects.toBeInstanceOf(SourceUserError);
    expect(await b.pollTweets('ghost', poll)).toBeNull();
  });

  it('a suspension seen by a timeline read before the cache lapses is reported and forgotten', async () => {
    const a = source(redisA);
    const poll = { position: null, notBefore: new Date(0), limit: 10, firstPage: true };
    fake.state.post({ author: 'acct5', text: 'one' });
    expect((await a.pollTweets('acct5', poll))!.tweets).toHaveLength(1);
    fake.state.suspend('acct5');
    await expect(a.pollTweets('acct5', poll)).rejects.toMatchObject({ name: 'SourceUserError', reason: 'suspended' });
    // forgotten: the next resolution asks X again and says suspended
    const r = await source(redisB).resolveUsers(['acct5']);
    expect(r.get('acct5')!.status).toBe('suspended');
  });

  it("a group search without lookups refreshes the cache from its posts' authors (includes.users)", async () => {
    const a = source(redisA);
    fake.state.post({ author: 'acct1', text: 'one' });
    fake.state.post({ author: 'acct2', text: 'two' });
    const r = await a.searchGroup(
      { query: '(from:acct1 OR from:acct2 OR from:acct3)', usernames: ['acct1', 'acct2', 'acct3'] },
      { sinceId: null, notBefore: new Date(Date.now() - 60_000), resolveUsers: false },
    );
    expect(r.tweets).toHaveLength(2);
    expect(r.problems.size).toBe(0);
    expect(fake.requests.count({ family: 'users' })).toBe(0);
    // another replica finds the two authors cached; only the quiet account is looked up
    const resolved = await source(redisB).resolveUsers(['acct1', 'acct2', 'acct3']);
    expect(resolved.get('acct2')).toMatchObject({ status: 'ok', user: { id: fake.state.user('acct2')!.id } });
    expect(fake.requests.count({ family: 'users' })).toBe(1);
    expect(fake.requests.log.at(-1)!.params.get('usernames')).toBe('acct3');
  });
});
