/**
 * The dispatcher as deployed: `node --import tsx src/main.ts` in a child process, consuming from
 * a real RabbitMQ vhost, logging to a real PostgreSQL database, delivering to a real HTTPS
 * receiver. Crash (SIGKILL) and graceful stop (SIGTERM) are real signals.
 */
import { randomBytes } from 'node:crypto';
import { createLogger } from '@sts/common';
import { connect } from 'amqplib';
import { AmqpClient, DEAD_LETTER_EXCHANGE, type Envelope } from '@sts/messaging';
import { verify } from '@sts/signing';
import {
  createAccount,
  createHit,
  createMonitor,
  type HitFixture,
  type HttpsReceiver,
  type MonitorFixture,
  type ServiceProcess,
  spawnService,
  startHttpsReceiver,
  waitFor,
} from '@sts/testing';
import { opsPort, spawnDispatcher } from '../test/dispatcher';
import { openBrokerBed, type BrokerBed } from '../test/brokerBed';

const logger = createLogger({ service: 'dispatcher-main-test', level: 'error' });

describe('webhook-dispatcher process', () => {
  let bed: BrokerBed;
  let receiver: HttpsReceiver;
  let monitor: MonitorFixture;
  const running: ServiceProcess[] = [];

  const env = () => bed.dispatcherEnv();

  async function start(): Promise<ServiceProcess> {
    const p = await spawnDispatcher(env());
    running.push(p);
    return p;
  }

  const publishHit = (hit: HitFixture, m: MonitorFixture = monitor): Promise<string> => bed.publishHit(m, hit);

  beforeAll(async () => {
    bed = await openBrokerBed({ poolSize: 4, logger, name: 'test-publisher' });
    receiver = await startHttpsReceiver();
    const account = await createAccount(bed.db, 'starter');
    monitor = await createMonitor(bed.db, bed.box, { accountId: account.id, url: `${receiver.url}/hook` });
  });

  afterEach(async () => {
    for (const p of running.splice(0)) {
      if (p.child.exitCode === null && p.child.signalCode === null) {
        p.child.kill('SIGKILL');
        await p.exited;
      }
    }
    receiver.requests.length = 0;
    receiver.setResponder(() => ({ status: 200 }));
  });

  afterAll(async () => {
    await receiver.close();
    await bed.close();
  });

  it('refuses to start with a clear message when SECRETS_ENCRYPTION_KEY is missing', async () => {
    const p = spawnService('services/webhook-dispatcher/src/main.ts', {
      ...env(),
      SECRETS_ENCRYPTION_KEY: '',
      WEBHOOK_TIMEOUT_MS: 'soon',
      DATABASE_DIRECT_URL: 'mysql://127.0.0.1/sts',
      DISPATCH_CONTEXT_CACHE_MS: '-1',
      DISPATCH_RECORD_LINGER_MS: '5000',
    });
    expect(await p.exited).toBe(2); // a configuration error, as in every service (runService)
    const out = p.lines.join('\n');
    expect(out).toContain('SECRETS_ENCRYPTION_KEY is required but not set');
    expect(out).toMatch(/WEBHOOK_TIMEOUT_MS: /);
    expect(out).toMatch(/DATABASE_DIRECT_URL: /);
    expect(out).toMatch(/DISPATCH_CONTEXT_CACHE_MS: /);
    expect(out).toMatch(/DISPATCH_RECORD_LINGER_MS: /);
    expect(out).not.toMatch(/\n\s+at /); // no stack trace
  });

  it('delivers published hits, answers /healthz, /readyz and /metrics, and stops gracefully', async () => {
    const p = await start();
    const port = opsPort(p);
    const hit = await createHit(bed.db, monitor);
    const messageId = await publishHit(hit);
    await receiver.waitForRequests(1);
    const req = receiver.requests[0]!;
    expect(req.headers['x-service-delivery']).toBe(messageId);
    expect(() => verify({ secret: monitor.secret!, body: req.rawBody, headers: req.headers })).not.toThrow();

    const health = await fetch(`http://127.0.0.1:${port}/healthz`);
    expect(health.status).toBe(200);
    const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({
      status: 'ok',
      checks: { database: 'ok', rabbitmq: 'ok', secrets: 'ok', migrations: 'ok' },
    });
    await waitFor(async () => {
      const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      return /webhook_delivery_attempts_total\{[^}]*outcome="delivered"[^}]*\} 1/.test(metrics);
    });
    // the DLQ depth, read from the broker at scrape time (alert DeadLetterQueueNotEmpty)
    const dlqLine = async () =>
      /webhook_dispatcher_dlq_messages\{[^}]*queue="webhook-dispatcher\.dlq"[^}]*\} (\d+)/.exec(
        await (await fetch(`http://127.0.0.1:${port}/metrics`)).text(),
      )?.[1];
    expect(await dlqLine()).toBe('0');
    const raw = await connect(bed.amqpUrl);
    const ch = await raw.createConfirmChannel();
    ch.publish(DEAD_LETTER_EXCHANGE, 'webhook-dispatcher', Buffer.from('{}'), { messageId: 'dead-1' });
    await ch.waitForConfirms();
    await raw.close();
    await waitFor(async () => (await dlqLine()) === '1');

    // SIGTERM while a delivery is in flight: it finishes, is logged, then the process exits 0
    receiver.setResponder(() => ({ status: 200, delayMs: 1500 }));
    const slow = await createHit(bed.db, monitor);
    const slowId = await publishHit(slow);
    await receiver.waitForRequests(2);
    p.child.kill('SIGTERM');
    expect(await p.exited).toBe(0);
    const rows = await bed.db.deliveryAttempt.findMany({ where: { deliveryId: slowId } });
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ outcome: 'delivered', statusCode: 200 });
    expect(rows[0]!.latencyMs).toBeGreaterThanOrEqual(1400);
    expect(p.lines.some((l) => l.includes('webhook-dispatcher stopped'))).toBe(true);
  });

  it('serves a monitor that fires again from memory; a change, once announced, reaches the next delivery', async () => {
    const p = await start();
    const metric = async (name: string, labels = '') =>
      Number(
        new RegExp(`${name}(?:\\{[^}]*${labels}[^}]*\\})? (\\d+)`).exec(
          await (await fetch(`http://127.0.0.1:${opsPort(p)}/metrics`)).text(),
        )?.[1] ?? 0,
      );
    const account = await createAccount(bed.db, 'starter');
    const m = await createMonitor(bed.db, bed.box, { accountId: account.id, url: `${receiver.url}/v0` });
    // each round: two hits (the second finds the monitor in memory), then the URL moves and the
    // next hit is published once the dispatcher heard PostgreSQL announce the change. (Nothing
    // orders an announcement against a message published by another process: README, "Monitor cache".)
    const rounds = 10;
    for (let i = 0; i < rounds; i++) {
      for (let j = 1; j <= 2; j++) {
        await publishHit(await createHit(bed.db, m), m);
        await receiver.waitForRequests(2 * i + j);
        expect(receiver.requests[2 * i + j - 1]!.path).toBe(`/v${i}`);
      }
      const heard = await metric('webhook_dispatcher_monitor_announcements_total');
      await bed.db.webhookEndpoint.update({ where: { monitorId: m.id }, data: { url: `${receiver.url}/v${i + 1}` } });
      await waitFor(async () => (await metric('webhook_dispatcher_monitor_announcements_total')) > heard);
    }
    expect(await metric('webhook_dispatcher_monitor_lookups_total', 'result="hit"')).toBeGreaterThanOrEqual(rounds / 2);
    // every delivery recorded (and so acknowledged) before the process is killed: none is left
    // for the next test's dispatcher
    await waitFor(async () => (await bed.db.deliveryAttempt.count({ where: { monitorId: m.id } })) === 2 * rounds);
  });

  it('SIGTERM drains for at most DISPATCH_SHUTDOWN_GRACE_MS; an unfinished delivery is left for another replica, unlogged', async () => {
    receiver.setResponder(() => ({ status: 200, delayMs: 60_000 }));
    const p = await spawnDispatcher({ ...env(), DISPATCH_SHUTDOWN_GRACE_MS: '1500' });
    running.push(p);
    const hit = await createHit(bed.db, monitor);
    const id = await publishHit(hit);
    await receiver.waitForRequests(1, 30_000);
    const signalled = Date.now();
    p.child.kill('SIGTERM');
    expect(await p.exited).toBe(0);
    // the receiver would have answered after 60 s; the process left after the 1.5 s grace
    expect(Date.now() - signalled).toBeLessThan(15_000);
    expect(p.lines.some((l) => l.includes('left for another replica'))).toBe(true);
    expect(await bed.db.deliveryAttempt.count({ where: { deliveryId: id } })).toBe(0);

    // another replica takes it: sent again with the same delivery id, logged once
    receiver.setResponder(() => ({ status: 200 }));
    await start();
    await receiver.waitForRequests(2, 30_000);
    expect(receiver.requests.map((r) => r.headers['x-service-delivery'])).toEqual([id, id]);
    await waitFor(async () => (await bed.db.deliveryAttempt.count({ where: { deliveryId: id } })) === 1, 30_000);
    expect(await bed.db.deliveryAttempt.findFirst({ where: { deliveryId: id } })).toMatchObject({
      outcome: 'delivered',
    });
  });

  it('fails closed when the stored secrets cannot be decrypted: not ready, one error, messages stay queued', async () => {
    const wrong = await spawnDispatcher({ ...env(), SECRETS_ENCRYPTION_KEY: randomBytes(32).toString('base64') });
    running.push(wrong);
    const port = opsPort(wrong);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push(await publishHit(await createHit(bed.db, monitor)));
    await waitFor(() => wrong.lines.some((l) => l.includes('failed closed')), 30_000);
    const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
    expect(ready.status).toBe(503);
    // the body says ok/failed per dependency only; the reason is in the one error line
    expect(((await ready.json()) as { checks: Record<string, string> }).checks.secrets).toBe('failed');
    expect(wrong.lines.find((l) => l.includes('failed closed'))).toMatch(/SECRETS_ENCRYPTION_KEY/);
    await new Promise((r) => setTimeout(r, 1000));
    expect(wrong.lines.filter((l) => l.includes('failed closed'))).toHaveLength(1);
    expect(receiver.requests).toHaveLength(0);
    expect(await bed.db.deliveryAttempt.count({ where: { deliveryId: { in: ids } } })).toBe(0);

    // the messages were handed back, not dead-lettered: a replica with the right key delivers them all
    await start();
    await waitFor(() => receiver.requests.length >= 3, 30_000);
    expect(new Set(receiver.requests.map((r) => r.headers['x-service-delivery']))).toEqual(new Set(ids));
  });

  it('loses no hit when killed (SIGKILL) mid-stream and restarted', async () => {
    // slow enough that the kill lands while deliveries are in flight and messages are queued
    receiver.setResponder(() => ({ status: 200, delayMs: 5 }));
    const first = await start();
    const hits: HitFixture[] = [];
    for (let i = 0; i < 200; i++) hits.push(await createHit(bed.db, monitor, `hit ${i} #launch`));
    const published = new Set<string>();
    const publishing = (async () => {
      for (const h of hits) {
        published.add(await publishHit(h));
        await new Promise((r) => setTimeout(r, 2));
      }
    })();
    await waitFor(() => receiver.requests.length >= 40, 30_000, 5);
    first.child.kill('SIGKILL');
    expect(await first.exited).toBe('SIGKILL');
    const deliveredBeforeRestart = new Set(receiver.requests.map((r) => String(r.headers['x-service-delivery'])));
    expect(deliveredBeforeRestart.size).toBeLessThan(200);

    await start();
    await publishing;
    const received = () => new Set(receiver.requests.map((r) => String(r.headers['x-service-delivery'])));
    await waitFor(() => received().size >= published.size, 60_000);
    expect(published.size).toBe(200);
    expect(received()).toEqual(published);
    // every hit has a delivered attempt in the log
    await bed.allDelivered(published, 30_000);
  });

  it('lets other services bind their own queue and receive the same hits', async () => {
    await start();
    const other = new AmqpClient({ url: bed.amqpUrl, logger, name: 'analytics-test' });
    await other.start();
    const seen: Envelope<'monitor.hit'>[] = [];
    try {
      await other.consume({
        queue: 'analytics-test',
        bindings: ['monitor.hit'],
        prefetch: 10,
        handler: async (e) => {
          seen.push(e);
          return Promise.resolve('ack' as const);
        },
      });
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) ids.push(await publishHit(await createHit(bed.db, monitor)));
      await waitFor(() => seen.length >= 5 && receiver.requests.length >= 5);
      expect(seen.map((e) => e.messageId).sort()).toEqual([...ids].sort());
      expect(seen[0]!.headers).toMatchObject({ accountId: monitor.accountId });
      expect(new Set(receiver.requests.map((r) => r.headers['x-service-delivery']))).toEqual(new Set(ids));
    } finally {
      await other.stop();
    }
  });

  it('a retry due while the dispatcher is down goes out once it is back, once', async () => {
    const m = await createMonitor(bed.db, bed.box, { accountId: monitor.accountId, url: `${receiver.url}/retry` });
    await bed.db.webhookEndpoint.update({ where: { monitorId: m.id }, data: { retryPolicy: 'standard' } });
    receiver.setResponder((req) => ({ status: req.path === '/retry' ? 503 : 200 }));
    const quick = { ...env(), DISPATCH_DUE_POLL_MS: '200' };
    const first = await spawnDispatcher(quick);
    running.push(first);
    const id = await publishHit(await createHit(bed.db, m), m);
    const due = () => bed.db.webhookDeliveryDue.count({ where: { deliveryId: id } });
    await waitFor(async () => (await due()) === 1, 30_000);
    first.child.kill('SIGKILL');
    await first.exited;

    // the retry falls due while no dispatcher runs; the receiver is back meanwhile
    await bed.db.webhookDeliveryDue.update({
      where: { deliveryId: id },
      data: { dueAt: new Date(Date.now() - 60_000) },
    });
    receiver.setResponder(() => ({ status: 200 }));
    running.push(await spawnDispatcher(quick));
    await waitFor(async () => (await due()) === 0, 30_000);
    // a few more polls: nothing goes again
    await new Promise((r) => setTimeout(r, 1000));
    const sent = receiver.requests.filter((r) => r.headers['x-service-delivery'] === id);
    expect(sent.map((r) => r.headers['webhook-id'])).toEqual([id, id]);
    const logged = await bed.db.deliveryAttempt.findMany({ where: { deliveryId: id }, orderBy: { attempt: 'asc' } });
    expect(logged.map((a) => [a.attempt, a.outcome])).toEqual([
      [1, 'failed'],
      [2, 'delivered'],
    ]);
  });
});
