/**
 * client.stream() against the running system (gateway and read-api processes on PostgreSQL, Redis
 * and RabbitMQ): hits stored and published the way the poller's outbox relay does arrive as typed
 * events; when the connection is cut (a TCP proxy in front of the gateway) the iterator reconnects
 * with Last-Event-ID and nothing is lost or repeated; it ends on abort; terminal refusals throw
 * ApiErrors typed by the API's code.
 */
import { randomUUID } from 'node:crypto';
import {
  createHit,
  rawChannel,
  startApiStack,
  TcpProxy,
  waitFor,
  type ApiStack,
  type HitFixture,
  type MonitorFixture,
} from '@sts/testing';
import { createClient, isApiError, type HitStreamEvent } from './index';

let stack: ApiStack;
let publishRaw: Awaited<ReturnType<typeof rawChannel>>;

beforeAll(async () => {
  stack = await startApiStack();
  publishRaw = await rawChannel(stack.amqpUrl);
}, 90_000);

afterAll(async () => {
  await publishRaw?.close();
  await stack?.stop();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let lastAt = 0;

/** a hit stored, then published on monitor.events (the order of the poller's outbox relay) */
async function newHit(monitor: MonitorFixture, text: string): Promise<HitFixture> {
  lastAt = Math.max(Date.now(), lastAt + 1); // the stream's order is the detection time's
  const hit = await createHit(stack.db, monitor, text, new Date(lastAt));
  publishRaw.ch.publish('monitor.events', 'monitor.hit', Buffer.from(JSON.stringify(hit.payload)), {
    messageId: randomUUID(),
    contentType: 'application/json',
    headers: { 'x-account-id': monitor.accountId, 'x-hit-id': hit.id },
  });
  return hit;
}

async function monitorOf(accountId: string): Promise<MonitorFixture> {
  const m = await stack.db.monitor.create({
    data: { accountId, targetUsername: 'nasa', targetKey: 'nasa', keywords: [] },
  });
  return { id: m.id, accountId, targetUsername: 'nasa', keywords: [], secret: null };
}

async function starterWithMonitor() {
  const { accountId, key } = await stack.account('starter');
  return { accountId, key, monitor: await monitorOf(accountId) };
}

const texts = (events: HitStreamEvent[]) => events.map((e) => e.data.tweet.text).filter((t) => t !== 'warm-up');

/** iterates in the background, collecting events; `done` settles when the loop ends */
function collect(iterable: AsyncIterable<HitStreamEvent>) {
  const events: HitStreamEvent[] = [];
  const done = (async () => {
    for await (const ev of iterable) events.push(ev);
  })();
  done.catch(() => undefined);
  return { events, done };
}

describe('client.stream()', () => {
  it('yields typed monitor.hit events and resumes by itself after the connection is cut: nothing lost, nothing twice; ends on abort', async () => {
    const a = await starterWithMonitor();
    const proxy = new TcpProxy('127.0.0.1', Number(new URL(stack.url).port));
    await proxy.listen();
    const sts = createClient({ apiKey: a.key, baseUrl: `http://127.0.0.1:${proxy.port}` });
    const controller = new AbortController();
    const reconnects: unknown[] = [];
    const s = collect(
      sts.stream({
        signal: controller.signal,
        minDelayMs: 100,
        maxDelayMs: 1000,
        onReconnect: ({ reason }) => reconnects.push(reason),
      }),
    );
    try {
      // the gateway's feed is bound once a live hit arrives
      await waitFor(async () => {
        await newHit(a.monitor, 'warm-up');
        await sleep(100);
        return s.events.length > 0;
      }, 30_000);
      const sent: HitFixture[] = [];
      for (let i = 0; i < 3; i++) sent.push(await newHit(a.monitor, `before ${i}`));
      await waitFor(() => texts(s.events).includes('before 2'), 10_000);
      const last = s.events.at(-1)!;
      expect(last).toMatchObject({ type: 'monitor.hit', data: sent[2]!.payload });
      expect(last.id).toMatch(/\S{20,}/);

      // the connection is lost; hits are recorded while the client is away
      proxy.cut();
      for (let i = 0; i < 3; i++) sent.push(await newHit(a.monitor, `away ${i}`));
      await waitFor(() => reconnects.length >= 2, 10_000); // it keeps trying, with backoff
      proxy.restore();
      await waitFor(() => texts(s.events).includes('away 2'), 15_000);
      sent.push(await newHit(a.monitor, 'live again'));
      await waitFor(() => texts(s.events).includes('live again'), 10_000);
      await sleep(300);
      expect(texts(s.events)).toEqual(sent.map((h) => h.payload.tweet.text));
      expect(s.events.filter((e) => e.data.tweet.text !== 'warm-up').map((e) => e.data)).toEqual(
        sent.map((h) => h.payload),
      );
    } finally {
      controller.abort();
      await proxy.close();
    }
    // the loop ends on abort, without an error
    await expect(s.done).resolves.toBeUndefined();
  });

  it('throws refusals that retrying cannot cure as ApiErrors typed by the code: PLAN_REQUIRED, INVALID_LAST_EVENT_ID, TOO_MANY_STREAMS', async () => {
    const free = await stack.account('free');
    const refused = async (iterable: AsyncIterable<HitStreamEvent>) => {
      const s = collect(iterable);
      return s.done.then(
        () => null,
        (err: unknown) => err,
      );
    };
    const plan = await refused(createClient({ apiKey: free.key, baseUrl: stack.url }).stream());
    expect(isApiError(plan, 'PLAN_REQUIRED')).toBe(true);
    expect(plan).toMatchObject({ status: 403 });

    const a = await starterWithMonitor();
    const sts = createClient({ apiKey: a.key, baseUrl: stack.url });
    expect(isApiError(await refused(sts.stream({ lastEventId: 'not-a-cursor' })), 'INVALID_LAST_EVENT_ID')).toBe(true);

    // the plan's open streams (STREAM_MAX_PER_ACCOUNT, 3 by default) are taken
    const holders = new AbortController();
    const open = await Promise.all(
      [1, 2, 3].map(() =>
        fetch(`${stack.url}/api/v1/stream`, { headers: { authorization: `Bearer ${a.key}` }, signal: holders.signal }),
      ),
    );
    expect(open.map((r) => r.status)).toEqual([200, 200, 200]);
    const busy = await refused(sts.stream());
    holders.abort();
    expect(isApiError(busy, 'TOO_MANY_STREAMS')).toBe(true);
    expect(busy).toMatchObject({ status: 429 });
  });

  it('throws QUOTA_EXCEEDED when the service closes the stream because the month is spent', async () => {
    // an account that has used all but 2 units of its month before its first call
    const probe = await stack.account('starter');
    const limit = Number(
      (
        await fetch(`${stack.url}/api/v1/users/nasa`, { headers: { authorization: `Bearer ${probe.key}` } })
      ).headers.get('x-quota-limit'),
    );
    expect(limit).toBeGreaterThan(2);
    const account = await stack.db.account.create({
      data: { email: `${randomUUID()}@example.test`, plan: 'starter', emailVerifiedAt: new Date() },
    });
    await stack.db.usageMonthly.create({
      data: { accountId: account.id, period: new Date().toISOString().slice(0, 7), used: limit - 2 },
    });
    const key = await stack.addKey(account.id, 'read');
    const monitor = await monitorOf(account.id);
    const s = collect(createClient({ apiKey: key, baseUrl: stack.url }).stream()); // the open: 1 unit
    let first: HitFixture | undefined;
    // the first hit that arrives takes the last unit; the next one closes the stream
    await waitFor(async () => {
      first ??= await newHit(monitor, 'the last unit');
      await sleep(200);
      if (s.events.length === 0) first = undefined;
      return s.events.length > 0;
    }, 30_000);
    await newHit(monitor, 'over the quota');
    const err = await s.done.then(
      () => null,
      (e: unknown) => e,
    );
    expect(isApiError(err, 'QUOTA_EXCEEDED')).toBe(true);
    expect(s.events.map((e) => e.data.tweet.text)).toEqual(['the last unit']);
  });
  it('resumes by itself, at once and with Last-Event-ID, when the service ends the stream at STREAM_MAX_LIFETIME_S', async () => {
    const short = await startApiStack({ gatewayEnv: { STREAM_MAX_LIFETIME_S: '2' } });
    const controller = new AbortController();
    try {
      const { accountId, key } = await short.account('starter');
      const m = await short.db.monitor.create({
        data: { accountId, targetUsername: 'nasa', targetKey: 'nasa', keywords: [] },
      });
      const monitor: MonitorFixture = { id: m.id, accountId, targetUsername: 'nasa', keywords: [], secret: null };
      // every stream request's Last-Event-ID, as the gateway received it
      const asked: (string | null)[] = [];
      const recording: typeof fetch = (input, init) => {
        if ((input instanceof Request ? input.url : input.toString()).includes('/api/v1/stream'))
          asked.push(new Headers(init?.headers).get('last-event-id'));
        return fetch(input, init);
      };
      const reconnects: { attempt: number; delayMs: number; reason: unknown }[] = [];
      const s = collect(
        createClient({ apiKey: key, baseUrl: short.url, fetch: recording }).stream({
          signal: controller.signal,
          onReconnect: (r) => reconnects.push(r),
        }),
      );
      // a first life with no hit: the resume still names where it ended (the stream.closed's id)
      await waitFor(() => asked.length >= 2, 15_000);
      expect(asked[0]).toBeNull();
      expect(asked[1]).toMatch(/^h2\./);
      expect(reconnects[0]).toMatchObject({ attempt: 0, delayMs: 0 });
      expect(String(reconnects[0]!.reason)).toContain('max_lifetime');
      // hits recorded across further lives arrive once each, in order
      const sent: string[] = [];
      for (let i = 0; i < 3; i++) {
        lastAt = Math.max(Date.now(), lastAt + 1);
        sent.push((await createHit(short.db, monitor, `life ${i}`, new Date(lastAt))).payload.tweet.text);
        const before = asked.length;
        await waitFor(() => asked.length > before, 15_000);
      }
      await waitFor(() => s.events.length >= sent.length, 15_000);
      expect(texts(s.events)).toEqual(sent);
      expect(new Set(s.events.map((e) => e.id)).size).toBe(s.events.length);
      controller.abort();
      await s.done;
    } finally {
      controller.abort(); // a failed assertion must not leave the iterator reconnecting
      await short.stop();
    }
  }, 120_000);
});
