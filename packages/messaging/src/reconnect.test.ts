/**
 * Broker connection loss. The client runs through a TCP proxy that the test cuts (and a test
 * force-closes the client's connection through the management API); the shared RabbitMQ server
 * itself is never restarted.
 */
import {
  capturingLogger,
  closeConnectionsNamed,
  createTestVhost,
  rawChannel,
  TcpProxy,
  turns,
  waitFor,
} from '@sts/testing';
import { AmqpClient, PublishError } from './client';
import { type Envelope } from './contracts';
import { hitPayload } from '../test/payloads';

let vhost: { url: string; vhost: string };
let proxy: TcpProxy;
let raw: Awaited<ReturnType<typeof rawChannel>>;
const clients: AmqpClient[] = [];

beforeAll(async () => {
  vhost = await createTestVhost();
  proxy = TcpProxy.forAmqpUrl(vhost.url);
  await proxy.listen();
  raw = await rawChannel(vhost.url);
});

afterEach(async () => {
  proxy.restore();
  await Promise.all(clients.splice(0).map((c) => c.stop()));
});

afterAll(async () => {
  await raw?.close();
  await proxy?.close();
});

function proxiedClient(name: string, extra: { publishTimeoutMs?: number; closeTimeoutMs?: number } = {}) {
  const log = capturingLogger(name);
  const client = new AmqpClient({
    url: proxy.urlFor(vhost.url),
    logger: log.logger,
    name,
    reconnectDelayMs: { initial: 50, max: 400 },
    ...extra,
  });
  clients.push(client);
  return { client, log };
}

const headersFor = (id: string) => ({ accountId: 'acc', hitId: id });

describe('AmqpClient reconnect', () => {
  it('reconnects after a cut, resumes consuming, and loses none of the messages published before, during and after', async () => {
    const { client, log } = proxiedClient('rc-main');
    await client.start();
    const received: { id: string; redelivered: boolean }[] = [];
    await client.consume({
      queue: 'rc.main',
      bindings: ['monitor.hit'],
      prefetch: 5,
      handler: (env) => {
        received.push({ id: env.messageId, redelivered: env.redelivered });
        return Promise.resolve('ack');
      },
    });
    const ids = (p: string) => Array.from({ length: 10 }, (_, i) => `${p}-${i}`);
    for (const id of ids('before'))
      await client.publish('monitor.hit', hitPayload(), { messageId: id, headers: headersFor(id) });

    proxy.cut();
    await waitFor(() => !client.isConnected());
    await expect(client.check()).rejects.toThrow(/not connected/);
    let settled = 0;
    const during = ids('during').map((id) =>
      client.publish('monitor.hit', hitPayload(), { messageId: id, headers: headersFor(id) }).finally(() => settled++),
    );
    await turns(20);
    expect(settled).toBe(0); // waiting for the broker, neither resolved falsely nor failed at once
    proxy.restore();
    await Promise.all(during);
    expect(client.connectCount).toBe(2);
    for (const id of ids('after'))
      await client.publish('monitor.hit', hitPayload(), { messageId: id, headers: headersFor(id) });

    const all = [...ids('before'), ...ids('during'), ...ids('after')];
    await waitFor(() => all.every((id) => received.some((r) => r.id === id)));
    for (const id of all) {
      const deliveries = received.filter((r) => r.id === id);
      // duplicates only as broker redeliveries
      expect(deliveries.slice(1).every((d) => d.redelivered)).toBe(true);
    }
    expect(received.every((r) => all.includes(r.id))).toBe(true);
    await waitFor(async () => (await raw.ch.checkQueue('rc.main')).messageCount === 0);
    expect(log.lines().some((l) => l.message === 'amqp connection lost, reconnecting')).toBe(true);
  });

  it('reconnects after the broker force-closes its connection (management API)', async () => {
    const name = 'rc-mgmt';
    const log = capturingLogger(name);
    // direct to the broker, no proxy
    const client = new AmqpClient({
      url: vhost.url,
      logger: log.logger,
      name,
      reconnectDelayMs: { initial: 50, max: 400 },
    });
    clients.push(client);
    await client.start();
    const received: string[] = [];
    await client.consume({
      queue: 'rc.mgmt',
      bindings: ['monitor.hit'],
      handler: (env) => {
        received.push(env.messageId);
        return Promise.resolve('ack');
      },
    });
    await client.publish('monitor.hit', hitPayload(), { messageId: 'm-before', headers: headersFor('m-before') });
    // the management API lists a new connection once its stats have been collected
    await waitFor(() => closeConnectionsNamed(vhost.vhost, name), 30_000, 250);
    await waitFor(() => client.connectCount === 2 && client.isConnected());
    await client.publish('monitor.hit', hitPayload(), { messageId: 'm-after', headers: headersFor('m-after') });
    await waitFor(() => received.includes('m-before') && received.includes('m-after'));
    expect(
      log
        .lines()
        .some((l) => l.message === 'amqp connection lost, reconnecting' && String(l.err).includes('CONNECTION_FORCED')),
    ).toBe(true);
  });

  it('drops the delivery tags of the old channel: a handler finishing after the reconnect does not ack on the new one', async () => {
    const { client, log } = proxiedClient('rc-stale');
    await client.start();
    let releaseFirst!: () => void;
    const firstGate = new Promise<void>((r) => (releaseFirst = r));
    let firstStarted!: () => void;
    const firstStartedP = new Promise<void>((r) => (firstStarted = r));
    let firstDone!: () => void;
    const firstDoneP = new Promise<void>((r) => (firstDone = r));
    const calls: Pick<Envelope<'monitor.hit'>, 'messageId' | 'redelivered'>[] = [];
    await client.consume({
      queue: 'rc.stale',
      bindings: ['monitor.hit'],
      handler: async (env) => {
        calls.push({ messageId: env.messageId, redelivered: env.redelivered });
        if (env.messageId === 'stale-1' && !env.redelivered) {
          firstStarted();
          await firstGate;
          firstDone();
          return 'ack'; // its channel is gone by now: must be dropped
        }
        if (env.messageId === 'stale-1') await firstDoneP; // settle the redelivery only after the stale ack
        return 'ack';
      },
    });
    await client.publish('monitor.hit', hitPayload(), { messageId: 'stale-1', headers: headersFor('stale-1') });
    await firstStartedP;
    proxy.cut();
    await waitFor(() => !client.isConnected());
    proxy.restore();
    await waitFor(() => calls.some((c) => c.messageId === 'stale-1' && c.redelivered));
    expect(client.connectCount).toBe(2);
    releaseFirst();
    await firstDoneP;
    await client.publish('monitor.hit', hitPayload(), { messageId: 'stale-2', headers: headersFor('stale-2') });
    await waitFor(() => calls.some((c) => c.messageId === 'stale-2'));
    await waitFor(async () => (await raw.ch.checkQueue('rc.stale')).messageCount === 0);
    // an ack of the old tag on the new channel would have closed it (unknown delivery tag) and forced a third connect
    expect(client.connectCount).toBe(2);
    expect(client.isConnected()).toBe(true);
    expect(calls.map((c) => c.messageId)).toEqual(['stale-1', 'stale-1', 'stale-2']);
    expect(
      log
        .lines()
        .some((l) => l.messageId === 'stale-1' && String(l.message).includes('channel closed before settling')),
    ).toBe(true);
  });

  it('rejects a publish whose confirm never comes when the connection drops (never resolves falsely)', async () => {
    const { client } = proxiedClient('rc-lost-confirm');
    await client.start();
    proxy.blackhole(); // the publish leaves the client but never reaches the broker
    const pending = client
      .publish('monitor.hit', hitPayload(), { messageId: 'lost-1', headers: headersFor('lost-1') })
      .catch((e: unknown) => e);
    await turns(10);
    proxy.cut();
    const err = await pending;
    expect(err).toBeInstanceOf(PublishError);
    expect((err as PublishError).code).toBe('CONNECTION_LOST');
  });

  it('rejects with TIMEOUT when the broker stays unreachable, and publishes again once it is back', async () => {
    const { client } = proxiedClient('rc-timeout', { publishTimeoutMs: 300 });
    await client.start();
    proxy.cut();
    await waitFor(() => !client.isConnected());
    const err = await client
      .publish('monitor.hit', hitPayload(), { messageId: 'timeout-1', headers: headersFor('timeout-1') })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PublishError);
    expect((err as PublishError).code).toBe('TIMEOUT');
    proxy.restore();
    await waitFor(() => client.isConnected());
    await expect(
      client.publish('monitor.hit', hitPayload(), { messageId: 'timeout-2', headers: headersFor('timeout-2') }),
    ).resolves.toBeUndefined();
  });

  it('start() keeps retrying until the broker is reachable; a consumer registered meanwhile starts then', async () => {
    proxy.cut();
    const { client, log } = proxiedClient('rc-start');
    const started = client.start();
    const received: string[] = [];
    const consuming = client.consume({
      queue: 'rc.start',
      bindings: ['monitor.hit'],
      handler: (env) => {
        received.push(env.messageId);
        return Promise.resolve('ack');
      },
    });
    await waitFor(() => log.lines().filter((l) => l.message === 'amqp connect failed, retrying').length >= 3);
    expect(client.isConnected()).toBe(false);
    proxy.restore();
    await started;
    await consuming;
    await client.publish('monitor.hit', hitPayload(), { messageId: 'start-1', headers: headersFor('start-1') });
    await waitFor(() => received.includes('start-1'));
    expect(client.connectCount).toBe(1);
  });

  it('stop() during the connect retries ends them and rejects start()', async () => {
    proxy.cut();
    const { client, log } = proxiedClient('rc-stop-early');
    const started = client.start().catch((e: unknown) => e);
    await waitFor(() => log.lines().some((l) => l.message === 'amqp connect failed, retrying'));
    await client.stop();
    expect(await started).toBeInstanceOf(Error);
    const failures = log.lines().filter((l) => l.message === 'amqp connect failed, retrying').length;
    proxy.restore();
    await turns(50);
    expect(log.lines().filter((l) => l.message === 'amqp connect failed, retrying').length).toBe(failures);
    expect(client.connectCount).toBe(0);
    expect(proxy.openConnections).toBe(0);
  });

  it('stop() does not hang on a broker that stopped answering: it drops the socket after closeTimeoutMs', async () => {
    const { client, log } = proxiedClient('rc-stop-unresponsive', { closeTimeoutMs: 200 });
    await client.start();
    expect(proxy.openConnections).toBe(2);
    proxy.blackhole(); // the close handshake never reaches the broker
    await client.stop();
    expect(client.isConnected()).toBe(false);
    expect(log.lines().some((l) => l.message === 'amqp close timed out; dropping the socket')).toBe(true);
    await waitFor(() => proxy.openConnections === 0);
  });
});
