import { randomUUID } from 'node:crypto';
import type { Channel, ConsumeMessage, GetMessage } from 'amqplib';
import { capturingLogger, createTestVhost, queueInfo, rawChannel, turns, waitFor } from '@sts/testing';
import { AmqpClient, PublishError, type ConsumeOutcome } from './client';
import { ContractError, DEAD_LETTER_EXCHANGE, EXCHANGE, type Envelope, type RoutingKey } from './contracts';
import { declareQueue } from './topology';
import { hitPayload, testPayload } from '../test/payloads';

let vhost: { url: string; vhost: string };
let client: AmqpClient;
let log: ReturnType<typeof capturingLogger>;
let raw: Awaited<ReturnType<typeof rawChannel>>;

beforeAll(async () => {
  vhost = await createTestVhost();
  log = capturingLogger();
  client = new AmqpClient({ url: vhost.url, logger: log.logger, name: 'messaging-test' });
  await client.start();
  raw = await rawChannel(vhost.url);
});

afterAll(async () => {
  await client?.stop();
  await raw?.close();
});

/** Drains a queue with basic.get (raw channel), acknowledging nothing it keeps. */
async function drain(ch: Channel, queue: string): Promise<GetMessage[]> {
  const out: GetMessage[] = [];
  for (;;) {
    const m = await ch.get(queue, { noAck: true });
    if (!m) return out;
    out.push(m);
  }
}

async function messageCount(queue: string): Promise<number> {
  return (await raw.ch.checkQueue(queue)).messageCount;
}

describe('AmqpClient', () => {
  it('is connected after start() and its readiness check passes', async () => {
    expect(client.isConnected()).toBe(true);
    await expect(client.check()).resolves.toBeUndefined();
    expect(client.connectCount).toBe(1);
    await expect(raw.ch.checkExchange(EXCHANGE)).resolves.toBeDefined();
    await expect(raw.ch.checkExchange(DEAD_LETTER_EXCHANGE)).resolves.toBeDefined();
  });

  it('rejects UNROUTABLE with requireRoute when no queue is bound, and resolves (logging) without it', async () => {
    const attemptId = randomUUID();
    const err = await client
      .publish(
        'webhook.redeliver',
        { attemptId },
        { messageId: 'unroutable-1', headers: { accountId: 'acc' }, requireRoute: true },
      )
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PublishError);
    expect((err as PublishError).code).toBe('UNROUTABLE');
    await client.publish(
      'webhook.redeliver',
      { attemptId },
      { messageId: 'unroutable-2', headers: { accountId: 'acc' } },
    );
    expect(log.lines().some((l) => l.messageId === 'unroutable-2' && String(l.message).includes('unroutable'))).toBe(
      true,
    );
  });

  it('round-trips every routing key with typed, intact payload, headers and messageId', async () => {
    const hits: Envelope<'monitor.hit'>[] = [];
    const tests: Envelope<'monitor.test'>[] = [];
    const redeliveries: Envelope<'webhook.redeliver'>[] = [];
    await client.consume({
      queue: 'rt.hits',
      bindings: ['monitor.hit'],
      handler: (env) => {
        // typed: these compile only because env is Envelope<'monitor.hit'>
        const tweetId: string = env.payload.tweet.id;
        const hitId: string = env.headers.hitId;
        expect(tweetId && hitId).toBeTruthy();
        hits.push(env);
        return Promise.resolve('ack');
      },
    });
    await client.consume({
      queue: 'rt.tests',
      bindings: ['monitor.test'],
      handler: (env) => {
        const isTest: true = env.payload.test;
        expect(isTest).toBe(true);
        tests.push(env);
        return Promise.resolve('ack');
      },
    });
    await client.consume({
      queue: 'rt.redeliver',
      bindings: ['webhook.redeliver'],
      handler: (env) => {
        redeliveries.push(env);
        return Promise.resolve('ack');
      },
    });

    const hit = hitPayload({ monitor: { id: 'mon_9', targetUsername: 'carol', query: null, keywords: null } });
    const attemptId = randomUUID();
    await client.publish('monitor.hit', hit, {
      messageId: 'hit-rt-1',
      headers: { accountId: 'acc_1', hitId: 'hit_1' },
    });
    await client.publish('monitor.test', testPayload(), { messageId: 'test-rt-1', headers: { accountId: 'acc_2' } });
    await client.publish(
      'webhook.redeliver',
      { attemptId },
      { messageId: 'redeliver-rt-1', headers: { accountId: 'acc_3' } },
    );

    await waitFor(() => hits.length === 1 && tests.length === 1 && redeliveries.length === 1);
    expect(hits[0]).toMatchObject({
      routingKey: 'monitor.hit',
      messageId: 'hit-rt-1',
      payload: hit,
      headers: { accountId: 'acc_1', hitId: 'hit_1' },
      redelivered: false,
    });
    expect(hits[0]!.publishedAt).toBeInstanceOf(Date);
    expect(tests[0]).toMatchObject({
      routingKey: 'monitor.test',
      messageId: 'test-rt-1',
      payload: testPayload(),
      headers: { accountId: 'acc_2' },
    });
    expect(redeliveries[0]).toMatchObject({
      routingKey: 'webhook.redeliver',
      messageId: 'redeliver-rt-1',
      payload: { attemptId },
      headers: { accountId: 'acc_3' },
    });
    // each queue got only its own routing key
    await waitFor(async () => (await messageCount('rt.hits')) === 0);
  });

  it('puts the exact webhook payload (docs/webhooks.md) on the wire: JSON body, persistent, type, content type, timestamp, x-* headers', async () => {
    await declareQueue(raw.ch, 'wire.hits', ['monitor.hit']);
    const hit = hitPayload();
    await client.publish('monitor.hit', hit, { messageId: 'wire-1', headers: { accountId: 'acc_w', hitId: 'hit_w' } });
    const [msg] = await waitFor(async () => {
      const got = await drain(raw.ch, 'wire.hits');
      return got.length ? got : undefined;
    });
    expect(JSON.parse(msg!.content.toString('utf8'))).toStrictEqual(hit);
    expect(Object.keys(JSON.parse(msg!.content.toString('utf8')) as object).sort()).toEqual(
      ['detectedAt', 'event', 'monitor', 'tweet'].sort(),
    );
    expect(msg!.fields.routingKey).toBe('monitor.hit');
    expect(msg!.fields.exchange).toBe(EXCHANGE);
    expect(msg!.properties).toMatchObject({
      messageId: 'wire-1',
      type: 'monitor.hit',
      contentType: 'application/json',
      deliveryMode: 2,
      appId: 'messaging-test',
    });
    expect(msg!.properties.headers).toMatchObject({ 'x-account-id': 'acc_w', 'x-hit-id': 'hit_w' });
    expect(typeof msg!.properties.timestamp).toBe('number');
    expect(Math.abs((msg!.properties.timestamp as number) - Date.now() / 1000)).toBeLessThan(3600);
  });

  it('declares durable queues with the DLX arguments and a bound, durable <queue>.dlq', async () => {
    await client.consume({ queue: 'topo.q', bindings: ['monitor.hit'], handler: () => Promise.resolve('ack') });
    const q = await queueInfo(vhost.vhost, 'topo.q');
    expect(q).toMatchObject({
      durable: true,
      arguments: { 'x-dead-letter-exchange': DEAD_LETTER_EXCHANGE, 'x-dead-letter-routing-key': 'topo.q' },
    });
    expect(await queueInfo(vhost.vhost, 'topo.q.dlq')).toMatchObject({ durable: true });
    // the DLQ is bound to the DLX with the queue's name
    raw.ch.publish(DEAD_LETTER_EXCHANGE, 'topo.q', Buffer.from('x'));
    await waitFor(async () => (await messageCount('topo.q.dlq')) === 1);
    await raw.ch.purgeQueue('topo.q.dlq');
  });

  it('refuses an invalid publish with ContractError and sends nothing', async () => {
    await declareQueue(raw.ch, 'invalid.all', ['monitor.hit', 'monitor.test', 'webhook.redeliver']);
    const good = { accountId: 'a', hitId: 'h' };
    const attempts: Promise<unknown>[] = [
      client.publish('monitor.hit', { ...hitPayload(), extra: 1 } as never, { messageId: 'bad-1', headers: good }),
      client.publish(
        'monitor.hit',
        { ...hitPayload(), detectedAt: '2024-05-01T12:00:00Z' },
        { messageId: 'bad-2', headers: good },
      ),
      client.publish('monitor.hit', testPayload() as never, { messageId: 'bad-3', headers: good }),
      client.publish('monitor.hit', hitPayload(), { messageId: 'bad-4', headers: { accountId: 'a' } as never }),
      client.publish('monitor.hit', hitPayload(), { messageId: '', headers: good }),
      client.publish('monitor.nope' as RoutingKey, hitPayload(), { messageId: 'bad-6', headers: good }),
      client.publish('webhook.redeliver', { attemptId: 'nope' }, { messageId: 'bad-7', headers: { accountId: 'a' } }),
    ];
    for (const p of attempts) await expect(p).rejects.toBeInstanceOf(ContractError);
    await client.publish('monitor.test', testPayload(), { messageId: 'good-after-bad', headers: { accountId: 'a' } });
    const got = await waitFor(async () => {
      const msgs = await drain(raw.ch, 'invalid.all');
      return msgs.length ? msgs : undefined;
    });
    // one channel keeps order: had any invalid message gone out, it would be here before the valid one
    expect(got.map((m) => m.properties.messageId as string)).toEqual(['good-after-bad']);
  });

  it('dead-letters malformed raw messages at once without calling the handler', async () => {
    const seen: string[] = [];
    await client.consume({
      queue: 'malformed.q',
      bindings: ['monitor.hit'],
      handler: (env) => {
        seen.push(env.messageId);
        return Promise.resolve('ack');
      },
    });
    const conf = await raw.conn.createConfirmChannel();
    const hitHeaders = { 'x-account-id': 'acc', 'x-hit-id': 'hit' };
    const json = (v: unknown) => Buffer.from(JSON.stringify(v));
    conf.publish(EXCHANGE, 'monitor.hit', Buffer.from('{not json'), { messageId: 'raw-garbage', headers: hitHeaders });
    conf.publish(EXCHANGE, 'monitor.hit', json({ event: 'monitor.hit', hello: 1 }), {
      messageId: 'raw-schema',
      headers: hitHeaders,
    });
    conf.publish(EXCHANGE, 'monitor.hit', json(hitPayload()), {
      messageId: 'raw-no-hit-header',
      headers: { 'x-account-id': 'acc' },
    });
    conf.publish(EXCHANGE, 'monitor.hit', json(hitPayload()), { headers: hitHeaders }); // no messageId
    // straight into the queue through the default exchange: routing key "malformed.q" is no contract
    conf.sendToQueue('malformed.q', json(hitPayload()), { messageId: 'raw-unknown-key', headers: hitHeaders });
    await conf.waitForConfirms();
    await conf.close();
    await client.publish('monitor.hit', hitPayload(), {
      messageId: 'valid-after-raw',
      headers: { accountId: 'a', hitId: 'h' },
    });

    await waitFor(() => seen.includes('valid-after-raw'));
    await waitFor(async () => (await messageCount('malformed.q.dlq')) === 5);
    expect(seen).toEqual(['valid-after-raw']);
    const dead = await drain(raw.ch, 'malformed.q.dlq');
    expect(dead.map((m) => m.properties.messageId as string | undefined).sort()).toEqual(
      ['raw-garbage', 'raw-no-hit-header', 'raw-schema', 'raw-unknown-key', undefined].sort(),
    );
    for (const m of dead) {
      const death = (m.properties.headers?.['x-death'] as { reason: string; queue: string }[])[0]!;
      expect(death).toMatchObject({ reason: 'rejected', queue: 'malformed.q' });
    }
    const logged = log.lines().filter((l) => String(l.message).includes('breaks its contract'));
    expect(logged.find((l) => l.messageId === 'raw-garbage')?.reason).toBe('body is not JSON');
    expect(String(logged.find((l) => l.messageId === 'raw-no-hit-header')?.reason)).toContain('hitId');
    expect(String(logged.find((l) => l.messageId === 'raw-unknown-key')?.reason)).toContain('routing key');
  });

  it('applies handler outcomes: ack, dead-letter, requeue; a handler throwing twice lands in the DLQ', async () => {
    const calls = new Map<string, { redelivered: boolean }[]>();
    await client.consume({
      queue: 'outcomes.q',
      bindings: ['monitor.hit'],
      handler: (env) => {
        const list = calls.get(env.messageId) ?? [];
        list.push({ redelivered: env.redelivered });
        calls.set(env.messageId, list);
        switch (env.messageId) {
          case 'o-ack':
            return Promise.resolve('ack');
          case 'o-dead':
            return Promise.resolve('dead-letter');
          case 'o-requeue':
            return Promise.resolve<ConsumeOutcome>(list.length === 1 ? 'requeue' : 'ack');
          default:
            return Promise.reject(new Error('handler bug'));
        }
      },
    });
    const headers = { accountId: 'acc', hitId: 'h' };
    for (const id of ['o-ack', 'o-dead', 'o-requeue', 'o-throw'])
      await client.publish('monitor.hit', hitPayload(), { messageId: id, headers });

    await waitFor(async () => (await messageCount('outcomes.q.dlq')) === 2 && calls.get('o-requeue')?.length === 2);
    await waitFor(async () => (await messageCount('outcomes.q')) === 0);
    expect(calls.get('o-ack')).toEqual([{ redelivered: false }]);
    expect(calls.get('o-dead')).toEqual([{ redelivered: false }]);
    expect(calls.get('o-requeue')).toEqual([{ redelivered: false }, { redelivered: true }]);
    expect(calls.get('o-throw')).toEqual([{ redelivered: false }, { redelivered: true }]);
    const dead = await drain(raw.ch, 'outcomes.q.dlq');
    expect(dead.map((m) => m.properties.messageId as string).sort()).toEqual(['o-dead', 'o-throw']);
    // the dead-lettered messages keep their body and headers
    expect(dead[0]!.properties.headers).toMatchObject({ 'x-account-id': 'acc', 'x-hit-id': 'h' });
    // and nothing loops: one more message flows through normally and the poison one was not called again
    await client.publish('monitor.hit', hitPayload(), { messageId: 'o-ack-2', headers });
    await waitFor(() => calls.has('o-ack-2'));
    expect(calls.get('o-throw')).toHaveLength(2);
  });

  it('lets another service bind its own queue (declareQueue) and receive the same hits', async () => {
    const dispatcher: string[] = [];
    await client.consume({
      queue: 'dispatcher.hits',
      bindings: ['monitor.hit'],
      handler: (env) => {
        dispatcher.push(env.messageId);
        return Promise.resolve('ack');
      },
    });
    // another internal service, with its own plain amqplib channel
    const other = await rawChannel(vhost.url);
    try {
      await declareQueue(other.ch, 'analytics.hits', ['monitor.hit']);
      expect(await queueInfo(vhost.vhost, 'analytics.hits')).toMatchObject({
        durable: true,
        arguments: { 'x-dead-letter-exchange': DEAD_LETTER_EXCHANGE, 'x-dead-letter-routing-key': 'analytics.hits' },
      });
      const analytics: ConsumeMessage[] = [];
      await other.ch.consume('analytics.hits', (m) => {
        if (m) analytics.push(m);
      });
      const ids = ['share-1', 'share-2', 'share-3'];
      for (const id of ids)
        await client.publish('monitor.hit', hitPayload(), { messageId: id, headers: { accountId: 'a', hitId: id } });
      await client.publish('monitor.test', testPayload(), { messageId: 'share-test', headers: { accountId: 'a' } });
      await waitFor(() => analytics.length >= 3 && ids.every((id) => dispatcher.includes(id)));
      expect(analytics.map((m) => m.properties.messageId as string)).toEqual(ids);
      for (const m of analytics) other.ch.ack(m);
      // its DLQ works too
      const probe = await other.conn.createConfirmChannel();
      probe.publish(EXCHANGE, 'monitor.hit', Buffer.from('{}'), { messageId: 'for-analytics-dlq' });
      await probe.waitForConfirms();
      await waitFor(() => analytics.length === 4);
      other.ch.nack(analytics[3]!, false, false);
      await waitFor(async () => (await messageCount('analytics.hits.dlq')) === 1);
    } finally {
      await other.close();
    }
  });

  it('rejects the publish when the broker nacks it', async () => {
    // a queue that refuses every message makes the broker nack the publish
    await raw.ch.assertQueue('nack.q', {
      durable: true,
      arguments: { 'x-max-length': 0, 'x-overflow': 'reject-publish' },
    });
    await raw.ch.bindQueue('nack.q', EXCHANGE, 'monitor.test');
    try {
      const err = await client
        .publish('monitor.test', testPayload(), { messageId: 'nacked-1', headers: { accountId: 'a' } })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(PublishError);
      expect((err as PublishError).code).toBe('NACKED');
    } finally {
      await raw.ch.deleteQueue('nack.q');
    }
    await expect(
      client.publish('monitor.test', testPayload(), { messageId: 'after-nack', headers: { accountId: 'a' } }),
    ).resolves.toBeUndefined();
  });

  it('validates consume() options and refuses a queue declared with other arguments', async () => {
    const handler = () => Promise.resolve<ConsumeOutcome>('ack');
    await expect(client.consume({ queue: 'v.q', bindings: [], handler })).rejects.toThrow(/bindings/);
    await expect(client.consume({ queue: 'v.q', bindings: ['monitor.nope' as RoutingKey], handler })).rejects.toThrow(
      /unknown routing key/,
    );
    await expect(client.consume({ queue: 'v.q', bindings: ['monitor.hit'], prefetch: 0, handler })).rejects.toThrow(
      /prefetch/,
    );
    await expect(client.consume({ queue: 'rt.hits', bindings: ['monitor.hit'], handler })).rejects.toThrow(/already/);
    await raw.ch.assertQueue('clash.q', { durable: false });
    await expect(client.consume({ queue: 'clash.q', bindings: ['monitor.hit'], handler })).rejects.toThrow(
      /PRECONDITION_FAILED/,
    );
    // the failed declaration did not take the client down
    expect(client.isConnected()).toBe(true);
    expect(client.connectCount).toBe(1);
    await expect(
      client.publish('monitor.test', testPayload(), { messageId: 'after-clash', headers: { accountId: 'a' } }),
    ).resolves.toBeUndefined();
  });
});

describe('AmqpClient.stop()', () => {
  it('waits for an in-flight handler to finish (and ack) before closing', async () => {
    const stopper = new AmqpClient({ url: vhost.url, logger: log.logger, name: 'messaging-stop-test' });
    await stopper.start();
    const order: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let started!: () => void;
    const handlerStarted = new Promise<void>((r) => (started = r));
    await stopper.consume({
      queue: 'stop.q',
      bindings: ['monitor.test'],
      handler: async () => {
        started();
        await gate;
        order.push('handler-done');
        return 'ack';
      },
    });
    await client.publish('monitor.test', testPayload(), { messageId: 'stop-1', headers: { accountId: 'a' } });
    await handlerStarted;

    const stopping = stopper.stop().then(() => order.push('stopped'));
    await turns(20);
    expect(order).toEqual([]); // still waiting for the handler
    release();
    await stopping;
    expect(order).toEqual(['handler-done', 'stopped']);
    expect(stopper.isConnected()).toBe(false);
    await expect(stopper.check()).rejects.toThrow(/not connected/);
    // the handler's ack went out before the connection closed: nothing is left to redeliver
    expect((await raw.ch.checkQueue('stop.q')).messageCount).toBe(0);
    // the consumer was cancelled: a new message stays in the queue
    await client.publish('monitor.test', testPayload(), { messageId: 'stop-2', headers: { accountId: 'a' } });
    await waitFor(async () => (await raw.ch.checkQueue('stop.q')).messageCount === 1);
    const err = await stopper
      .publish('monitor.test', testPayload(), { messageId: 'stop-3', headers: { accountId: 'a' } })
      .catch((e: unknown) => e);
    expect((err as PublishError).code).toBe('STOPPED');
    await expect(stopper.stop()).resolves.toBeUndefined();
  });

  it('never logs the broker credentials', () => {
    expect(log.lines().length).toBeGreaterThan(0);
    const all = JSON.stringify(log.lines());
    const password = decodeURIComponent(new URL(vhost.url).password);
    expect(all).not.toContain(`:${password}@`);
  });
});
