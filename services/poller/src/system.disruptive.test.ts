/**
 * The whole system under faults: read-api, two gateways, poller (local source) and
 * webhook-dispatcher run as processes against PRIVATE engines started by this test (its own
 * PostgreSQL cluster, Redis server and RabbitMQ node on spare ports: packages/testing/src/engines.ts),
 * so restarting them disturbs no other test. Tweets that match the monitors keep being written
 * into the local store, hits flow to a local HTTPS receiver, and API calls go through the gateways
 * (each account's calls alternate between the two, as behind a load balancer),
 * while the test restarts RabbitMQ, restarts PostgreSQL (immediate mode: a crash), flushes and
 * restarts Redis, and kill -9s the dispatcher and then the poller (starting a new one each time).
 * Afterwards:
 * - every matching tweet produced exactly one hit row, each with exactly one outbox event;
 * - every hit was delivered at least once with its key (X-Service-Delivery = the event's message id);
 * - no account got more 2xx answers than its monthly quota, also across the Redis flush (an account
 *   driven to quota − 20 before the flush gets exactly 20 more after it, through both gateways: the
 *   one that rebuilds the month counter and the other, which adds its own outstanding units to it),
 *   and usage_monthly counts every 2xx;
 * - after each fault every service's /readyz is 200 again by itself within 30 s (the required limit),
 *   counted from the moment the engine is back (restarts) or the new process is up (kill -9: from
 *   its ops server listening; its boot, loading TypeScript through tsx on a busy test machine,
 *   is printed apart: it is 15-20 s with a load of 12 on 2 cores, and the image runs compiled JS).
 * It prints its figures as one line. Lives in the poller because the hit pipeline starts there;
 * it spawns the other services by path (a package never imports a service).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { classifyWebhookUrl, createSecretBox, generateApiKey, generateWebhookSecret } from '@sts/core';
import { createDbClient, ensureDatabase, migrate, type Db } from '@sts/db';
import { createSocialTweet, createSocialUser } from '@sts/social';
import {
  sparePort,
  spawnService,
  startHttpsReceiver,
  startPrivatePostgres,
  startPrivateRabbitMq,
  startPrivateRedis,
  type HttpsReceiver,
  type PrivatePostgres,
  type PrivateRabbitMq,
  type PrivateRedis,
  type ServiceProcess,
} from '@sts/testing';

jest.setTimeout(420_000);

const QUOTA = 150; // the Free plan's monthly quota here (accounts A and B)
const READY_LIMIT_MS = 30_000; // required: ready again by itself within 30 s
const ENCRYPTION_KEY = randomBytes(32).toString('base64');
const INTERNAL_TOKEN = randomBytes(24).toString('base64url');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Service {
  name: string;
  file: string;
  proc: ServiceProcess;
  opsPort: number;
  /** ms from spawn until its ops server was up (modules loaded: tsx here, compiled JS in an image) */
  bootMs: number;
}

interface Tally {
  ok: number;
  quota: number;
  rate: number;
  other: number;
}

async function startService(name: string, file: string, env: Record<string, string>): Promise<Service> {
  const spawnedAt = Date.now();
  const proc = spawnService(file, env);
  try {
    const line = await proc.waitForLine(new RegExp(`"message":"${name} starting"`), 60_000);
    const opsPort = (JSON.parse(line) as { opsPort: number }).opsPort;
    return { name, file, proc, opsPort, bootMs: Date.now() - spawnedAt };
  } catch (err) {
    proc.child.kill('SIGKILL');
    throw err;
  }
}

async function readyz(s: Service): Promise<number> {
  try {
    const r = await fetch(`http://127.0.0.1:${s.opsPort}/readyz`, { signal: AbortSignal.timeout(2000) });
    await r.arrayBuffer();
    return r.status;
  } catch {
    return 0;
  }
}

/** ms from `since` until each service answers /readyz 200 (Infinity when not within 60 s) */
async function readiness(services: Service[], since: number): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  await Promise.all(
    services.map(async (s) => {
      while (Date.now() - since < 60_000) {
        if ((await readyz(s)) === 200) {
          out[s.name] = Date.now() - since;
          return;
        }
        await sleep(100);
      }
      out[s.name] = Infinity;
    }),
  );
  return out;
}

async function stopService(s: Service | undefined): Promise<void> {
  if (!s || s.proc.child.exitCode !== null || s.proc.child.signalCode !== null) return;
  s.proc.child.kill('SIGTERM');
  await Promise.race([s.proc.exited, sleep(15_000)]);
  if (s.proc.child.exitCode === null && s.proc.child.signalCode === null) s.proc.child.kill('SIGKILL');
}

/** one API call through the gateway, tallied by outcome */
async function apiCall(gatewayUrl: string, key: string, tally: Tally): Promise<void> {
  try {
    const r = await fetch(`${gatewayUrl}/api/v1/users/fault_a`, {
      headers: { 'x-api-key': key },
      signal: AbortSignal.timeout(15_000),
    });
    const body = await r.text();
    if (r.status >= 200 && r.status < 300) tally.ok++;
    else if (r.status === 429 && body.includes('QUOTA')) tally.quota++;
    else if (r.status === 429) tally.rate++;
    else tally.other++;
  } catch {
    tally.other++;
  }
}

const newTally = (): Tally => ({ ok: 0, quota: 0, rate: 0, other: 0 });
const fmt = (t: Tally) => `2xx=${t.ok} 429quota=${t.quota} 429rate=${t.rate} other=${t.other}`;

async function seed(db: Db, receiverUrl: string) {
  const box = createSecretBox(ENCRYPTION_KEY);
  for (const username of ['fault_a', 'fault_b']) await createSocialUser(db, { username, name: username });
  const keyFor = async (plan: 'free' | 'starter') => {
    const account = await db.account.create({
      data: { email: `${randomBytes(6).toString('hex')}@example.test`, plan },
    });
    const k = generateApiKey();
    await db.apiKey.create({ data: { accountId: account.id, keyHash: k.hash, prefix: k.prefix, name: 'fault' } });
    return { accountId: account.id, key: k.key };
  };
  const a = await keyFor('free'); // hammered from the start: over its quota before the faults
  const b = await keyFor('free'); // driven to QUOTA - 20 just before the Redis flush
  const c = await keyFor('starter'); // the monitors' account, under steady API load throughout
  const monitors: { id: string; target: string; keywords: string[] }[] = [];
  const specs = [
    { target: 'fault_a', keywords: ['launch'] },
    { target: 'fault_a', keywords: [] },
    { target: 'fault_b', keywords: ['launch'] },
  ];
  for (const [i, spec] of specs.entries()) {
    const id = randomUUID();
    const hook = classifyWebhookUrl(`${receiverUrl}/hook/${i}`);
    await db.monitor.create({
      data: {
        id,
        accountId: c.accountId,
        targetUsername: spec.target,
        targetKey: spec.target,
        keywords: spec.keywords,
        webhook: {
          create: { url: hook.url, kind: hook.kind, secretCiphertext: box.encrypt(generateWebhookSecret(), id) },
        },
      },
    });
    monitors.push({ id, ...spec });
  }
  return { a, b, c, monitors };
}

/** the hits the stored tweets must have produced: "monitorId:tweetId" */
async function expectedHits(
  db: Db,
  monitors: { id: string; target: string; keywords: string[] }[],
): Promise<Set<string>> {
  const tweets = await db.$queryRaw<{ id: string; username: string; text: string }[]>`
    SELECT t.id::text AS id, u.username_key AS username, t.text FROM social_tweets t JOIN social_users u ON u.id = t.author_id`;
  const out = new Set<string>();
  for (const t of tweets)
    for (const m of monitors)
      if (m.target === t.username && (m.keywords.length === 0 || /\blaunch\b/.test(t.text))) out.add(`${m.id}:${t.id}`);
  return out;
}

interface HitRecord {
  id: string;
  monitor_id: string;
  tweet_id: string;
  message_id: string | null;
  events: number;
}

async function recordedHits(db: Db): Promise<HitRecord[]> {
  return db.$queryRaw<HitRecord[]>`
    SELECT h.id::text AS id, h.monitor_id::text AS monitor_id, h.tweet_id, min(o.message_id::text) AS message_id,
           count(o.id)::int AS events
    FROM hits h LEFT JOIN outbox o ON o.headers->>'hitId' = h.id::text
    GROUP BY h.id, h.monitor_id, h.tweet_id`;
}

/** the environment of every service: the private engines, test plans, short intervals */
function serviceEnv(o: {
  databaseUrl: string;
  redisUrl: string;
  amqpUrl: string;
  readApiPort: number;
  gatewayPort: number;
}): Record<string, string> {
  return {
    DATABASE_URL: o.databaseUrl,
    REDIS_URL: o.redisUrl,
    AMQP_URL: o.amqpUrl,
    INTERNAL_TOKEN,
    SECRETS_ENCRYPTION_KEY: ENCRYPTION_KEY,
    READ_API_PORT: String(o.readApiPort),
    READ_API_URL: `http://127.0.0.1:${o.readApiPort}`,
    GATEWAY_PORT: String(o.gatewayPort),
    GATEWAY_HOST: '127.0.0.1',
    READ_API_HOST: '127.0.0.1',
    OPS_HOST: '127.0.0.1',
    PLAN_FREE_MONTHLY_QUOTA: String(QUOTA),
    PLAN_FREE_PER_MINUTE: '100000',
    PLAN_STARTER_MONTHLY_QUOTA: '1000000',
    PLAN_STARTER_PER_MINUTE: '100000',
    POLL_INTERVAL_SECONDS: '1',
    // a killed poller's leases lapse after twice this
    POLL_TIMEOUT_MS: '3000',
    WEBHOOK_ALLOW_PRIVATE_HOSTS: 'localhost',
    WEBHOOK_TIMEOUT_MS: '5000',
    DISPATCH_SHUTDOWN_GRACE_MS: '2000',
    NODE_EXTRA_CA_CERTS: process.env.NODE_EXTRA_CA_CERTS ?? '',
    LOG_LEVEL: 'warn',
  };
}

/** writes a tweet every 150 ms by both targets, a third with the monitored keyword, until stopped */
function startWriter(db: Db): { stop(): Promise<{ written: number; failed: number }> } {
  let writing = true;
  let written = 0;
  let failed = 0;
  const loop = (async () => {
    for (let i = 0; writing; i++) {
      const author = i % 2 === 0 ? 'fault_a' : 'fault_b';
      const text = i % 3 === 0 ? `launch day ${i}` : `coffee break ${i}`;
      await createSocialTweet(db, { authorUsername: author, text }).then(
        () => written++,
        () => failed++,
      );
      await sleep(150);
    }
  })();
  return {
    async stop() {
      writing = false;
      await loop;
      return { written, failed };
    },
  };
}

/** waits (at most 90 s) until every expected hit is recorded and each recorded hit was delivered */
async function drain(db: Db, receiver: HttpsReceiver, expected: Set<string>): Promise<HitRecord[]> {
  const deadline = Date.now() + 90_000;
  for (;;) {
    const hits = await recordedHits(db);
    const got = deliveryKeys(receiver);
    const done = hits.length >= expected.size && hits.every((h) => h.message_id && got.has(h.message_id));
    if (done || Date.now() > deadline) return hits;
    await sleep(500);
  }
}

const deliveryKeys = (receiver: HttpsReceiver) =>
  new Set(receiver.requests.map((r) => String(r.headers['x-service-delivery'])));

describe('the whole system under engine restarts and kill -9', () => {
  let pg: PrivatePostgres | undefined;
  let redis: PrivateRedis | undefined;
  let rabbit: PrivateRabbitMq | undefined;
  let receiver: HttpsReceiver | undefined;
  let db: Db | undefined;
  const services: Record<string, Service | undefined> = {};
  let writer: ReturnType<typeof startWriter> | undefined;
  let loading = false;

  afterAll(async () => {
    await writer?.stop();
    loading = false;
    await Promise.all(Object.values(services).map((s) => stopService(s)));
    await db?.$disconnect().catch(() => undefined);
    await receiver?.close().catch(() => undefined);
    await Promise.all([pg, redis, rabbit].map(async (e) => e?.stop().catch(() => undefined)));
  });

  // One sequence of phases sharing the run's state (engines, processes, tallies), so one body
  // longer than usual; the parts that stand alone are the helpers above.
  it('records every hit once, delivers each at least once, keeps the quota and recovers by itself', async () => {
    // where the run's time goes (printed with the figures)
    const timeline: string[] = [];
    let last = Date.now();
    const mark = (phase: string) => {
      timeline.push(`${phase} ${((Date.now() - last) / 1000).toFixed(0)}s`);
      last = Date.now();
    };
    [pg, redis, rabbit, receiver] = await Promise.all([
      startPrivatePostgres(),
      startPrivateRedis(),
      startPrivateRabbitMq(),
      startHttpsReceiver({ handler: () => ({ status: 200 }) }),
    ]);
    const databaseUrl = pg.url('sts');
    await ensureDatabase(databaseUrl);
    await migrate(databaseUrl);
    db = createDbClient({ url: databaseUrl, poolSize: 4 });
    const { a, b, c, monitors } = await seed(db, receiver.url);
    mark('engines');

    const [readApiPort, gatewayPort, gatewayPort2] = [await sparePort(), await sparePort(), await sparePort()];
    const env = serviceEnv({ databaseUrl, redisUrl: redis.url, amqpUrl: rabbit.url, readApiPort, gatewayPort });
    const files = {
      'read-api': 'services/read-api/src/main.ts',
      gateway: 'services/gateway/src/main.ts',
      poller: 'services/poller/src/main.ts',
      'webhook-dispatcher': 'services/webhook-dispatcher/src/main.ts',
    };
    const start = async (name: keyof typeof files) => (services[name] = await startService(name, files[name], env));
    // a second gateway on its own port: two replicas sharing Redis and PostgreSQL
    const startSecondGateway = async () =>
      (services['gateway-2'] = {
        ...(await startService('gateway', files.gateway, { ...env, GATEWAY_PORT: String(gatewayPort2) })),
        name: 'gateway-2',
      });
    await Promise.all([...Object.keys(files).map((n) => start(n as keyof typeof files)), startSecondGateway()]);
    const all = () => Object.values(services).filter((s): s is Service => s !== undefined);
    const initial = await readiness(all(), Date.now());
    expect(Math.max(...Object.values(initial))).toBeLessThan(60_000);
    mark('services');

    writer = startWriter(db);

    // API load: A (free, over quota soon) and C (starter) call all the time, through both gateways
    const gatewayUrls = [`http://127.0.0.1:${gatewayPort}`, `http://127.0.0.1:${gatewayPort2}`];
    let turn = 0;
    const gatewayUrl = () => gatewayUrls[turn++ % 2]!;
    const tallies = { a: newTally(), b: newTally(), c: newTally() };
    loading = true;
    const loaders = [a, a, c, c].map(async (acct) => {
      const t = acct === a ? tallies.a : tallies.c;
      while (loading) {
        await apiCall(gatewayUrl(), acct.key, t);
        await sleep(20);
      }
    });

    /** ms until every service was ready: after the engine came back, or after the new process was up */
    const faults: Record<string, number> = {};
    const boots: Record<string, number> = {};
    /** the slowest service's time to /readyz 200 after the fault ended */
    const measure = async (fault: string, since: number) => {
      const r = await readiness(all(), since);
      faults[fault] = Math.max(...Object.values(r));
      if (faults[fault] > READY_LIMIT_MS) console.log(`after ${fault}: ${JSON.stringify(r)}`);
    };

    // steady state: hits are being delivered
    const deadline = Date.now() + 60_000;
    while (receiver.requests.length < 5 && Date.now() < deadline) await sleep(200);
    expect(receiver.requests.length).toBeGreaterThanOrEqual(5);
    mark('steady');

    await rabbit.restart();
    await measure('rabbitmq', Date.now());
    mark('rabbitmq');
    await pg.restart('immediate');
    await measure('postgres', Date.now());
    mark('postgres');

    // B to QUOTA - 20, then Redis loses every counter; B then asks for far more than 20
    while (tallies.b.ok < QUOTA - 20 && tallies.b.ok + tallies.b.other < QUOTA * 3)
      await apiCall(gatewayUrl(), b.key, tallies.b);
    const bBefore = { ...tallies.b };
    await redis.flushAndRestart();
    await measure('redis', Date.now());
    mark('redis');
    // (until it has been refused 20 times: while the gateway reconnects to Redis its calls get 503s)
    for (let round = 0; round < 40 && tallies.b.quota < 20; round++) {
      await Promise.all(Array.from({ length: 10 }, (_, i) => apiCall(gatewayUrls[i % 2]!, b.key, tallies.b)));
      await sleep(100);
    }

    for (const name of ['webhook-dispatcher', 'poller'] as const) {
      const old = services[name]!;
      old.proc.child.kill('SIGKILL');
      await old.proc.exited;
      // what Kubernetes does: a new process at once; measured from its ops server listening
      const fresh = await start(name);
      boots[name] = fresh.bootMs;
      await measure(`kill -9 ${name}`, Date.now());
      mark(`kill ${name}`);
    }

    // stop writing; the system drains
    await sleep(2000);
    const { written, failed: writeFailures } = await writer.stop();
    loading = false;
    await Promise.all(loaders);
    const expected = await expectedHits(db, monitors);
    const hits = await drain(db, receiver, expected);

    mark('drain');
    // the gateways write their pending usage when they stop
    await Promise.all([stopService(services.gateway), stopService(services['gateway-2'])]);
    const usage = async (accountId: string) =>
      (await db!.usageMonthly.findMany({ where: { accountId } })).reduce((n, r) => n + r.used, 0);
    const [usageA, usageB] = [await usage(a.accountId), await usage(b.accountId)];

    const got = deliveryKeys(receiver);
    const deliveries = receiver.requests.length;
    const undelivered = hits.filter((h) => !h.message_id || !got.has(h.message_id));
    const keys = new Set(hits.map((h) => `${h.monitor_id}:${h.tweet_id}`));
    const missing = [...expected].filter((k) => !keys.has(k));
    const unexpected = [...keys].filter((k) => !expected.has(k));
    console.log(
      `system fault test: tweets written=${written} (failed writes ${writeFailures}) | hits=${hits.length} expected=${expected.size} ` +
        `missing=${missing.length} unexpected=${unexpected.length} events/hit=${[...new Set(hits.map((h) => h.events))].join(',')} | ` +
        `delivered=${hits.length - undelivered.length}/${hits.length} webhook requests=${deliveries} | ` +
        `quota=${QUOTA}: A ${fmt(tallies.a)} usage=${usageA}; B ${fmt(tallies.b)} usage=${usageB} (before flush 2xx=${bBefore.ok}); ` +
        `C ${fmt(tallies.c)} | ready within: ${Object.entries(faults)
          .map(([f, ms]) => `${f} ${(ms / 1000).toFixed(1)}s`)
          .join(', ')} (after booting: ${Object.entries(boots)
          .map(([n, ms]) => `${n} ${(ms / 1000).toFixed(1)}s`)
          .join(', ')}) | time: ${timeline.join(', ')}`,
    );

    expect(missing).toEqual([]);
    expect(unexpected).toEqual([]);
    expect(hits.length).toBe(expected.size);
    expect(hits.filter((h) => h.events !== 1)).toEqual([]);
    expect(undelivered).toEqual([]);
    // the receiver saw each delivery's own hit
    for (const r of receiver.requests) {
      const hit = hits.find((h) => h.message_id === String(r.headers['x-service-delivery']));
      expect(hit).toBeDefined();
      expect((JSON.parse(r.rawBody.toString('utf8')) as { tweet: { id: string } }).tweet.id).toBe(hit!.tweet_id);
    }
    expect(tallies.a.ok).toBeLessThanOrEqual(QUOTA);
    expect(tallies.a.quota).toBeGreaterThan(0);
    expect(tallies.b.ok).toBeLessThanOrEqual(QUOTA);
    expect(bBefore.ok).toBe(QUOTA - 20);
    // and the rebuilt counter lost nothing either: B got its last 20 calls
    expect(tallies.b.ok).toBe(QUOTA);
    expect(tallies.b.quota).toBeGreaterThan(0);
    expect(usageA).toBeGreaterThanOrEqual(tallies.a.ok);
    expect(usageB).toBeGreaterThanOrEqual(tallies.b.ok);
    expect(usageA).toBeLessThanOrEqual(QUOTA);
    expect(usageB).toBeLessThanOrEqual(QUOTA);
    expect(tallies.c.ok).toBeGreaterThan(0);
    expect(Object.entries(faults).filter(([, ms]) => ms > READY_LIMIT_MS)).toEqual([]);
  });
});
