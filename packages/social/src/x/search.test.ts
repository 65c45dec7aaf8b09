/**
 * Batched search for the poller: `from:` groups of ≤ 512 characters, one search/recent request
 * serving a whole group, since_id and next_token paging, newest id, and the group's account problems.
 */
import { snowflakeBefore } from '@sts/core';
import { startFakeX, type FakeX } from '@sts/testing';
import { packFromQueries } from './pack';
import { createXSource } from './source';

describe('X batched search (searchGroup)', () => {
  let fake: FakeX;
  const names = Array.from({ length: 60 }, (_, i) => `author${String(i).padStart(2, '0')}`);

  beforeEach(async () => {
    fake = await startFakeX();
    names.forEach((username) => fake.state.addUser({ username }));
    fake.state.addUser({ username: 'outsider' });
  });
  afterEach(() => fake.stop());

  it('serves ~20+ targets per request and pages back to since_id, oldest first', async () => {
    const source = createXSource({ baseUrl: fake.url, bearerToken: 't', overlapMs: 0 });
    const groups = packFromQueries(names, 512);
    expect(groups.length).toBeLessThanOrEqual(Math.ceil(60 / 20));
    const start = Date.now() - 120_000;
    // 250 posts by the first group's authors, 20 by someone else
    const group = groups[0]!;
    for (let i = 0; i < 250; i++) {
      fake.state.post({
        author: group.usernames[i % group.usernames.length]!,
        text: `p${i}`,
        createdAt: new Date(start + i * 100),
      });
    }
    for (let i = 0; i < 20; i++)
      fake.state.post({ author: 'outsider', text: `o${i}`, createdAt: new Date(start + i * 100) });
    const notBefore = new Date(start - 1000);
    const first = await source.searchGroup(group, { sinceId: null, notBefore });
    expect(first.tweets.map((t) => t.text)).toEqual(Array.from({ length: 250 }, (_, i) => `p${i}`));
    expect(first.tweets.every((t) => group.usernames.includes(t.author.username))).toBe(true);
    expect(first.newestId).toBe(first.tweets[249]!.id);
    expect(first.truncated).toBe(false);
    expect(first.problems.size).toBe(0);
    const searches = fake.requests.log.filter((r) => r.family === 'search');
    expect(searches).toHaveLength(3); // 100 + 100 + 50
    expect(searches[0]!.params.get('query')).toBe(group.query);
    expect(searches[0]!.params.get('since_id')).toBe(snowflakeBefore(notBefore));
    expect(searches[1]!.params.get('next_token')).toBeTruthy();
    // next call: only what is new since newestId
    fake.requests.clear();
    fake.state.post({ author: group.usernames[3]!, text: 'fresh' });
    const next = await source.searchGroup(group, { sinceId: first.newestId, notBefore, firstPage: false });
    expect(next.tweets.map((t) => t.text)).toEqual(['fresh']);
    expect(fake.requests.log.filter((r) => r.family === 'search')[0]!.params.get('since_id')).toBe(first.newestId);
    // nothing new: the id stays
    const idle = await source.searchGroup(group, { sinceId: next.newestId, notBefore, firstPage: false });
    expect(idle).toMatchObject({ tweets: [], newestId: next.newestId });
  });

  it("re-reads the overlap window on a poll's first call and reports the group's unreadable accounts", async () => {
    const source = createXSource({ baseUrl: fake.url, bearerToken: 't', overlapMs: 30_000 });
    const group = packFromQueries(['author01', 'author02', 'nobody'], 512)[0]!;
    const now = Date.now();
    const seen = fake.state.post({ author: 'author01', text: 'seen', createdAt: new Date(now - 2000) });
    fake.state.post({ author: 'author02', text: 'late', createdAt: new Date(now - 10_000) }); // visible late
    fake.state.suspend('author02');
    const r = await source.searchGroup(group, { sinceId: seen.id, notBefore: new Date(now - 3600_000) });
    expect(r.tweets.map((t) => t.text)).toEqual(['seen']); // author02 is suspended: X hides them
    expect(r.newestId).toBe(seen.id);
    expect([...r.problems.entries()]).toEqual([
      ['author02', { status: 'suspended', message: '@author02 is suspended on X' }],
      ['nobody', { status: 'not_found', message: 'target user @nobody not found on X' }],
    ]);
    fake.state.suspend('author02', false);
    const again = await createXSource({ baseUrl: fake.url, bearerToken: 't', overlapMs: 30_000 }).searchGroup(group, {
      sinceId: seen.id,
      notBefore: new Date(now - 3600_000),
    });
    expect(again.tweets.map((t) => t.text)).toEqual(['late', 'seen']);
    const noWindow = await createXSource({ baseUrl: fake.url, bearerToken: 't', overlapMs: 30_000 }).searchGroup(
      group,
      {
        sinceId: seen.id,
        notBefore: new Date(now - 3600_000),
        firstPage: false,
      },
    );
    expect(noWindow.tweets).toEqual([]);
  });

  it('a query over X_QUERY_MAX_LENGTH is refused by X with its 400 (so the poller packs to it)', async () => {
    const source = createXSource({ baseUrl: fake.url, bearerToken: 't' });
    const tooLong = packFromQueries(names, 1024)[0]!;
    expect(tooLong.query.length).toBeGreaterThan(512);
    await expect(source.searchGroup(tooLong, { sinceId: null, notBefore: new Date() })).rejects.toThrow(
      /HTTP 400.*too long/,
    );
  });
});
