/**
 * Query monitors through the use-cases on real PostgreSQL and Redis: a monitor watches a username
 * or a query (exactly one); a query is validated by parseQuery and refused with the part named
 * and nothing saved; plan limits count query monitors like others; an edit keeps the kind; the
 * preview searches the query's words and marks each post with the query's verdict.
 */
import { monitorLimitsFromEnv, planEnv, planMonitorEnv, plansFromEnv, snowflakeId } from '@sts/core';
import type { Db } from '@sts/db';
import { z } from 'zod';
import { createUseCases, PlanLimitError, ValidationError, type PreviewTweet, type UseCases } from './index';
import { openStoreBed, rejection, type StoreBed } from '../test/storeBed';

describe('query monitors (use-cases)', () => {
  let bed: StoreBed;
  let db: Db;
  let uc: UseCases;
  let account: string;
  const searches: string[] = [];
  const at = (i: number) => new Date(Date.now() - i * 60_000);
  const found: PreviewTweet[] = [
    { id: snowflakeId(at(1)), text: 'The new release is out', createdAt: at(1), lang: 'en', authorUsername: 'acme' },
    { id: snowflakeId(at(2)), text: 'launch giveaway!', createdAt: at(2), lang: 'en', authorUsername: 'spammer' },
    { id: snowflakeId(at(3)), text: 'launch heute', createdAt: at(3), lang: 'de', authorUsername: 'acme_de' },
    { id: snowflakeId(at(4)), text: 'launch day', createdAt: at(4), lang: 'en', authorUsername: 'acme' },
  ];

  beforeAll(async () => {
    bed = await openStoreBed({ poolSize: 2 });
    db = bed.db;
    const env = z.object({ ...planEnv, ...planMonitorEnv }).parse({});
    uc = createUseCases({
      db,
      plans: plansFromEnv(env),
      monitorLimits: monitorLimitsFromEnv(env),
      preview: {
        timeline: () => Promise.resolve([]),
        search: (query, limit) => {
          searches.push(query);
          return Promise.resolve(found.slice(0, limit));
        },
        cache: bed.cache,
      },
    });
    account = (await uc.admin.createAccount({ email: 'query@example.com', plan: 'starter' })).id;
  });

  afterAll(() => bed.close());

  it('creates a query monitor: the query saved trimmed, no username, no target schedule', async () => {
    const { monitor } = await uc.monitors.create(account, {
      query: '  "new release" OR launch -giveaway lang:en ',
      exclude: 'replies',
    });
    expect(monitor).toMatchObject({
      targetUsername: null,
      query: '"new release" OR launch -giveaway lang:en',
      keywords: [],
      filters: { exclude: ['replies'], lang: [] },
    });
    expect(await db.monitor.findUniqueOrThrow({ where: { id: monitor.id } })).toMatchObject({
      targetKey: null,
      query: '"new release" OR launch -giveaway lang:en',
    });
    expect(await db.pollTarget.count()).toBe(0);
    expect((await uc.monitors.list(account)).map((m) => m.query)).toContain(monitor.query);
  });

  it.each([
    ['', 'query: the query is empty'],
    ['   ', 'the query is empty'],
    ['x'.repeat(1000), 'the query is 1000 characters; at most 512'],
    ['launch has:links', 'unknown operator "has:" in "has:links"'],
    ['-giveaway', 'would match every post'],
    ['lang:en', 'would match every post'],
    ['launch OR -spam', 'would match every post'],
    ['(launch', '"(" at position 1 is never closed'],
  ])('refuses the query %j naming the part, nothing saved', async (query, message) => {
    const before = await db.monitor.count();
    const err = await rejection(uc.monitors.create(account, { query }));
    expect(err).toBeInstanceOf(ValidationError);
    expect(err.field).toBe('query');
    expect(`${String(err.field)}: ${err.message}`).toContain(message);
    expect(await db.monitor.count()).toBe(before);
  });

  it('refuses a username and a query together, neither, and keywords on a query monitor', async () => {
    const before = await db.monitor.count();
    const both = await rejection(uc.monitors.create(account, { target: 'alice', query: 'launch' }));
    expect(both).toMatchObject({ field: 'query', message: 'give a username or a query, not both' });
    expect((await rejection(uc.monitors.create(account, {}))).field).toBe('target');
    const kw = await rejection(uc.monitors.create(account, { query: 'launch', keywords: 'rocket' }));
    expect(kw.field).toBe('keywords');
    expect(await db.monitor.count()).toBe(before);
  });

  it('an edit keeps the kind: a query monitor changes its query, not into a username', async () => {
    const { monitor } = await uc.monitors.create(account, { query: 'launch' });
    const edited = await uc.monitors.update(account, monitor.id, { query: 'launch OR release' });
    expect(edited).toMatchObject({ query: 'launch OR release', targetUsername: null });
    expect((await rejection(uc.monitors.update(account, monitor.id, { target: 'alice' }))).field).toBe('target');
    expect((await rejection(uc.monitors.update(account, monitor.id, { query: 'has:media x' }))).field).toBe('query');
    const { monitor: user } = await uc.monitors.create(account, { target: 'bob' });
    expect((await rejection(uc.monitors.update(account, user.id, { query: 'launch' }))).field).toBe('query');
    expect((await uc.monitors.get(account, monitor.id)).query).toBe('launch OR release');
  });

  it('refuses profile events on a query monitor (no account, no profile), on create and on edit', async () => {
    const own = (await uc.admin.createAccount({ email: 'query-events@example.com', plan: 'starter' })).id;
    const before = await db.monitor.count();
    const created = await rejection(uc.monitors.create(own, { query: 'launch', events: 'posts,profile' }));
    expect(created).toBeInstanceOf(ValidationError);
    expect(created).toMatchObject({ field: 'events', message: expect.stringContaining('has no profile') });
    expect(await db.monitor.count()).toBe(before);
    const { monitor } = await uc.monitors.create(own, { query: 'launch', events: 'posts' });
    const edited = await rejection(uc.monitors.update(own, monitor.id, { events: ['profile'] }));
    expect(edited).toMatchObject({ field: 'events' });
    expect((await db.monitor.findUniqueOrThrow({ where: { id: monitor.id } })).events).toEqual(['posts']);
    const { monitor: user } = await uc.monitors.create(own, { target: 'carol', events: 'posts,profile' });
    expect(user.events).toEqual(['posts', 'profile']);
  });

  it('refuses deletes on a query monitor, accepts posts,deletes on a username monitor, names an unknown event', async () => {
    const own = (await uc.admin.createAccount({ email: 'query-deletes@example.com', plan: 'starter' })).id;
    const before = await db.monitor.count();
    const created = await rejection(uc.monitors.create(own, { query: 'launch', events: 'posts,deletes' }));
    expect(created).toBeInstanceOf(ValidationError);
    expect(created).toMatchObject({ field: 'events', message: expect.stringContaining('sees no deletions') });
    const unknown = await rejection(uc.monitors.create(own, { target: 'dave', events: 'posts,erasures' }));
    expect(unknown).toMatchObject({ field: 'events', message: expect.stringContaining('"erasures"') });
    expect(await db.monitor.count()).toBe(before);
    const { monitor: user } = await uc.monitors.create(own, { target: 'dave', events: 'posts,deletes' });
    expect(user.events).toEqual(['posts', 'deletes']);
  });

  it('plan limits count query monitors like username monitors', async () => {
    const free = (await uc.admin.createAccount({ email: 'query-free@example.com' })).id;
    const limit = monitorLimitsFromEnv(z.object({ ...planMonitorEnv }).parse({})).free;
    for (let i = 0; i < limit - 1; i++) await uc.monitors.create(free, { target: `user_${i}` });
    await uc.monitors.create(free, { query: 'launch' });
    const err = await rejection(uc.monitors.create(free, { query: 'release' }));
    expect(err).toBeInstanceOf(PlanLimitError);
    expect(await db.monitor.count({ where: { accountId: free } })).toBe(limit);
  });

  it('the preview searches the query words and marks each post with the query and the filters', async () => {
    const p = await uc.monitors.preview(account, { query: '"new release" OR launch -giveaway lang:en' });
    expect(searches).toEqual(['"new release" OR launch']);
    expect(p).toMatchObject({ target: null, query: '"new release" OR launch -giveaway lang:en' });
    expect(p.posts.map((x) => [x.text, x.matched, x.code])).toEqual([
      ['The new release is out', true, 'query'],
      ['launch giveaway!', false, 'no_query_match'],
      ['launch heute', false, 'no_query_match'],
      ['launch day', true, 'query'],
    ]);
    // the same search again comes from the cache
    const again = await uc.monitors.preview(account, { query: '"new release" OR launch -giveaway lang:en' });
    expect(again.cached).toBe(true);
    expect(searches).toHaveLength(1);
    const bad = await rejection(uc.monitors.preview(account, { query: 'is:reply' }));
    expect(bad.field).toBe('query');
  });
});
