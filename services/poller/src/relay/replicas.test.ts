/**
 * Two outbox relays and two webhook dispatchers at once, on the real PostgreSQL and RabbitMQ:
 * the poller records hits and their events from real tweets, two
 * relays (this package's createOutboxRelay, each with its own connections) publish the outbox
 * while two dispatcher processes (services/webhook-dispatcher/src/main.ts, run by path: a test
 * here does not import that package) consume the shared queue and deliver to two local HTTPS
 * receivers (two endpoints).
 *
 * Asserted: every hit has exactly one event row; every event is published (at least once, always
 * with its row's message id) and marked published; every hit is delivered at least once, every
 * delivery carrying its hit's key (X-Service-Delivery = the event's message id) — nothing lost,
 * nothing delivered under another key; both relays and both dispatchers took part; and per
 * endpoint, deliveries in flight at once never exceeded 2 replicas × WEBHOOK_MAX_CONCURRENCY_PER_ENDPOINT
 * (the bound is per dispatcher process: webhook-dispatcher README, "Multi-replica").
 *
 * Run twice: steadily, and with relay 0 stopped after its first rows and dispatcher 0 killed
 * with SIGKILL while deliveries flow — the survivors publish and deliver everything (a delivery
 * the killed process sent but did not log is sent again under the same key).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { createLogger } from '@sts/common';
import { classifyWebhookUrl, createSecretBox, generateWebhookSecret } from '@sts/core';
import { createDbClient, type Db } from '@sts/db';
import { AmqpClient } from '@sts/messaging';
import { createLocalSource, createSocialTweet, createSocialUser } from '@sts/social';
import {
  createTestVhost,
  spawnService,
  startHttpsReceiver,
  waitFor,
  type HttpsReceiver,
  type ServiceProcess,
  openTestStore,
  type TestStore,
} from '@sts/testing';
import { createOutboxRelay, type OutboxRelay } from './relay';
import { scrape } from '../../test/scrape';
import { plans, testPoller } from '../../test/poller';

const logger = createLogger({ service: 'replicas-test', level: 'error' });
const KEY = randomBytes(32).toString('base64');
const PER_ENDPOINT = 2;
const DISPATCHERS = 2;
const TWEETS = 40;
const ANSWER_MS = 100;

/** sum of the samples of `name` whose labels contain `label` */
function sum(text: string, name: string, label: string): number {
  return text
    .split('\n')
    .filter((l) => l.startsWith(`${name}{`) && l.includes(label))
    .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
}

/** a receiver that answers after ANSWER_MS and records the most deliveries it held at once */
async function countingReceiver(): Promise<{ receiver: HttpsReceiver; maxInFlight: () => number }> {
  let inFlight = 0;
  let max = 0;
  const receiver = await startHttpsReceiver({
    handler: async () => {
      inFlight++;
      max = Math.max(max, inFlight);
      await new Promise((r) => setTimeout(r, ANSWER_MS));
      inFlight--;
      return { status: 200, body: '{"ok":true}' };
    },
  });
  return { receiver, maxInFlight: () => max };
}

describe.each([
  ['running steadily', false],
  ['with one relay stopped and one dispatcher killed (SIGKILL) mid-flow', true],
])('two outbox relays and two dispatchers at once, %s', (_name, crash) => {
  let bed: TestStore;
  let db: Db;
  let redis: Redis;
  let amqpUrl: string;
  const clients: AmqpClient[] = [];
  const relays: OutboxRelay[] = [];
  const relayDbs: Db[] = [];
  const dispatchers: ServiceProcess[] = [];
  const receivers: HttpsReceiver[] = [];

  beforeAll(async () => {
    bed = await openTestStore({ poolSize: 4 });
    ({ db, redis } = bed);
    amqpUrl = (await createTestVhost()).url;
  });

  afterAll(async () => {
    for (const r of relays) await r.stop().catch(() => undefined);
    for (const d of dispatchers) d.child.kill('SIGTERM');
    await Promise.all(dispatchers.map((d) => d.exited));
    for (const c of clients) await c.stop().catch(() => undefined);
    for (const r of receivers) await r.close();
    for (const d of relayDbs) await d.$disconnect();
    await bed.close();
  });

  it('publishes every hit (same key on duplicates), delivers each with its key, bounds each endpoint', async () => {
    const endpoints = [await countingReceiver(), await countingReceiver()];
    receivers.push(...endpoints.map((e) => e.receiver));
    // four monitors on one target, two per endpoint
    const box = createSecretBox(KEY);
    const account = await db.account.create({ data: { email: 'replicas@example.com', plan: 'starter' } });
    await createSocialUser(db, { username: 'launchpad', name: 'Launch Pad' });
    const monitorEndpoint = new Map<string, number>();
    for (let i = 0; i < 4; i++) {
      const hook = classifyWebhookUrl(`${endpoints[i % 2]!.receiver.url}/hook/${i}`);
      const id = randomUUID();
      const m = await db.monitor.create({
        data: {
          id,
          accountId: account.id,
          targetUsername: 'LaunchPad',
          targetKey: 'launchpad',
          keywords: ['launch'],
          webhook: {
            create: { url: hook.url, kind: hook.kind, secretCiphertext: box.encrypt(generateWebhookSecret(), id) },
          },
        },
      });
      monitorEndpoint.set(m.id, i % 2);
    }

    // an observer queue bound to monitor.hit sees every publish of every relay
    const observer = new AmqpClient({ url: amqpUrl, logger, name: 'replicas-observer' });
    clients.push(observer);
    await observer.start();
    const published = new Map<string, number>();
    await observer.consume({
      queue: 'replicas-observer',
      bindings: ['monitor.hit'],
      handler: (e) => {
        published.set(e.messageId, (published.get(e.messageId) ?? 0) + 1);
        return Promise.resolve('ack' as const);
      },
    });

    for (let i = 0; i < DISPATCHERS; i++) {
      const d = spawnService('services/webhook-dispatcher/src/main.ts', {
        DATABASE_URL: bed.dbUrl,
        AMQP_URL: amqpUrl,
        SECRETS_ENCRYPTION_KEY: KEY,
        WEBHOOK_ALLOW_PRIVATE_HOSTS: 'localhost',
        WEBHOOK_MAX_CONCURRENCY_PER_ENDPOINT: String(PER_ENDPOINT),
        DISPATCH_DEFER_MS: '300',
        LOG_LEVEL: 'error',
        // spawnService passes only what it is given: the test CA the receivers' certificates chain to
        NODE_EXTRA_CA_CERTS: process.env.NODE_EXTRA_CA_CERTS ?? '',
      });
      dispatchers.push(d);
    }
    const opsPorts = await Promise.all(
      dispatchers.map(
        async (d) =>
          (JSON.parse(await d.waitForLine(/webhook-dispatcher started/, 60_000)) as { opsPort: number }).opsPort,
      ),
    );

    // two relays, each with its own PostgreSQL pool, LISTEN connection and RabbitMQ connection
    const perRelay = [0, 0];
    for (let i = 0; i < 2; i++) {
      const publisher = new AmqpClient({ url: amqpUrl, logger, name: `relay-${i}` });
      clients.push(publisher);
      await publisher.start();
      const relayDb = createDbClient({ url: bed.dbUrl, poolSize: 3 });
      relayDbs.push(relayDb);
      const relay = createOutboxRelay({
        db: relayDb,
        publisher,
        logger,
        databaseUrl: bed.dbDirectUrl,
        batchSize: 5,
        onPublished: (n) => (perRelay[i]! += n),
      });
      relays.push(relay);
      await relay.start();
    }

    // the hits: real tweets, read by the poller, written with their events in page transactions
    for (let i = 0; i < TWEETS; i++) await createSocialTweet(db, { authorUsername: 'launchpad', text: `launch ${i}` });
    const poller = testPoller(
      { db, redis },
      {
        source: createLocalSource({ db }),
        logger,
        intervals: { plans, overrideSec: 1 },
        batchSize: 10,
      },
    );
    const cycle = await poller.runCycle({ force: true });
    expect(cycle.hits).toBe(TWEETS * 4);
    const delivered = () => endpoints.flatMap((e) => e.receiver.requests);
    if (crash) {
      // relay 0 stops after its first rows (relay 1 publishes the rest); dispatcher 0 dies with
      // deliveries in flight (the broker gives its unacknowledged messages to dispatcher 1)
      await waitFor(() => perRelay[0]! > 0, 30_000);
      await relays[0]!.stop();
      await waitFor(() => delivered().length >= 20, 60_000);
      dispatchers[0]!.child.kill('SIGKILL');
      await dispatchers[0]!.exited;
    }

    const hits = await db.hit.findMany({ select: { id: true, monitorId: true, tweetId: true } });
    expect(hits).toHaveLength(TWEETS * 4);
    const events = await db.outboxEvent.findMany({ select: { messageId: true, headers: true } });
    // one event per hit
    const keyOfHit = new Map(events.map((e) => [(e.headers as { hitId: string }).hitId, e.messageId]));
    expect(keyOfHit.size).toBe(hits.length);
    for (const h of hits) expect(keyOfHit.get(h.id)).toEqual(expect.any(String));
    const keyOf = new Map(hits.map((h) => [`${h.monitorId}:${h.tweetId}`, keyOfHit.get(h.id)!]));
    const keys = new Set(keyOf.values());

    // every event published and marked; every hit delivered
    await waitFor(async () => (await db.outboxEvent.count({ where: { publishedAt: null } })) === 0, 60_000);
    await waitFor(() => [...keys].every((k) => published.has(k)), 30_000);
    try {
      await waitFor(() => new Set(delivered().map((r) => r.headers['x-service-delivery'])).size >= keys.size, 60_000);
    } catch (err) {
      const attempts = await db.deliveryAttempt.groupBy({ by: ['outcome', 'error'], _count: true });
      process.stderr.write(
        `deliveries missing: ${delivered().length} requests; attempts ${JSON.stringify(attempts)}\n${dispatchers.map((d) => d.lines.slice(-5).join('\n')).join('\n---\n')}\n`,
      );
      throw err;
    }

    // published: only known keys, each at least once
    expect([...published.keys()].filter((k) => !keys.has(k))).toEqual([]);
    expect(perRelay[0]! + perRelay[1]!).toBeGreaterThanOrEqual(keys.size);
    // both relays took part (rows are claimed 5 at a time with SKIP LOCKED, both woken by NOTIFY)
    expect(perRelay[0]).toBeGreaterThan(0);
    if (!crash) expect(perRelay[1]).toBeGreaterThan(0);

    // delivered: each hit under its own key, at the endpoint of its monitor
    const deliveriesOf = new Map<string, number>();
    for (const [i, e] of endpoints.entries())
      for (const r of e.receiver.requests) {
        const key = r.headers['x-service-delivery'] as string;
        const body = JSON.parse(r.rawBody.toString()) as { monitor: { id: string }; tweet: { id: string } };
        expect(keyOf.get(`${body.monitor.id}:${body.tweet.id}`)).toBe(key);
        expect(monitorEndpoint.get(body.monitor.id)).toBe(i);
        deliveriesOf.set(key, (deliveriesOf.get(key) ?? 0) + 1);
      }
    expect([...keys].filter((k) => !deliveriesOf.has(k))).toEqual([]);
    // and logged as delivered
    await waitFor(
      async () => (await db.deliveryAttempt.count({ where: { outcome: 'delivered' } })) >= keys.size,
      30_000,
    );

    // both dispatchers delivered; per endpoint at most replicas × the per-process bound at once
    const texts = await Promise.all((crash ? opsPorts.slice(1) : opsPorts).map((p) => scrape(p)));
    const byReplica = texts.map((t) => sum(t, 'webhook_delivery_attempts_total', 'outcome="delivered"'));
    expect(byReplica.every((n) => n > 0)).toBe(true);
    for (const e of endpoints) expect(e.maxInFlight()).toBeLessThanOrEqual(DISPATCHERS * PER_ENDPOINT);
    const duplicates = [...deliveriesOf.values()].filter((n) => n > 1).length;
    const republished = [...published.values()].filter((n) => n > 1).length;
    process.stdout.write(
      `replicas${crash ? ' (relay 0 stopped, dispatcher 0 killed; survivor counts only)' : ''}: ${keys.size} hits; relays published ${perRelay.join(' + ')} (${republished} keys more than once); ` +
        `dispatchers delivered ${byReplica.join(' + ')} (${duplicates} keys more than once); ` +
        `most in flight per endpoint ${endpoints.map((e) => e.maxInFlight()).join(', ')} (bound ${DISPATCHERS} × ${PER_ENDPOINT})\n`,
    );
  }, 240_000);
});
