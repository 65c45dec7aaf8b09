/**
 * GET /api/v1/stream end to end: the gateway's composition root as a child process against real
 * PostgreSQL, Redis and RabbitMQ (its own vhost); hits are stored in PostgreSQL and published on
 * `monitor.events` the way the poller's outbox relay does (@sts/messaging's publisher).
 */
import http from 'node:http';
import net from 'node:net';
import { createHmac, randomUUID } from 'node:crypto';
import { createLogger } from '@sts/common';
import { createSecretBox, hashApiKey } from '@sts/core';
import { createDbClient, type Db } from '@sts/db';
import { AmqpClient } from '@sts/messaging';
import {
  createAccountWithKey as createAccountRow,
  createHit,
  createMonitor,
  createTestDatabase,
  createTestRedis,
  createTestVhost,
  type HitFixture,
  type MonitorFixture,
  spawnService,
  type ServiceProcess,
  untilKeyKnown,
  waitFor,
} from '@sts/testing';
import { createCursorCodec } from '../domain/streamCursor';
import { gatewayEnv, listening, TOKEN } from '../../test/processes';

const box = createSecretBox(Buffer.alloc(32, 7));

interface SseEvent {
  event: string;
  id?: string;
  data: string;
}

/** an open SSE stream read by node:http; events collected as they arrive */
interface Sse {
  status: number;
  headers: http.IncomingHttpHeaders;
  events: SseEvent[];
  comments: number;
  /** the body of a non-200 answer */
  body: string;
  ended: Promise<void>;
  close(): void;
}

function openStream(port: number, key: string, query = '', lastEventId?: string): Promise<Sse> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { authorization: `Bearer ${key}`, accept: 'text/event-stream' };
    if (lastEventId !== undefined) headers['last-event-id'] = lastEventId;
    const req = http.request({ host: '127.0.0.1', port, path: `/api/v1/stream${query}`, headers }, (res) => {
      let endedResolve!: () => void;
      const ended = new Promise<void>((r) => (endedResolve = r));
      const sse: Sse = {
        status: res.statusCode ?? 0,
        headers: res.headers,
        events: [],
        comments: 0,
        body: '',
        ended,
        close: () => req.destroy(),
      };
      let buf = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        if (sse.status !== 200) return void (sse.body += chunk);
        buf += chunk;
        let i;
        while ((i = buf.indexOf('\n\n')) !== -1) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const ev: SseEvent = { event: 'message', data: '' };
          let any = false;
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) sse.comments++;
            else if (line.startsWith('event: ')) {
              ev.event = line.slice(7);
              any = true;
            } else if (line.startsWith('id: ')) ev.id = line.slice(4);
            else if (line.startsWith('data: ')) {
              ev.data = line.slice(6);
              any = true;
            }
          }
          if (any) sse.events.push(ev);
        }
      });
      res.on('end', endedResolve);
      res.on('close', endedResolve);
      res.on('error', endedResolve);
      resolve(sse);
    });
    req.on('error', reject);
    req.end();
  });
}

const hits = (s: Sse) => s.events.filter((e) => e.event === 'monitor.hit');

/** an `h1.` cursor (detected_at, id) as the previous cursor version made it */
function oldCursor(accountId: string, at: number, hitId: string): string {
  const key = createHmac('sha256', TOKEN).update('sts stream cursor v1').digest();
  const mac = createHmac('sha256', key).update(`${accountId}.${at}.${hitId}`).digest().subarray(0, 16);
  return `h1.${at}.${hitId}.${mac.toString('base64url')}`;
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe('GET /api/v1/stream', () => {
  let dbHandle: Awaited<ReturnType<typeof createTestDatabase>>;
  let redisHandle: ReturnType<typeof createTestRedis>;
  let db: Db;
  let amqpUrl: string;
  let publisher: AmqpClient;
  const gateways: ServiceProcess[] = [];
  const ports: number[] = [];

  /** an account with a key every running gateway's live-key filter already has */
  async function createAccountWithKey(plan: 'free' | 'starter', on: readonly number[] = ports) {
    const account = await createAccountRow(db, plan);
    for (const p of on) await untilKeyKnown(`http://127.0.0.1:${p}`, account.key);
    return account;
  }

  async function startGateway(extra: Record<string, string> = {}): Promise<number> {
    const g = spawnService('services/gateway/src/main.ts', {
      ...gatewayEnv({ dbUrl: dbHandle.url, redis: redisHandle }),
      AMQP_URL: amqpUrl,
      // keys written straight to the database reach the live-key filter by its sync
      KEY_FILTER_SYNC_MS: '100',
      STREAM_HEARTBEAT_MS: '200',
      STREAM_MAX_PER_ACCOUNT: '2',
      // untilKeyKnown's probes each count a minute unit (a refused call's minute unit stays)
      PLAN_STARTER_PER_MINUTE: '100000',
      ...extra,
    });
    gateways.push(g);
    const { port } = await listening(g, /gateway listening/);
    ports.push(port);
    // the feed's queue is bound once a stream-less probe sees the exchange's binding
    return port;
  }

  async function publish(monitor: MonitorFixture, hit: HitFixture): Promise<void> {
    await publisher.publish('monitor.hit', hit.payload, {
      messageId: randomUUID(),
      headers: { accountId: monitor.accountId, hitId: hit.id },
    });
  }

  let lastAt = 0;
  /** a hit stored, then published (the order of the poller's outbox) */
  async function newHit(monitor: MonitorFixture, text = `hit ${randomUUID()}`): Promise<HitFixture> {
    // strictly increasing detection times: the stream's order is (detected_at, id)
    lastAt = Math.max(Date.now(), lastAt + 1);
    const hit = await createHit(db, monitor, text, new Date(lastAt));
    await publish(monitor, hit);
    return hit;
  }

  /** `on`: the gateways that must know the key (asking one makes it lease quota for the account) */
  async function starterWithMonitor(on: readonly number[] = ports) {
    const account = await createAccountWithKey('starter', on);
    const monitor = await createMonitor(db, box, { accountId: account.accountId, targetUsername: 'nasa' });
    return { ...account, monitor };
  }

  let port: number;

  beforeAll(async () => {
    dbHandle = await createTestDatabase();
    db = createDbClient({ url: dbHandle.url, poolSize: 4 });
    redisHandle = createTestRedis();
    amqpUrl = (await createTestVhost()).url;
    publisher = new AmqpClient({
      url: amqpUrl,
      logger: createLogger({ service: 'test', level: 'error' }),
      name: 'test',
    });
    await publisher.start();
    port = await startGateway();
  });

  afterAll(async () => {
    for (const g of gateways) g.child.kill('SIGTERM');
    for (const g of gateways) await g.exited;
    await publisher.stop();
    await db.$disconnect();
    await redisHandle.cleanup();
    await dbHandle.drop();
  });

  /** the feed's queue is up once a published hit reaches an open stream */
  async function liveStream(key: string, monitor: MonitorFixture, query = ''): Promise<Sse> {
    const s = await openStream(port, key, query);
    expect(s.status).toBe(200);
    let warmUps = 0;
    await waitFor(async () => {
      await newHit(monitor, 'warm-up');
      warmUps++;
      await new Promise((r) => setTimeout(r, 100));
      return hits(s).length > 0;
    }, 10_000);
    // every warm-up hit has arrived before the test goes on (a later one must not pass for its hit)
    await waitFor(() => hits(s).length >= warmUps, 10_000);
    return s;
  }

  it('sends each live hit as a monitor.hit event whose data is the webhook payload, with keep-alive comments', async () => {
    const a = await starterWithMonitor();
    const s = await liveStream(a.key, a.monitor);
    expect(s.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(s.headers['x-quota-limit']).toBeDefined();
    const before = hits(s).length;
    const hit = await newHit(a.monitor, 'We have liftoff');
    await waitFor(() => hits(s).length > before, 20_000);
    const ev = hits(s).at(-1)!;
    expect(JSON.parse(ev.data)).toEqual(hit.payload);
    expect(ev.data).toBe(JSON.stringify(hit.payload));
    // the id is the hit's position in commit order: its transaction's xid and its id
    const [row] = await db.$queryRaw<{ xid: string }[]>`SELECT xid::text FROM hits WHERE id = ${hit.id}::uuid`;
    expect(createCursorCodec(TOKEN).decode(a.accountId, ev.id!)).toEqual({ xid: BigInt(row!.xid), hitId: hit.id });
    // another account's hit never shows up
    const b = await starterWithMonitor();
    await newHit(b.monitor, 'not yours');
    const mine = await newHit(a.monitor, 'yours');
    await waitFor(() => hits(s).some((e) => e.data.includes('"yours"')), 20_000);
    expect(hits(s).some((e) => e.data.includes('not yours'))).toBe(false);
    expect(JSON.parse(hits(s).at(-1)!.data)).toEqual(mine.payload);
    await waitFor(() => s.comments >= 3, 20_000); // heartbeat every 200 ms here
    s.close();
  });

  it("carries each hit's sequence: live as published, resumed as stored with the hit", async () => {
    const a = await starterWithMonitor();
    const s1 = await liveStream(a.key, a.monitor);
    /** a hit numbered `sequence`, stored as the poller stores it (publish() then sends it as the relay would) */
    const numbered = async (sequence: number, text: string): Promise<HitFixture> => {
      lastAt = Math.max(Date.now(), lastAt + 1);
      const hit = await createHit(db, a.monitor, text, new Date(lastAt));
      await db.hit.updateMany({ where: { id: hit.id }, data: { sequence: BigInt(sequence) } });
      return { ...hit, payload: { ...hit.payload, sequence } };
    };
    const live = await numbered(7, 'live seven');
    await publish(a.monitor, live);
    await waitFor(() => hits(s1).some((e) => e.data.includes('live seven')), 20_000);
    expect(JSON.parse(hits(s1).find((e) => e.data.includes('live seven'))!.data)).toEqual(live.payload);
    const last = hits(s1).at(-1)!;
    s1.close();
    await s1.ended;
    const away = await numbered(8, 'away eight');
    const s2 = await openStream(port, a.key, '', last.id);
    await waitFor(() => hits(s2).some((e) => e.data.includes('away eight')), 20_000);
    const resumed = hits(s2).find((e) => e.data.includes('away eight'))!;
    expect(JSON.parse(resumed.data)).toEqual(away.payload);
    s2.close();
  });

  it('resumes after Last-Event-ID: stored hits first, in order, then live ones, none twice', async () => {
    const a = await starterWithMonitor();
    const s1 = await liveStream(a.key, a.monitor);
    const last = hits(s1).at(-1)!;
    s1.close();
    await s1.ended;
    // recorded while the client was away (published too: no open stream takes them)
    const away = [];
    for (let i = 0; i < 3; i++) away.push(await newHit(a.monitor, `away ${i}`));
    const s2 = await openStream(port, a.key, '', last.id);
    expect(s2.status).toBe(200);
    await waitFor(() => hits(s2).length >= 3, 20_000);
    const live = await newHit(a.monitor, 'live after resume');
    await waitFor(() => hits(s2).length >= 4, 20_000);
    await new Promise((r) => setTimeout(r, 300));
    expect(hits(s2).map((e) => JSON.parse(e.data) as unknown)).toEqual([...away.map((h) => h.payload), live.payload]);
    // resuming from the middle sends only what follows it
    const s3 = await openStream(port, a.key, '', hits(s2)[1]!.id);
    await waitFor(() => hits(s3).length >= 2, 20_000);
    await new Promise((r) => setTimeout(r, 300));
    expect(hits(s3).map((e) => JSON.parse(e.data) as unknown)).toEqual([away[2]!.payload, live.payload]);
    s2.close();
    s3.close();
  });

  it('resumes in commit order: a hit positioned earlier whose transaction commits later still arrives, once', async () => {
    const a = await starterWithMonitor();
    const s1 = await liveStream(a.key, a.monitor);
    // `first` takes its transaction id before `late` and commits first, with the later position;
    // `late` (the earlier detected_at) commits only after the client saw `first` and left
    const lateAt = new Date(lastAt + 1);
    const firstAt = new Date(lastAt + 2);
    lastAt += 2;
    const firstWritten = deferred();
    const lateWritten = deferred();
    const lateMayCommit = deferred();
    let first!: HitFixture;
    let late!: HitFixture;
    const firstTx = db.$transaction(
      async (tx) => {
        first = await createHit(tx, a.monitor, 'first to commit', firstAt);
        firstWritten.resolve();
        await lateWritten.promise;
      },
      { timeout: 30_000 },
    );
    await firstWritten.promise;
    const lateTx = db.$transaction(
      async (tx) => {
        late = await createHit(tx, a.monitor, 'commits late', lateAt);
        lateWritten.resolve();
        await lateMayCommit.promise;
      },
      { timeout: 30_000 },
    );
    await firstTx;
    await publish(a.monitor, first);
    await waitFor(() => hits(s1).some((e) => e.data.includes('first to commit')), 10_000);
    const seen = hits(s1).at(-1)!;
    expect(JSON.parse(seen.data)).toEqual(first.payload);
    s1.close();
    await s1.ended;
    lateMayCommit.resolve();
    await lateTx;
    await publish(a.monitor, late);
    const s2 = await openStream(port, a.key, '', seen.id);
    expect(s2.status).toBe(200);
    const after = await newHit(a.monitor, 'after the late commit');
    await waitFor(() => hits(s2).some((e) => e.data.includes('after the late commit')), 10_000);
    await new Promise((r) => setTimeout(r, 300));
    expect(hits(s2).map((e) => JSON.parse(e.data) as unknown)).toEqual([late.payload, after.payload]);
    s2.close();
  });

  it('holds back what an older transaction still running could precede, and sends it once that transaction ends', async () => {
    const a = await starterWithMonitor();
    const s1 = await liveStream(a.key, a.monitor);
    // a transaction of another database on the server holds nothing back
    const otherDb = createDbClient({ url: process.env.TEST_POSTGRES_URL!, poolSize: 1 });
    const otherTaken = deferred();
    const otherMayEnd = deferred();
    const otherTx = otherDb.$transaction(
      async (tx) => {
        await tx.$queryRaw`SELECT pg_current_xact_id()::text`;
        otherTaken.resolve();
        await otherMayEnd.promise;
      },
      { timeout: 30_000 },
    );
    try {
      await otherTaken.promise;
      const meanwhile = await newHit(a.monitor, 'beside another database');
      await waitFor(() => hits(s1).some((e) => e.data.includes('beside another database')), 10_000);
      expect(JSON.parse(hits(s1).at(-1)!.data)).toEqual(meanwhile.payload);
    } finally {
      otherMayEnd.resolve();
      await otherTx;
      await otherDb.$disconnect();
    }
    const from = hits(s1).at(-1)!.id;
    s1.close();
    await s1.ended;
    const older = deferred();
    const mayEnd = deferred();
    // a transaction that took its id before the hit was written, still running when the client resumes
    const olderTx = db.$transaction(
      async (tx) => {
        await tx.$queryRaw`SELECT pg_current_xact_id()::text`;
        older.resolve();
        await mayEnd.promise;
      },
      { timeout: 30_000 },
    );
    await older.promise;
    // stored, never published: only the database can bring it
    lastAt = Math.max(Date.now(), lastAt + 1);
    const stored = await createHit(db, a.monitor, 'past the horizon', new Date(lastAt));
    const s2 = await openStream(port, a.key, '', from);
    expect(s2.status).toBe(200);
    await new Promise((r) => setTimeout(r, 500));
    expect(hits(s2)).toHaveLength(0);
    mayEnd.resolve();
    await olderTx;
    await waitFor(() => hits(s2).length >= 1, 10_000);
    await new Promise((r) => setTimeout(r, 300));
    expect(hits(s2).map((e) => JSON.parse(e.data) as unknown)).toEqual([stored.payload]);
    s2.close();
  });

  it('filters by ?monitor= and refuses bad input with clear codes, changing nothing', async () => {
    const a = await starterWithMonitor();
    const other = await createMonitor(db, box, { accountId: a.accountId, targetUsername: 'esa' });
    const s = await liveStream(a.key, a.monitor, `?monitor=${a.monitor.id}`);
    await newHit(other, 'from the other monitor');
    const last = await newHit(a.monitor, 'from the asked monitor');
    await waitFor(() => hits(s).some((e) => e.data.includes('from the asked monitor')), 20_000);
    expect(hits(s).some((e) => e.data.includes('other monitor'))).toBe(false);
    expect(JSON.parse(hits(s).at(-1)!.data)).toEqual(last.payload);
    s.close();

    const b = await starterWithMonitor();
    const refused = async (query: string, lastEventId?: string) => {
      const r = await openStream(port, a.key, query, lastEventId);
      await r.ended;
      return { status: r.status, body: JSON.parse(r.body) as { code: string; error: string; param?: string } };
    };
    expect(await refused('?monitor=nope')).toMatchObject({
      status: 400,
      body: { code: 'INVALID_REQUEST', param: 'monitor' },
    });
    expect(await refused('?since=1')).toMatchObject({ status: 400, body: { code: 'INVALID_REQUEST', param: 'since' } });
    expect(await refused(`?monitor=${b.monitor.id}`)).toMatchObject({ status: 404, body: { code: 'NOT_FOUND' } });
    expect(await refused('', 'garbage')).toMatchObject({ status: 400, body: { code: 'INVALID_LAST_EVENT_ID' } });
    // a genuine cursor of account b is not account a's
    const bCursor = createCursorCodec(TOKEN).encode(b.accountId, { xid: 1000n, hitId: randomUUID() });
    expect(await refused('', bCursor)).toMatchObject({ status: 400, body: { code: 'INVALID_LAST_EVENT_ID' } });
    // forged: a well-shaped cursor with a made-up seal
    expect(await refused('', `h2.1000.${randomUUID()}.AAAAAAAAAAAAAAAAAAAAAA`)).toMatchObject({
      status: 400,
      body: { code: 'INVALID_LAST_EVENT_ID' },
    });
    // a cursor of the former (detected_at, id) order, sealed as that version sealed it
    expect(await refused('', oldCursor(a.accountId, Date.now(), randomUUID()))).toMatchObject({
      status: 400,
      body: { code: 'INVALID_LAST_EVENT_ID' },
    });
    // none of these was charged
    const r = await openStream(port, b.key);
    expect(r.status).toBe(200);
    r.close();
  });

  it('Free plan: 403 PLAN_REQUIRED; an active trial streams', async () => {
    const free = await createAccountWithKey('free');
    const r = await openStream(port, free.key);
    await r.ended;
    expect(r.status).toBe(403);
    expect(JSON.parse(r.body)).toMatchObject({ code: 'PLAN_REQUIRED' });
    // the trial before the gateway first reads the key (it caches the account's plan with it)
    const trial = await createAccountRow(db, 'free');
    await db.account.update({
      where: { id: trial.accountId },
      data: { trialEndsAt: new Date(Date.now() + 86_400_000) },
    });
    await untilKeyKnown(`http://127.0.0.1:${port}`, trial.key);
    const t = await openStream(port, trial.key);
    expect(t.status).toBe(200);
    t.close();
  });

  it('at most STREAM_MAX_PER_ACCOUNT open streams, across gateways; the next is 429 TOO_MANY_STREAMS; closing frees a slot', async () => {
    const a = await starterWithMonitor();
    const port2 = await startGateway();
    const s1 = await openStream(port, a.key);
    const s2 = await openStream(port2, a.key);
    expect([s1.status, s2.status]).toEqual([200, 200]);
    const burst = await Promise.all(Array.from({ length: 20 }, (_, i) => openStream(i % 2 ? port : port2, a.key)));
    for (const r of burst) await r.ended;
    expect(burst.every((r) => r.status === 429)).toBe(true);
    expect(JSON.parse(burst[0]!.body)).toMatchObject({ code: 'TOO_MANY_STREAMS', limit: 2 });
    s1.close();
    await waitFor(async () => {
      const r = await openStream(port2, a.key);
      if (r.status === 200) return (r.close(), true);
      await r.ended;
      return false;
    }, 5000);
    s2.close();
  });

  it('bounds the streams of one gateway (STREAM_MAX_PER_PROCESS): past it 503 with Retry-After, whatever the accounts', async () => {
    const small = await startGateway({ STREAM_MAX_PER_PROCESS: '3' });
    const accounts = await Promise.all(Array.from({ length: 3 }, () => starterWithMonitor()));
    const open = await Promise.all(accounts.map((a) => openStream(small, a.key)));
    expect(open.map((s) => s.status)).toEqual([200, 200, 200]);
    const others = await Promise.all(Array.from({ length: 4 }, () => starterWithMonitor()));
    const burst = await Promise.all(others.map((a) => openStream(small, a.key)));
    for (const r of burst) await r.ended;
    expect(burst.map((r) => r.status)).toEqual([503, 503, 503, 503]);
    expect(burst[0]!.headers['retry-after']).toBe('5');
    expect(JSON.parse(burst[0]!.body)).toMatchObject({ code: 'SERVICE_UNAVAILABLE' });
    for (const s of open) s.close();
  });

  it('meters 1 unit per open and per event, and ends with stream.closed when the quota is spent', async () => {
    // the account before its gateway: the filter it builds at start has the key, and no request
    // that probes for the key leases quota before the stream opens
    const a = await starterWithMonitor([]);
    const quotaPort = await startGateway({ PLAN_STARTER_MONTHLY_QUOTA: '4' });
    const s = await openStream(quotaPort, a.key); // unit 1
    expect(s.status).toBe(200);
    expect(s.headers['x-quota-remaining']).toBe('3');
    // wait until the feed of this gateway is bound: a hit on an unrelated account's stream shows it
    const probe = await starterWithMonitor([quotaPort]);
    const ps = await openStream(quotaPort, probe.key);
    await waitFor(async () => {
      await newHit(probe.monitor, 'probe');
      await new Promise((r) => setTimeout(r, 100));
      return hits(ps).length > 0;
    }, 30_000);
    ps.close();
    for (let i = 0; i < 5; i++) await newHit(a.monitor, `metered ${i}`);
    await s.ended;
    expect(hits(s).map((e) => (JSON.parse(e.data) as { tweet: { text: string } }).tweet.text)).toEqual([
      'metered 0',
      'metered 1',
      'metered 2',
    ]);
    expect(s.events.at(-1)).toMatchObject({ event: 'stream.closed' });
    expect(JSON.parse(s.events.at(-1)!.data)).toMatchObject({ reason: 'quota_exceeded' });
  });

  it("charges events to the month only: a stream carrying more events than the per-minute limit leaves the account's next call unlimited", async () => {
    // the account before its gateways (no key probe counts a minute unit)
    const a = await starterWithMonitor([]);
    // read-api's stand-in: every call it is asked succeeds
    const readApi = http.createServer((req, res) => {
      const body = '{"data":{"username":"nasa"}}';
      res.writeHead(200, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(body),
        'x-request-id': req.headers['x-request-id'],
      });
      res.end(body);
    });
    await new Promise<void>((r) => readApi.listen(0, '127.0.0.1', r));
    try {
      const env = {
        PLAN_STARTER_PER_MINUTE: '5',
        READ_API_URL: `http://127.0.0.1:${(readApi.address() as net.AddressInfo).port}`,
      };
      const streamPort = await startGateway(env);
      const restPort = await startGateway(env);
      const s = await openStream(streamPort, a.key); // 1 minute unit, 1 month unit
      expect(s.status).toBe(200);
      const probe = await starterWithMonitor([streamPort]);
      const ps = await openStream(streamPort, probe.key);
      await waitFor(async () => {
        await newHit(probe.monitor, 'probe');
        await new Promise((r) => setTimeout(r, 100));
        return hits(ps).length > 0;
      }, 30_000);
      ps.close();
      const events = 12;
      for (let i = 0; i < events; i++) await newHit(a.monitor, `busy ${i}`);
      await waitFor(() => hits(s).length >= events, 10_000);
      // another gateway leases the account's minute afresh from Redis: it sees only the open's unit
      const r = await fetch(`http://127.0.0.1:${restPort}/api/v1/users/nasa`, {
        headers: { authorization: `Bearer ${a.key}` },
      });
      await r.arrayBuffer();
      expect(r.status).toBe(200);
      expect(Number(r.headers.get('x-ratelimit-remaining'))).toBeGreaterThan(0);
      s.close();
      // the month: the open, every event and the call, written through by both gateways
      await waitFor(async () => {
        const row = await db.usageMonthly.findFirst({ where: { accountId: a.accountId } });
        return row?.used === 1 + events + 1;
      }, 10_000);
      expect(hits(s)).toHaveLength(events);
    } finally {
      readApi.close();
    }
  });

  it('cuts a client that stops reading once its unread bytes pass the bound; it resumes losing nothing', async () => {
    const a = await starterWithMonitor();
    const probe = await liveStream(a.key, a.monitor); // feed bound; its hits are stored too
    probe.close();
    await probe.ended;
    const from = hits(probe).at(-1)!.id!;
    // a raw client that sends its request and never reads
    const sock = net.connect(port, '127.0.0.1');
    await new Promise((r) => sock.once('connect', r));
    sock.pause();
    sock.write(
      `GET /api/v1/stream HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${a.key}\r\nlast-event-id: ${from}\r\n\r\n`,
    );
    let closedByServer = false;
    sock.on('close', () => (closedByServer = true));
    sock.on('error', () => undefined);
    await new Promise((r) => setTimeout(r, 300));
    const big = 'x'.repeat(100_000);
    const sent: HitFixture[] = [];
    for (let i = 0; i < 150; i++) sent.push(await newHit(a.monitor, `${i} ${big}`));
    // the server gave up on it: reading now shows the end of the connection (nothing kept for it)
    let got = '';
    sock.setEncoding('utf8');
    sock.on('data', (d: string) => (got += d));
    sock.resume();
    await waitFor(() => closedByServer, 20_000).catch((e: unknown) => {
      throw new Error(`not cut: read ${got.length} bytes (${String(e)})`);
    });
    const received = [...got.matchAll(/id: (\S+)\ndata: (.*)\n\n/g)].map((m) => ({
      id: m[1]!,
      text: (JSON.parse(m[2]!) as { tweet: { text: string } }).tweet.text,
    }));
    expect(received.length).toBeLessThan(150);
    expect(got).not.toContain('\r\n0\r\n\r\n'); // cut, not ended
    // resume from the last complete event: the rest arrive, none twice, none lost
    const resumed = await openStream(port, a.key, '', received.at(-1)?.id ?? from);
    await waitFor(() => received.length + hits(resumed).length >= 150, 20_000).catch((e: unknown) => {
      throw new Error(
        `resume short: ${received.length} + ${hits(resumed).length} (status ${resumed.status}, events ${resumed.events.length}) ${String(e)}`,
      );
    });
    await new Promise((r) => setTimeout(r, 300));
    const texts = [
      ...received.map((e) => e.text),
      ...hits(resumed).map((e) => (JSON.parse(e.data) as { tweet: { text: string } }).tweet.text),
    ];
    expect(texts).toEqual(sent.map((h) => h.payload.tweet.text));
    resumed.close();
  });
  /** the stream's final event, once the service has ended it */
  async function closedEvent(s: Sse): Promise<{ id?: string; reason: string; message: string }> {
    await waitFor(() => s.events.some((e) => e.event === 'stream.closed'), 15_000);
    await s.ended;
    const ev = s.events.at(-1)!;
    expect(ev.event).toBe('stream.closed');
    return { ...(JSON.parse(ev.data) as { reason: string; message: string }), ...(ev.id ? { id: ev.id } : {}) };
  }

  it('ends the streams of a revoked key with stream.closed key_revoked: at once on apikey.changed, and without the event', async () => {
    const announced = await starterWithMonitor();
    const silent = await starterWithMonitor();
    const s1 = await liveStream(announced.key, announced.monitor);
    const s2 = await liveStream(silent.key, silent.monitor);
    for (const k of [announced.key, silent.key])
      await db.apiKey.update({ where: { keyHash: hashApiKey(k) }, data: { revokedAt: new Date() } });
    // `key revoke` announces it; a revocation written without the event is found by the re-check
    await publisher.publish(
      'apikey.changed',
      { keyHash: hashApiKey(announced.key), change: 'revoked', occurredAt: new Date().toISOString() },
      { messageId: randomUUID(), headers: { accountId: announced.accountId } },
    );
    for (const s of [s1, s2]) expect(await closedEvent(s)).toMatchObject({ reason: 'key_revoked' });
    // nothing more is sent to the key, and it cannot open another
    const again = await openStream(port, silent.key);
    await again.ended;
    expect(again.status).toBe(401);
  });

  it("ends a stream with stream.closed plan_changed when the account's plan changes; on Free it cannot reopen", async () => {
    const a = await starterWithMonitor();
    const s = await liveStream(a.key, a.monitor);
    await db.account.update({ where: { id: a.accountId }, data: { plan: 'free' } });
    expect(await closedEvent(s)).toMatchObject({ reason: 'plan_changed' });
    const again = await openStream(port, a.key);
    await again.ended;
    expect([again.status, JSON.parse(again.body)]).toEqual([403, expect.objectContaining({ code: 'PLAN_REQUIRED' })]);
  });

  it('ends a stream after STREAM_MAX_LIFETIME_S with stream.closed max_lifetime, whose id resumes it losing nothing', async () => {
    const short = await startGateway({ STREAM_MAX_LIFETIME_S: '2' });
    const a = await starterWithMonitor();
    const s = await openStream(short, a.key);
    expect(s.status).toBe(200);
    const closed = await closedEvent(s);
    expect(closed.reason).toBe('max_lifetime');
    expect(hits(s)).toEqual([]);
    // no hit was sent on it: the id is where it opened, so a hit recorded since arrives on resume
    expect(createCursorCodec(TOKEN).decode(a.accountId, closed.id!)).not.toBeNull();
    const meanwhile = await newHit(a.monitor, 'recorded after the stream ended');
    const resumed = await openStream(port, a.key, '', closed.id);
    expect(resumed.status).toBe(200);
    await waitFor(() => hits(resumed).length > 0, 10_000);
    expect(JSON.parse(hits(resumed)[0]!.data)).toEqual(meanwhile.payload);
    resumed.close();
  });
});
