/**
 * Fair delivery on the real broker: one customer's dead or slow endpoint with hundreds of
 * queued hits must not delay another customer's test ping or live hit (the backed-up messages are
 * parked, freeing the prefetch), and Discord's rate limit is honoured (paced, 429 waited out).
 * The dispatcher runs in this process, consuming from its own vhost, with production limits
 * (prefetch 256, 8 per endpoint, 15 s time-out).
 */
import { randomUUID } from 'node:crypto';
import { createLogger } from '@sts/common';
import { AmqpClient, monitorTestPayload } from '@sts/messaging';
import {
  createAccount,
  createHit,
  createMonitor,
  type HitFixture,
  type HttpsReceiver,
  type MonitorFixture,
  startHttpsReceiver,
  waitFor,
} from '@sts/testing';
import { createDispatcher, type Dispatcher } from './app';
import { createPrismaRepository } from './adapters/repository';
import { openBrokerBed, type BrokerBed } from '../test/brokerBed';

const logger = createLogger({ service: 'dispatcher-fairness-test', level: 'error' });

describe('fair delivery', () => {
  let bed: BrokerBed;
  let consumer: AmqpClient;
  let dispatcher: Dispatcher;
  let healthy: HttpsReceiver;
  let discord: HttpsReceiver;
  const extra: HttpsReceiver[] = [];

  beforeAll(async () => {
    bed = await openBrokerBed({ poolSize: 6, logger, name: 'fairness-publisher' });
    healthy = await startHttpsReceiver();
    discord = await startHttpsReceiver();
    consumer = new AmqpClient({ url: bed.amqpUrl, logger, name: 'fairness-dispatcher' });
    await consumer.start();
    dispatcher = createDispatcher({
      repository: createPrismaRepository(bed.db),
      messaging: consumer,
      logger,
      secretsKey: bed.key,
      allowPrivateHosts: ['localhost'],
      amqpUrl: bed.amqpUrl,
      deferMs: 2000,
      shutdownGraceMs: 500,
      senderOverrides: {
        urlOverride: (url) => (url.hostname === 'discord.com' ? new URL(`${discord.url}${url.pathname}`) : url),
      },
    });
    await dispatcher.start();
  });

  afterAll(async () => {
    await Promise.all([dispatcher.stop(), consumer.stop()]);
    dispatcher.close();
    for (const r of [healthy, discord, ...extra]) await r.close();
    await bed.close();
  });

  const publishHit = (m: MonitorFixture, hit: HitFixture): Promise<string> => bed.publishHit(m, hit);

  async function publishTest(m: MonitorFixture): Promise<string> {
    const messageId = randomUUID();
    await bed.publisher.publish(
      'monitor.test',
      monitorTestPayload({ id: m.id, targetUsername: m.targetUsername, query: null, keywords: null }),
      { messageId, headers: { accountId: m.accountId } },
    );
    return messageId;
  }

  /** 400 hits queued to `stuck`, then a test ping and a live hit of another account to `healthy` */
  async function isolationScenario(stuck: HttpsReceiver): Promise<{ ping: number; live: number }> {
    const stuckAccount = await createAccount(bed.db, 'starter');
    const stuckMonitor = await createMonitor(bed.db, bed.box, { accountId: stuckAccount.id, url: `${stuck.url}/hook` });
    const hits: HitFixture[] = [];
    for (let i = 0; i < 400; i++) hits.push(await createHit(bed.db, stuckMonitor, `backlog ${i} #launch`));
    await Promise.all(hits.map((h) => publishHit(stuckMonitor, h)));
    // the stuck endpoint has its 8 deliveries in flight: the prefetch is full of its messages
    await stuck.waitForRequests(8, 30_000);

    const other = await createAccount(bed.db, 'starter');
    const monitor = await createMonitor(bed.db, bed.box, { accountId: other.id, url: `${healthy.url}/other` });
    const hit = await createHit(bed.db, monitor);
    healthy.requests.length = 0;
    const published = Date.now();
    const [pingId, liveId] = await Promise.all([publishTest(monitor), publishHit(monitor, hit)]);
    await healthy.waitForRequests(2, 60_000);
    const at = (id: string) => healthy.requests.find((r) => r.headers['x-service-delivery'] === id)!.receivedAt;
    return { ping: at(pingId) - published, live: at(liveId) - published };
  }

  it('a test ping and a live hit arrive within 5 s while a dead endpoint (TLS up, never answers) has 400 queued', async () => {
    const dead = await startHttpsReceiver({ handler: () => ({ status: 200, delayMs: 3_600_000 }) });
    extra.push(dead);
    const { ping, live } = await isolationScenario(dead);
    expect(ping).toBeLessThan(5000);
    expect(live).toBeLessThan(5000);
  });

  it('the same with a slow endpoint (answers after 10 s)', async () => {
    const slow = await startHttpsReceiver({ handler: () => ({ status: 200, delayMs: 10_000 }) });
    extra.push(slow);
    const { ping, live } = await isolationScenario(slow);
    expect(ping).toBeLessThan(5000);
    expect(live).toBeLessThan(5000);
  });

  it('paces a Discord webhook limited to 5 per 2 s: 12 hits at once are all delivered, each attempt logged', async () => {
    // a Discord-style limiter: 5 requests per sliding 2 s per webhook, 429 with a fractional
    // retry_after in the JSON body (and the header rounded up, as Discord does)
    const sent: number[] = [];
    discord.setResponder(() => {
      const now = Date.now();
      const recent = sent.filter((t) => t > now - 2000);
      if (recent.length >= 5) {
        const retryAfter = (recent[0]! + 2000 - now) / 1000;
        return {
          status: 429,
          headers: { 'retry-after': String(Math.ceil(retryAfter)) },
          body: JSON.stringify({ message: 'You are being rate limited.', retry_after: retryAfter, global: false }),
        };
      }
      sent.push(now);
      return { status: 204 };
    });
    const account = await createAccount(bed.db, 'starter');
    const monitor = await createMonitor(bed.db, bed.box, {
      accountId: account.id,
      url: 'https://discord.com/api/webhooks/5552000/Paced-Token',
    });
    const hits: HitFixture[] = [];
    for (let i = 0; i < 12; i++) hits.push(await createHit(bed.db, monitor, `paced ${i}`));
    const ids = await Promise.all(hits.map((h) => publishHit(monitor, h)));

    // meanwhile another endpoint is not held up by the waiting Discord deliveries
    const other = await createMonitor(bed.db, bed.box, { accountId: account.id, url: `${healthy.url}/during-pacing` });
    healthy.requests.length = 0;
    const liveId = await publishHit(other, await createHit(bed.db, other));
    await waitFor(() => healthy.requests.some((r) => r.headers['x-service-delivery'] === liveId), 5000);

    const delivered = async () =>
      bed.db.deliveryAttempt.findMany({ where: { deliveryId: { in: ids }, outcome: 'delivered' } });
    await waitFor(async () => (await delivered()).length >= 12, 60_000);
    expect(new Set((await delivered()).map((a) => a.deliveryId))).toEqual(new Set(ids));
    // every request the receiver got is one logged attempt; the extra ones are logged 429s
    const rows = await bed.db.deliveryAttempt.findMany({ where: { deliveryId: { in: ids } } });
    const requests = discord.requests.filter((r) => ids.includes(String(r.headers['x-service-delivery'])));
    expect(rows).toHaveLength(requests.length);
    // the sixth request inside the first 2 s was refused: the 429 path ran and was logged
    expect(rows.length).toBeGreaterThan(12);
    for (const r of rows.filter((a) => a.outcome !== 'delivered')) {
      expect(r).toMatchObject({ outcome: 'failed', statusCode: 429 });
      expect(r.error).toMatch(/^Discord answered HTTP 429 \(rate limited\); sending again in /);
    }
  });
});
