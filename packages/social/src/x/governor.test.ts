/**
 * The fleet's rate-limit governor on the shared Redis against the fake X's windows: two source
 * instances (two replicas, two connections) never exceed the budget, a 429 stops the family until
 * its reset, low priority leaves a reserve, and X's headers correct an assumed limit.
 */
import { Redis } from 'ioredis';
import { createTestRedis, startFakeX, type FakeX } from '@sts/testing';
import { SourceBusyError } from '../types';
import { createRedisGovernor, type XFamily } from './governor';
import { createXSource } from './source';

describe('X rate-limit governor (Redis)', () => {
  let fake: FakeX;
  const conns: Redis[] = [];
  let t: ReturnType<typeof createTestRedis>;

  beforeEach(() => {
    t = createTestRedis();
  });

  afterEach(async () => {
    await fake.stop();
    conns.splice(0).forEach((c) => c.disconnect());
    await t.cleanup();
  });

  function replica(limits: Partial<Record<XFamily, number>> = {}, reserve = 0.2) {
    const redis = new Redis(t.url, { keyPrefix: t.prefix });
    conns.push(redis);
    const governor = createRedisGovernor(redis, { limits, lowPriorityReserve: reserve, windowMs: 60_000 });
    return { governor, source: createXSource({ baseUrl: fake.url, bearerToken: 't', redis, governor }) };
  }

  it('two replicas firing at once never send a request X would refuse', async () => {
    fake = await startFakeX({ limits: { timeline: 10 }, windowMs: 60_000 });
    fake.state.addUser({ username: 'alice' });
    const a = replica({ timeline: 10 });
    const b = replica({ timeline: 10 });
    await a.source.resolveUsers(['alice']);
    const reads = [a, b].flatMap((r) =>
      Array.from({ length: 15 }, () => r.source.getUserTimeline('alice', { limit: 5 })),
    );
    const results = await Promise.allSettled(reads);
    expect(fake.requests.count({ family: 'timeline', status: 200 })).toBe(10);
    expect(fake.requests.count({ family: 'timeline', status: 429 })).toBe(0);
    const refused = results.filter((r) => r.status === 'rejected').map((r) => r.reason as SourceBusyError);
    expect(refused).toHaveLength(20);
    for (const e of refused) {
      expect(e).toBeInstanceOf(SourceBusyError);
      expect(e.retryAfterMs).toBeGreaterThan(0);
      expect(e.retryAfterMs).toBeLessThanOrEqual(61_000);
    }
    expect(await a.governor.budget('timeline')).toMatchObject({ limit: 10, remaining: 0 });
  });

  it("learns the real limit from X's headers when the assumed one is higher", async () => {
    fake = await startFakeX({ limits: { tweets: 4 }, windowMs: 60_000 });
    fake.state.addUser({ username: 'alice' });
    const id = fake.state.post({ author: 'alice', text: 'x' }).id;
    const a = replica(); // assumes Pro: 450 tweet lookups
    const b = replica();
    for (let i = 0; i < 8; i++) await [a, b][i % 2]!.source.getTweet(id).catch(() => undefined);
    expect(fake.requests.count({ family: 'tweets', status: 200 })).toBe(4);
    expect(fake.requests.count({ family: 'tweets', status: 429 })).toBe(0);
    expect((await b.governor.budget('tweets')).limit).toBe(4);
  });

  it('a 429 anyway (another app on the token) stops the family until its reset, not the others', async () => {
    fake = await startFakeX({ windowMs: 2000 });
    fake.state.addUser({ username: 'alice' });
    const a = replica();
    const b = replica();
    await a.source.search('hello', { limit: 5 });
    fake.limits.spend('search'); // someone else spent the window
    await expect(a.source.search('hello', { limit: 5 })).rejects.toBeInstanceOf(SourceBusyError);
    expect(fake.requests.count({ family: 'search', status: 429 })).toBe(1);
    // the other replica does not even send it
    const refused = (await b.source.search('hello', { limit: 5 }).catch((e: unknown) => e)) as SourceBusyError;
    expect(refused).toBeInstanceOf(SourceBusyError);
    expect(refused.retryAfterMs).toBeGreaterThan(0);
    expect(fake.requests.count({ family: 'search' })).toBe(2);
    // another family is not stopped
    expect(await b.source.getUser('alice')).not.toBeNull();
    // after the reset (epoch seconds, so up to 1 s later) the family works again
    await new Promise((r) => setTimeout(r, refused.retryAfterMs + 50));
    expect((await b.source.search('hello', { limit: 5 })).items).toEqual([]);
    expect(fake.requests.count({ family: 'search', status: 429 })).toBe(1);
  });

  it('low-priority calls leave a reserve of the window to high-priority ones', async () => {
    fake = await startFakeX({ limits: { timeline: 10 }, windowMs: 60_000 });
    const a = replica({ timeline: 10 }, 0.3);
    let low = 0;
    while ((await a.governor.tryAcquire('timeline', 'low')).ok) low++;
    expect(low).toBe(7);
    const refusedLow = await a.governor.tryAcquire('timeline', 'low');
    expect(refusedLow.ok).toBe(false);
    let high = 0;
    while ((await a.governor.tryAcquire('timeline', 'high')).ok) high++;
    expect(high).toBe(3);
  });

  it("reads fetch's Headers too (the stream's calls) and a 429 blocks the family for every replica", async () => {
    fake = await startFakeX();
    const a = replica();
    const b = replica();
    const reset = Math.ceil((Date.now() + 30_000) / 1000);
    const headers = (remaining: number) =>
      new Headers({
        'x-rate-limit-limit': '50',
        'x-rate-limit-remaining': String(remaining),
        'x-rate-limit-reset': String(reset),
      });
    await a.governor.observe('stream_connect', { status: 200, headers: headers(7) });
    expect(await b.governor.budget('stream_connect')).toMatchObject({ limit: 50, remaining: 7, resetAt: reset * 1000 });
    await a.governor.observe('stream_connect', { status: 429, headers: headers(0) });
    const refused = await b.governor.tryAcquire('stream_connect');
    expect(refused.ok).toBe(false);
    expect(refused.ok === false && refused.retryAfterMs).toBeGreaterThan(25_000);
    expect((await b.governor.tryAcquire('rules')).ok).toBe(true);
  });
});
