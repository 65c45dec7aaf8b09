/**
 * Monitor rules through the use-cases: filters saved and shown, bad ones refused with
 * the field named and nothing saved; the preview marks each of the last 50 posts with its reason,
 * reads upstream once per target (then from Redis), and costs no API quota.
 */
import { planEnv, planMonitorEnv, plansFromEnv, monitorLimitsFromEnv, snowflakeId } from '@sts/core';
import type { Db } from '@sts/db';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import {
  createUseCases,
  NotConfiguredError,
  previewLimiter,
  RateLimitedError,
  UnavailableError,
  UnverifiedError,
  ValidationError,
  type PreviewTweet,
  type UseCases,
} from './index';
import { openStoreBed, rejection, type StoreBed } from '../test/storeBed';

describe('monitor rules and preview (use-cases)', () => {
  let bed: StoreBed;
  let db: Db;
  let redis: Redis;
  let uc: UseCases;
  let account: string;
  const reads: string[] = [];
  const now = Date.now();
  const at = (i: number) => new Date(now - i * 60_000);
  // newest first, as a timeline is read; 60 posts so that only the last 50 are previewed
  const timeline: PreviewTweet[] = [
    { id: snowflakeId(at(1)), text: 'Launch today!', createdAt: at(1), lang: 'en' },
    {
      id: snowflakeId(at(2)),
      text: 'launch reply',
      createdAt: at(2),
      lang: 'en',
      referencedTweets: [{ type: 'replied_to', id: '1' }],
    },
    {
      id: snowflakeId(at(3)),
      text: 'RT launch',
      createdAt: at(3),
      lang: 'en',
      referencedTweets: [{ type: 'retweeted', id: '2' }],
    },
    { id: snowflakeId(at(4)), text: 'launch heute', createdAt: at(4), lang: 'de' },
    { id: snowflakeId(at(5)), text: 'launch spam', createdAt: at(5), lang: 'en' },
    { id: snowflakeId(at(6)), text: 'nothing to see', createdAt: at(6), lang: 'en' },
    { id: snowflakeId(at(7)), text: 'launch, no lang', createdAt: at(7), lang: null },
    ...Array.from({ length: 53 }, (_, i) => ({
      id: snowflakeId(at(10 + i)),
      text: `old post ${i}`,
      createdAt: at(10 + i),
      lang: 'en',
    })),
  ];

  beforeAll(async () => {
    bed = await openStoreBed({ poolSize: 2 });
    ({ db, redis } = bed);
    const env = z.object({ ...planEnv, ...planMonitorEnv }).parse({});
    uc = createUseCases({
      db,
      plans: plansFromEnv(env),
      monitorLimits: monitorLimitsFromEnv(env),
      preview: {
        timeline: (username, limit) => {
          reads.push(username);
          return Promise.resolve(username.toLowerCase() === 'ghost' ? null : timeline.slice(0, limit));
        },
        cache: bed.cache,
        cacheSeconds: 30,
      },
    });
    account = (await uc.admin.createAccount({ email: 'rules@example.com', plan: 'starter' })).id;
  });

  afterAll(() => bed.close());

  it('saves and shows the filters; update changes only what is given; bad ones name the field', async () => {
    const { monitor } = await uc.monitors.create(account, {
      target: 'alice',
      keywords: 'launch, -spam, -"big sale"',
      exclude: 'replies,reposts',
      lang: 'en,DE',
    });
    expect(monitor.keywords).toEqual(['launch', '-spam', '-"big sale"']);
    expect(monitor.filters).toEqual({ exclude: ['replies', 'reposts'], lang: ['en', 'de'] });
    const row = await db.monitor.findUniqueOrThrow({ where: { id: monitor.id } });
    expect(row).toMatchObject({ excludeTypes: ['replies', 'reposts'], langs: ['en', 'de'] });

    const edited = await uc.monitors.update(account, monitor.id, { exclude: 'quotes' });
    expect(edited.filters).toEqual({ exclude: ['quotes'], lang: ['en', 'de'] });
    expect((await uc.monitors.update(account, monitor.id, { lang: '' })).filters).toEqual({
      exclude: ['quotes'],
      lang: [],
    });

    const badType = await rejection(uc.monitors.update(account, monitor.id, { exclude: 'likes' }));
    expect(badType).toBeInstanceOf(ValidationError);
    expect(badType.field).toBe('exclude');
    const badLang = await rejection(uc.monitors.create(account, { target: 'bob', lang: 'english' }));
    expect(badLang.field).toBe('lang');
    expect(await db.monitor.count({ where: { targetUsername: 'bob' } })).toBe(0);
    expect((await uc.monitors.get(account, monitor.id)).filters.exclude).toEqual(['quotes']);
  });

  it('preview: each of the last 50 posts marked with its reason', async () => {
    reads.length = 0;
    const p = await uc.monitors.preview(account, {
      target: '@Carol',
      keywords: 'launch, -spam',
      exclude: 'reposts',
      lang: 'en',
    });
    expect(p.target).toBe('Carol');
    expect(p.posts).toHaveLength(50);
    expect(p.posts.map((x) => x.id)).toEqual(timeline.slice(0, 50).map((t) => t.id));
    const byText = Object.fromEntries(p.posts.map((x) => [x.text, { matched: x.matched, reason: x.reason }]));
    expect(byText['Launch today!']).toEqual({ matched: true, reason: 'matched keyword "launch"' });
    expect(byText['launch reply']).toEqual({ matched: true, reason: 'matched keyword "launch"' });
    expect(byText['RT launch']).toEqual({ matched: false, reason: 'excluded: a repost' });
    expect(byText['launch heute']).toEqual({ matched: false, reason: 'language de is not in en' });
    expect(byText['launch spam']).toEqual({ matched: false, reason: 'excluded keyword "spam"' });
    expect(byText['nothing to see']).toEqual({ matched: false, reason: 'no keyword matched' });
    expect(byText['launch, no lang']).toEqual({ matched: false, reason: 'the post has no language' });
    expect(p.cached).toBe(false);
    expect(reads).toEqual(['Carol']);
  });

  it('preview reads upstream once per target, then from the cache; no API usage is counted', async () => {
    reads.length = 0;
    const a = await uc.monitors.preview(account, { target: 'dave', keywords: 'launch' });
    const b = await uc.monitors.preview(account, { target: 'DAVE', keywords: 'spam' });
    expect(reads).toEqual(['dave']);
    expect([a.cached, b.cached]).toEqual([false, true]);
    expect(b.posts.filter((x) => x.matched).map((x) => x.text)).toEqual(['launch spam']);
    expect(b.posts[1]!.createdAt).toEqual(timeline[1]!.createdAt);
    expect(b.posts[1]!.referencedTweets).toEqual([{ type: 'replied_to', id: '1' }]);
    expect(await redis.ttl('preview:timeline:dave')).toBeGreaterThan(0);
    expect(await redis.ttl('preview:timeline:dave')).toBeLessThanOrEqual(30);
    expect(await db.usageDaily.count()).toBe(0);
  });

  it('preview refuses bad input and an unknown target with the field named', async () => {
    expect((await rejection(uc.monitors.preview(account, { target: 'bad name' }))).field).toBe('target');
    expect((await rejection(uc.monitors.preview(account, { target: 'x', exclude: 'likes' }))).field).toBe('exclude');
    const ghost = await rejection(uc.monitors.preview(account, { target: 'ghost' }));
    expect(ghost).toBeInstanceOf(ValidationError);
    expect(ghost.message).toMatch(/@ghost does not exist/);
    const bare = createUseCases({
      db,
      plans: plansFromEnv(z.object(planEnv).parse({})),
      monitorLimits: { free: 1, starter: 1 },
    });
    expect(await rejection(bare.monitors.preview(account, { target: 'x' }))).toBeInstanceOf(NotConfiguredError);
  });

  describe('the shared X budget (self-service previews)', () => {
    let guarded: UseCases;
    const asked: string[] = [];
    const logged: string[] = [];

    beforeAll(() => {
      const env = z.object({ ...planEnv, ...planMonitorEnv }).parse({});
      guarded = createUseCases({
        db,
        plans: plansFromEnv(env),
        monitorLimits: monitorLimitsFromEnv(env),
        requireVerifiedEmail: true,
        preview: {
          timeline: (username, limit, priority) => {
            asked.push(`${username}:${priority}`);
            if (username === 'broken')
              return Promise.reject(new Error('X 503 from https://api.x.com/2/users/by?usernames=broken token=abc'));
            return Promise.resolve(username.startsWith('ghost') ? null : timeline.slice(0, limit));
          },
          cache: bed.cache,
          limit: previewLimiter(redis, 3, 200),
          onUpstreamError: (err) => logged.push(err instanceof Error ? err.message : String(err)),
        },
      });
    });

    it('needs a verified address', async () => {
      asked.length = 0;
      const unverified = (await guarded.admin.createAccount({ email: 'unverified-preview@example.com' })).id;
      await db.account.update({ where: { id: unverified }, data: { emailVerifiedAt: null } });
      expect(await rejection(guarded.monitors.preview(unverified, { target: 'erin' }))).toBeInstanceOf(UnverifiedError);
      expect(asked).toEqual([]);
    });

    it('bounds the upstream reads per account, reads at low priority, and remembers unknown targets', async () => {
      asked.length = 0;
      const id = (await guarded.admin.createAccount({ email: 'budget-preview@example.com' })).id;
      await guarded.monitors.preview(id, { target: 'frank' });
      // an unknown target, asked again: one read, remembered
      for (let i = 0; i < 3; i++)
        expect(await rejection(guarded.monitors.preview(id, { target: 'ghost29' }))).toBeInstanceOf(ValidationError);
      await guarded.monitors.preview(id, { target: 'grace' });
      expect(asked).toEqual(['frank:low', 'ghost29:low', 'grace:low']);
      // the 4th upstream read of the minute is refused, nothing read; cached targets still answer
      const limited = await rejection(guarded.monitors.preview(id, { target: 'heidi' }));
      expect(limited).toBeInstanceOf(RateLimitedError);
      expect(limited.retryAfterSec).toBeGreaterThan(0);
      expect((await guarded.monitors.preview(id, { target: 'FRANK', keywords: 'launch' })).cached).toBe(true);
      expect(asked).toHaveLength(3);
      // another account has its own bound
      const other = (await guarded.admin.createAccount({ email: 'budget-preview-2@example.com' })).id;
      await guarded.monitors.preview(other, { target: 'heidi' });
      expect(asked.at(-1)).toBe('heidi:low');
    });

    it('answers an upstream failure with a generic message; the detail goes to the log', async () => {
      const id = (await guarded.admin.createAccount({ email: 'broken-preview@example.com' })).id;
      const err = await rejection(guarded.monitors.preview(id, { target: 'broken' }));
      expect(err).toBeInstanceOf(UnavailableError);
      expect(err.message).toBe("could not read @broken's posts right now; try again in a minute");
      expect(logged.at(-1)).toContain('token=abc');
    });
  });
});
