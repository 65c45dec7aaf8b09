import { randomUUID } from 'node:crypto';
import { connect, type ChannelModel } from 'amqplib';
import { capturingLogger, createTestVhost, management, queueInfo, waitFor } from '@sts/testing';
import { AmqpClient, type ConsumeOutcome } from './client';
import { DEAD_LETTER_EXCHANGE, EXCHANGE, type Envelope } from './contracts';
import { listDeadLetters, migrateToQuorum, replayDeadLetters } from './dlq';
import { hitPayload, testPayload } from '../test/payloads';
import { declareQueue, DELIVERY_LIMIT, DLQ_DELIVERY_LIMIT, DLQ_MAX_LENGTH } from './topology';

let vhost: { url: string; vhost: string };
let client: AmqpClient;
let conn: ChannelModel;

/** PUT/DELETE on the management API with a JSON body (policies); throws unless it succeeds. */
async function mgmt(method: 'PUT' | 'DELETE', path: string, body?: unknown): Promise<void> {
  const r = await management(method, path, body);
  if (!r.ok) throw new Error(`management API ${method} ${path}: ${r.status} ${await r.text()}`);
}

const policyPath = (name: string) => `/api/policies/${encodeURIComponent(vhost.vhost)}/${name}`;

async function count(queue: string): Promise<number> {
  const ch = await conn.createChannel();
  try {
    return (await ch.checkQueue(queue)).messageCount;
  } finally {
    await ch.close();
  }
}

/** A consumer on `queue` whose handler answers `outcome` (switchable), recording what it saw. */
async function consumer(queue: string, outcome: { value: ConsumeOutcome }) {
  const seen: Envelope<'monitor.hit' | 'monitor.test'>[] = [];
  await client.consume({
    queue,
    bindings: ['monitor.hit', 'monitor.test'],
    handler: (env) => {
      seen.push(env);
      return Promise.resolve(outcome.value);
    },
  });
  return seen;
}

async function publishHit(id: string = randomUUID()): Promise<string> {
  await client.publish('monitor.hit', hitPayload(), {
    messageId: id,
    headers: { accountId: 'acc-1', hitId: id },
  });
  return id;
}

beforeAll(async () => {
  vhost = await createTestVhost();
  client = new AmqpClient({ url: vhost.url, logger: capturingLogger().logger, name: 'dlq-test' });
  await client.start();
  conn = await connect(vhost.url);
  conn.on('error', () => undefined);
});

afterAll(async () => {
  await client?.stop();
  await conn?.close().catch(() => undefined);
});

describe('quorum topology', () => {
  it('declares consumer queues as quorum queues with a delivery limit, and a bounded DLQ', async () => {
    const ch = await conn.createChannel();
    await declareQueue(ch, 'topo.q', ['monitor.hit']);
    await ch.close();
    const q = await queueInfo(vhost.vhost, 'topo.q');
    expect(q).toMatchObject({
      durable: true,
      type: 'quorum',
      arguments: {
        'x-queue-type': 'quorum',
        'x-delivery-limit': DELIVERY_LIMIT,
        'x-dead-letter-exchange': DEAD_LETTER_EXCHANGE,
        'x-dead-letter-routing-key': 'topo.q',
        'x-dead-letter-strategy': 'at-least-once',
        'x-overflow': 'reject-publish',
      },
    });
    expect(await queueInfo(vhost.vhost, 'topo.q.dlq')).toMatchObject({
      durable: true,
      type: 'quorum',
      arguments: {
        'x-queue-type': 'quorum',
        'x-delivery-limit': DLQ_DELIVERY_LIMIT,
        'x-max-length': DLQ_MAX_LENGTH,
        'x-overflow': 'drop-head',
      },
    });
  });

  it('dead-letters a message returned more than the delivery limit (reason delivery_limit)', async () => {
    const outcome = { value: 'requeue' as ConsumeOutcome };
    const seen = await consumer('limit.q', outcome);
    const id = await publishHit();
    await waitFor(async () => (await count('limit.q.dlq')) === 1, 60_000);
    // first delivery + DELIVERY_LIMIT returns
    expect(seen.filter((e) => e.messageId === id).length).toBe(DELIVERY_LIMIT + 1);
    const { messages } = await listDeadLetters(conn, 'limit.q', { limit: 10 });
    expect(messages).toEqual([
      expect.objectContaining({
        messageId: id,
        routingKey: 'monitor.hit',
        exchange: EXCHANGE,
        reason: 'delivery_limit',
      }),
    ]);
  });

  it('a DLQ keeps the newest dead letters when full (drop-head); a policy lowers the bound at run time', async () => {
    await mgmt('PUT', policyPath('small-dlq'), {
      pattern: '^full\\.q\\.dlq$',
      definition: { 'max-length': 3 },
      'apply-to': 'queues',
    });
    try {
      const outcome = { value: 'dead-letter' as ConsumeOutcome };
      await consumer('full.q', outcome);
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        ids.push(await publishHit());
        // one at a time, so the order in the DLQ is the publication order
        await waitFor(async () => (await count('full.q')) === 0 && (await count('full.q.dlq')) >= Math.min(i + 1, 3));
      }
      await waitFor(async () => (await count('full.q.dlq')) === 3);
      // the count above can run ahead of the last dead letter's arrival on a loaded machine: the
      // listing (which keeps the DLQ's order) is read until the newest three are there, or it times out
      const newest = ids.slice(2);
      const listed = async () =>
        (await listDeadLetters(conn, 'full.q', { limit: 10 })).messages.map((m) => m.messageId);
      await waitFor(async () => JSON.stringify(await listed()) === JSON.stringify(newest), 30_000).catch(
        () => undefined,
      );
      expect(await listed()).toEqual(newest);
    } finally {
      await mgmt('DELETE', policyPath('small-dlq'));
    }
  });
});

describe('dlq list and replay', () => {
  const outcome = { value: 'dead-letter' as ConsumeOutcome };
  let seen: Envelope<'monitor.hit' | 'monitor.test'>[];
  const ids: string[] = [];

  beforeAll(async () => {
    seen = await consumer('svc', outcome);
    for (let i = 0; i < 3; i++) ids.push(await publishHit());
    await client.publish('monitor.test', testPayload(), {
      messageId: 'test-ping-1',
      headers: { accountId: 'acc-2' },
    });
    ids.push('test-ping-1');
    await waitFor(async () => (await count('svc.dlq')) === 4);
  });

  it('list shows routing key, id, death reason and count, headers without secrets, a body preview; changes nothing', async () => {
    // a dead letter with a secret-looking custom header, published straight into the DLQ path
    const ch = await conn.createConfirmChannel();
    ch.publish(DEAD_LETTER_EXCHANGE, 'svc', Buffer.from('x'.repeat(500)), {
      messageId: 'odd-1',
      headers: { 'x-api-key': 'sk_live_123', authorization: 'Bearer abc', 'x-account-id': 'acc-9' },
    });
    await ch.waitForConfirms();
    await ch.close();
    await waitFor(async () => (await count('svc.dlq')) === 5);

    const out = await listDeadLetters(conn, 'svc', { limit: 2 });
    expect(out.dlq).toBe('svc.dlq');
    expect(out.total).toBe(5);
    expect(out.messages).toHaveLength(2);
    const first = out.messages[0]!;
    expect(first).toMatchObject({
      messageId: ids[0],
      routingKey: 'monitor.hit',
      exchange: EXCHANGE,
      reason: 'rejected',
      deathCount: 1,
      type: 'monitor.hit',
      headers: { 'x-account-id': 'acc-1', 'x-hit-id': ids[0] },
    });
    expect(first.headers).not.toHaveProperty('x-death');
    expect(first.bodyPreview).toMatch(/^\{"event":"monitor\.hit","monitor":\{"id":"mon_1"/);
    expect(first.bodyPreview).toMatch(/…$/);
    expect(first.bodyPreview.length).toBe(201);
    expect(first.bodyBytes).toBeGreaterThan(200);

    const all = await listDeadLetters(conn, 'svc', { limit: 50 });
    expect(all.messages.map((m) => m.messageId)).toEqual([...ids, 'odd-1']);
    const odd = all.messages[4]!;
    expect(odd.headers).toEqual({ 'x-api-key': '[REDACTED]', authorization: '[REDACTED]', 'x-account-id': 'acc-9' });
    expect(JSON.stringify(odd)).not.toContain('sk_live_123');
    expect(odd.bodyPreview).toBe(`${'x'.repeat(200)}…`);
    expect(odd.routingKey).toBeNull();
    // nothing was taken out
    expect(await count('svc.dlq')).toBe(5);
  });

  it('replay --message-id republishes that one to its routing key, then removes it from the DLQ', async () => {
    outcome.value = 'ack';
    const before = seen.length;
    const r = await replayDeadLetters(conn, 'svc', { messageId: ids[1]! });
    expect(r.replayed).toEqual([{ messageId: ids[1], exchange: EXCHANGE, routingKey: 'monitor.hit' }]);
    await waitFor(() => seen.length === before + 1);
    expect(seen[seen.length - 1]).toMatchObject({ messageId: ids[1], routingKey: 'monitor.hit' });
    expect(await count('svc.dlq')).toBe(4);
    const left = await listDeadLetters(conn, 'svc', { limit: 50 });
    expect(left.messages.map((m) => m.messageId)).toEqual([ids[0], ids[2], ids[3], 'odd-1']);
    await expect(replayDeadLetters(conn, 'svc', { messageId: 'nope' })).rejects.toThrow(
      /no message with id nope in svc\.dlq/,
    );
    expect(await count('svc.dlq')).toBe(4);
  });

  it('replay --limit takes the oldest N; one without a known origin stays in the DLQ', async () => {
    const before = seen.length;
    const r = await replayDeadLetters(conn, 'svc', { limit: 2 });
    expect(r.replayed.map((x) => x.messageId)).toEqual([ids[0], ids[2]]);
    await waitFor(() => seen.length === before + 2);
    const all = await replayDeadLetters(conn, 'svc', {});
    expect(all.replayed.map((x) => [x.messageId, x.routingKey])).toEqual([['test-ping-1', 'monitor.test']]);
    expect(all.kept).toEqual([{ messageId: 'odd-1', reason: expect.stringMatching(/no x-death record/) }]);
    await waitFor(() => seen.length === before + 3);
    expect(await count('svc.dlq')).toBe(1);
  });

  it('never loses a message: an unroutable or failed republication leaves it in the DLQ', async () => {
    // a dead letter whose routing key nobody is bound to any more
    outcome.value = 'dead-letter';
    await client.consume({
      queue: 'gone',
      bindings: ['webhook.redeliver'],
      handler: () => Promise.resolve('dead-letter'),
    });
    await client.publish(
      'webhook.redeliver',
      { attemptId: randomUUID() },
      { messageId: 'rd-1', headers: { accountId: 'a' } },
    );
    await waitFor(async () => (await count('gone.dlq')) === 1);
    const ch = await conn.createChannel();
    await ch.unbindQueue('gone', EXCHANGE, 'webhook.redeliver');
    await ch.close();
    const r = await replayDeadLetters(conn, 'gone', {});
    expect(r.replayed).toEqual([]);
    expect(r.kept).toEqual([{ messageId: 'rd-1', reason: `no queue is bound to ${EXCHANGE} with webhook.redeliver` }]);
    expect(await count('gone.dlq')).toBe(1);

    // the republication fails (the channel dies before a confirm: here the recorded exchange no
    // longer exists): the dead letter stays, the replay stops there and says why
    const setup = await conn.createConfirmChannel();
    await declareQueue(setup, 'failq', ['webhook.redeliver']);
    for (const [id, exchange] of [
      ['fx-1', 'exchange.deleted'],
      ['fx-2', EXCHANGE],
    ] as const) {
      setup.publish(DEAD_LETTER_EXCHANGE, 'failq', Buffer.from('{"attemptId":"x"}'), {
        messageId: id,
        headers: {
          'x-account-id': 'a',
          'x-death': [
            { queue: 'failq', reason: 'rejected', count: 1, exchange, 'routing-keys': ['webhook.redeliver'] },
          ],
        },
      });
    }
    await setup.waitForConfirms();
    await setup.close();
    await waitFor(async () => (await count('failq.dlq')) === 2);
    const failed = await replayDeadLetters(conn, 'failq', {});
    expect(failed.replayed).toEqual([]);
    expect(failed.kept).toEqual([
      { messageId: 'fx-1', reason: expect.stringMatching(/channel closed before the broker confirmed/) },
    ]);
    expect(await count('failq.dlq')).toBe(2);
    expect(await count('failq')).toBe(0);
    const listed = await listDeadLetters(conn, 'failq', { limit: 5 });
    expect(listed.messages.map((m) => m.messageId)).toEqual(['fx-1', 'fx-2']);
    // the good one can still be replayed on its own
    const one = await replayDeadLetters(conn, 'failq', { messageId: 'fx-2' });
    expect(one.replayed.map((x) => x.messageId)).toEqual(['fx-2']);
    await waitFor(async () => (await count('failq')) === 1);
    expect(await count('failq.dlq')).toBe(1);
  });

  it('refuses a queue without a DLQ with a clear error', async () => {
    await expect(listDeadLetters(conn, 'no-such-queue', { limit: 1 })).rejects.toThrow(
      /dead-letter queue no-such-queue\.dlq does not exist/,
    );
    await expect(replayDeadLetters(conn, 'no-such-queue', {})).rejects.toThrow(/does not exist/);
  });
});

describe('moving classic queues of earlier versions to quorum queues', () => {
  it('a classic queue cannot be re-declared as quorum (PRECONDITION_FAILED); migrateToQuorum moves it keeping messages and bindings', async () => {
    // the topology of earlier versions: classic queues, same dead-letter arguments
    const ch = await conn.createConfirmChannel();
    await ch.assertExchange(EXCHANGE, 'topic', { durable: true });
    await ch.assertExchange(DEAD_LETTER_EXCHANGE, 'direct', { durable: true });
    await ch.assertQueue('legacy.dlq', { durable: true });
    await ch.bindQueue('legacy.dlq', DEAD_LETTER_EXCHANGE, 'legacy');
    await ch.assertQueue('legacy', {
      durable: true,
      arguments: { 'x-dead-letter-exchange': DEAD_LETTER_EXCHANGE, 'x-dead-letter-routing-key': 'legacy' },
    });
    await ch.bindQueue('legacy', EXCHANGE, 'monitor.hit');
    for (let i = 0; i < 3; i++) ch.publish(EXCHANGE, 'monitor.hit', Buffer.from('{}'), { messageId: `old-${i}` });
    // the dispatcher's classic parking queue of earlier versions, holding one parked message
    await ch.assertExchange('legacy.defer', 'direct', { durable: true });
    await ch.assertExchange('legacy.return', 'direct', { durable: true });
    await ch.assertQueue('legacy.parked', { durable: true, arguments: { 'x-dead-letter-exchange': 'legacy.return' } });
    await ch.bindQueue('legacy.parked', 'legacy.defer', 'monitor.hit');
    ch.publish('legacy.defer', 'monitor.hit', Buffer.from('{}'), { messageId: 'parked-0', expiration: '600000' });
    ch.publish(DEAD_LETTER_EXCHANGE, 'legacy', Buffer.from('{}'), {
      messageId: 'dead-0',
      headers: {
        'x-death': [
          { queue: 'legacy', reason: 'rejected', count: 1, exchange: EXCHANGE, 'routing-keys': ['monitor.hit'] },
        ],
      },
    });
    await ch.waitForConfirms();
    await ch.close();

    const probe = await conn.createChannel();
    probe.on('error', () => undefined);
    await expect(declareQueue(probe, 'legacy', ['monitor.hit'])).rejects.toThrow(/PRECONDITION_FAILED/);

    const result = await migrateToQuorum(conn, 'legacy', ['monitor.hit']);
    expect(result.steps).toEqual([
      { name: 'legacy.dlq', action: 'migrated', messages: 1 },
      { name: 'legacy', action: 'migrated', messages: 3 },
      { name: 'legacy.parked', action: 'migrated', messages: 1 },
    ]);
    expect(await queueInfo(vhost.vhost, 'legacy.dlq')).toMatchObject({ type: 'quorum' });
    expect(await queueInfo(vhost.vhost, 'legacy.parked')).toMatchObject({
      type: 'quorum',
      arguments: { 'x-dead-letter-exchange': 'legacy.return', 'x-dead-letter-strategy': 'at-least-once' },
    });
    expect(await count('legacy.parked')).toBe(1);
    expect(await queueInfo(vhost.vhost, 'legacy')).toMatchObject({ type: 'quorum' });
    expect(await queueInfo(vhost.vhost, 'legacy.dlq')).toMatchObject({ arguments: { 'x-max-length': DLQ_MAX_LENGTH } });
    expect(await queueInfo(vhost.vhost, 'legacy.migrating')).toBeNull();
    expect(await count('legacy')).toBe(3);
    const dead = await listDeadLetters(conn, 'legacy', { limit: 5 });
    expect(dead.messages).toEqual([expect.objectContaining({ messageId: 'dead-0', routingKey: 'monitor.hit' })]);

    // bindings kept: a new hit lands in the quorum queue; the current declaration is accepted
    await publishHit('new-1');
    await waitFor(async () => (await count('legacy')) === 4);
    const ok = await conn.createChannel();
    await declareQueue(ok, 'legacy', ['monitor.hit']);
    await ok.close();
    // idempotent
    expect((await migrateToQuorum(conn, 'legacy', ['monitor.hit'])).steps.map((s) => s.action)).toEqual([
      'already-current',
      'already-current',
      'already-current',
    ]);
    const r = await management('GET', `/api/queues/${encodeURIComponent(vhost.vhost)}`);
    const names = ((await r.json()) as { name: string }[]).map((q) => q.name);
    expect(names).not.toContain('legacy.migrating');
  });
});
