/**
 * The batched account lookup on the fake X: 100 ids a call (`GET /2/users?ids=`), names not known
 * yet by `users/by`; X's partial `errors` tell suspended and missing accounts, `protected: true`
 * a protected one; every call is a `users` call of the fleet's budget (the Redis governor).
 */
import { Redis } from 'ioredis';
import { createTestRedis, startFakeX, type FakeX } from '@sts/testing';
import { SourceBusyError } from '../types';
import { createRedisGovernor } from './governor';
import { createXSource } from './source';

describe('X account lookup (profiles and health, batched)', () => {
  let fake: FakeX;
  let redis: Redis;
  let cleanup: () => Promise<void>;

  beforeEach(async () => {
    const t = createTestRedis();
    cleanup = t.cleanup;
    redis = new Redis(t.url, { keyPrefix: t.prefix });
    fake = await startFakeX();
  });

  afterEach(async () => {
    await fake.stop();
    redis.disconnect();
    await cleanup();
  });

  it('looks 130 ids up in two calls and tells active, protected, suspended and deleted accounts', async () => {
    const ids = Array.from({ length: 130 }, (_, i) => fake.state.addUser({ username: `acc${i}` }).id);
    fake.state.update('acc1', { protected: true, name: 'Private One' });
    fake.state.suspend('acc2');
    fake.state.remove('acc3');
    fake.state.update('acc4', { description: 'new bio', verified: true });
    const source = createXSource({ baseUrl: fake.url, bearerToken: 't', redis });

    const found = await source.lookupAccounts({ ids, usernames: [] });
    const calls = fake.requests.log.filter((r) => r.family === 'users');
    expect(calls.map((r) => [r.path, r.params.get('ids')!.split(',').length])).toEqual([
      ['/2/users', 100],
      ['/2/users', 30],
    ]);
    expect(calls[0]!.params.get('user.fields')).toBe('name,description,profile_image_url,verified,username,protected');
    expect(found.byId.size).toBe(130);
    expect(found.byId.get(ids[0]!)).toMatchObject({ status: 'active', user: { id: ids[0], username: 'acc0' } });
    expect(found.byId.get(ids[1]!)).toMatchObject({ status: 'protected', user: { name: 'Private One' } });
    expect(found.byId.get(ids[2]!)).toEqual({ status: 'suspended', user: null });
    expect(found.byId.get(ids[3]!)).toEqual({ status: 'not_found', user: null });
    expect(found.byId.get(ids[4]!)).toMatchObject({
      status: 'active',
      user: { description: 'new bio', verified: true, profileImageUrl: expect.stringContaining(ids[4]!) as string },
    });
    // the accounts found refresh the fleet's user cache: a poll needs no lookup of its own
    const resolved = await source.resolveUsers(['acc0', 'acc4']);
    expect(resolved.get('acc4')).toMatchObject({ status: 'ok', user: { description: 'new bio' } });
    expect(fake.requests.count({ family: 'users' })).toBe(2);
  });

  it('looks names not known yet up by username, a renamed one by id', async () => {
    const renamed = fake.state.addUser({ username: 'before' });
    fake.state.addUser({ username: 'Fresh' });
    fake.state.addUser({ username: 'gone' });
    fake.state.suspend('gone');
    fake.state.rename('before', 'after');
    const source = createXSource({ baseUrl: fake.url, bearerToken: 't', redis });

    const found = await source.lookupAccounts({ ids: [renamed.id], usernames: ['fresh', 'gone', 'nobody'] });
    expect(found.byId.get(renamed.id)).toMatchObject({ status: 'active', user: { username: 'after' } });
    expect(found.byUsername.get('fresh')).toMatchObject({ status: 'active', user: { username: 'Fresh' } });
    expect(found.byUsername.get('gone')).toEqual({ status: 'suspended', user: null });
    expect(found.byUsername.get('nobody')).toEqual({ status: 'not_found', user: null });
    expect(fake.requests.log.map((r) => r.path)).toEqual(['/2/users', '/2/users/by']);
  });

  it('mostRecent: the same call also asks each account’s newest post id and post count', async () => {
    const quiet = fake.state.addUser({ username: 'quiet' });
    const talker = fake.state.addUser({ username: 'talker' });
    fake.state.post({ author: 'talker', text: 'first', createdAt: new Date(Date.now() - 60_000) });
    const newest = fake.state.post({ author: 'talker', text: 'second' });
    const source = createXSource({ baseUrl: fake.url, bearerToken: 't', redis });
    const found = await source.lookupAccounts({ ids: [quiet.id], usernames: ['talker'], mostRecent: true });
    expect(found.byId.get(quiet.id)).toMatchObject({
      status: 'active',
      posts: { mostRecentTweetId: null, tweetCount: 0 },
    });
    expect(found.byUsername.get('talker')).toMatchObject({
      status: 'active',
      user: { id: talker.id },
      posts: { mostRecentTweetId: newest.id, tweetCount: 2 },
    });
    expect(fake.requests.log.map((r) => r.params.get('user.fields'))).toEqual([
      'name,description,profile_image_url,verified,username,protected,most_recent_tweet_id,public_metrics',
      'name,description,profile_image_url,verified,username,protected,most_recent_tweet_id,public_metrics',
    ]);
    // without it: no `posts` (the periodic look asks neither field)
    const plain = await source.lookupAccounts({ ids: [quiet.id], usernames: [] });
    expect(plain.byId.get(quiet.id)).not.toHaveProperty('posts');
  });

  it('counts every call in the fleet budget: past it the lookup is refused, X never answers 429', async () => {
    const ids = Array.from({ length: 250 }, (_, i) => fake.state.addUser({ username: `b${i}` }).id);
    const governor = createRedisGovernor(redis, { limits: { users: 2 }, lowPriorityReserve: 0 });
    const source = createXSource({ baseUrl: fake.url, bearerToken: 't', redis, governor });
    await expect(source.lookupAccounts({ ids, usernames: [] })).rejects.toBeInstanceOf(SourceBusyError);
    expect(fake.requests.count({ family: 'users', status: 200 })).toBe(2);
    expect(fake.requests.count({ status: 429 })).toBe(0);
    expect((await governor.budget('users')).remaining).toBe(0);
  });
});
