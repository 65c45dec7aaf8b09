import { randomUUID } from 'node:crypto';
import { createLogger } from '@sts/common';
import {
  AmqpClient,
  connectForTools,
  DEAD_LETTER_EXCHANGE,
  EXCHANGE,
  type ConsumeOutcome,
  type Envelope,
} from '@sts/messaging';
import { createTestVhost, waitFor } from '@sts/testing';
import { runCli } from '../main';

const logger = createLogger({ service: 'cli-dlq-test', level: 'error' });

describe('dlq and queues commands (real RabbitMQ)', () => {
  let env: NodeJS.ProcessEnv;
  let client: AmqpClient;
  let conn: Awaited<ReturnType<typeof connectForTools>>;
  const outcome = { value: 'dead-letter' as ConsumeOutcome };
  const seen: Envelope<'monitor.hit' | 'monitor.test' | 'webhook.redeliver'>[] = [];
  const ids: string[] = [];

  const cli = (...argv: string[]) => runCli(argv, env);
  const json = async (...argv: string[]) => {
    const r = await cli(...argv, '--json');
    if (r.code !== 0) throw new Error(`exit ${r.code}: ${r.stderr}`);
    return JSON.parse(r.stdout) as Record<string, unknown>;
  };
  const depth = async (queue: string) => {
    const ch = await conn.createChannel();
    try {
      return (await ch.checkQueue(queue)).messageCount;
    } finally {
      await ch.close();
    }
  };

  beforeAll(async () => {
    const { url } = await createTestVhost();
    env = { AMQP_URL: url };
    client = new AmqpClient({ url, logger, name: 'cli-dlq-test' });
    await client.start();
    conn = await connectForTools(url);
    // stands in for the dispatcher: same queue name and bindings, dead-letters while outcome says so
    await client.consume({
      queue: 'webhook-dispatcher',
      bindings: ['monitor.hit', 'monitor.test', 'webhook.redeliver'],
      handler: (e) => {
        seen.push(e);
        return Promise.resolve(outcome.value);
      },
    });
    for (let i = 0; i < 3; i++) {
      const id = randomUUID();
      ids.push(id);
      await client.publish(
        'monitor.test',
        {
          event: 'monitor.test',
          monitor: { id: `m${i}`, targetUsername: 'nasa', query: null, keywords: null },
          test: true,
        },
        {
          messageId: id,
          headers: { accountId: `acc-${i}` },
        },
      );
    }
    await waitFor(async () => (await depth('webhook-dispatcher.dlq')) === 3);
  });

  afterAll(async () => {
    await client.stop();
    await conn.close();
  });

  it('dlq list --json: routing key, message id, death reason/count, headers, body preview; nothing removed', async () => {
    const out = await json('dlq', 'list', '--limit', '2');
    expect(out).toMatchObject({ dlq: 'webhook-dispatcher.dlq', total: 3, meta: { count: 2 } });
    const data = out.data as Record<string, unknown>[];
    expect(data[0]).toMatchObject({
      message_id: ids[0],
      routing_key: 'monitor.test',
      exchange: EXCHANGE,
      death_reason: 'rejected',
      death_count: 1,
      headers: { 'x-account-id': 'acc-0' },
    });
    expect(data[0]!.body_preview).toMatch(/^\{"event":"monitor\.test"/);
    expect(data.map((d) => d.message_id)).toEqual(ids.slice(0, 2));
    expect(await depth('webhook-dispatcher.dlq')).toBe(3);
    const text = await cli('dlq', 'list');
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/webhook-dispatcher\.dlq: 3 dead letter\(s\), showing 3/);
    expect(text.stdout).toContain(`${ids[2]}  monitor.test  rejected ×1`);
    expect(text.stdout).toMatch(/headers: x-account-id=acc-2/);
  });

  it('dlq replay --message-id, then --limit: republished to the original routing key, removed from the DLQ', async () => {
    outcome.value = 'ack';
    const one = await json('dlq', 'replay', '--message-id', ids[1]!);
    expect(one).toEqual({
      dlq: 'webhook-dispatcher.dlq',
      replayed: [{ message_id: ids[1], exchange: EXCHANGE, routing_key: 'monitor.test' }],
      kept: [],
    });
    await waitFor(() =>
      seen.some((e) => e.messageId === ids[1] && e.headers.accountId === 'acc-1' && seen.indexOf(e) >= 3),
    );
    expect(await depth('webhook-dispatcher.dlq')).toBe(2);
    const rest = await cli('dlq', 'replay', '--limit', '5');
    expect(rest.code).toBe(0);
    expect(rest.stdout).toMatch(/webhook-dispatcher\.dlq: 2 replayed, 0 left in the DLQ/);
    await waitFor(() => seen.length === 6);
    expect(await depth('webhook-dispatcher.dlq')).toBe(0);
    expect((await cli('dlq', 'list')).stdout).toMatch(/webhook-dispatcher\.dlq is empty/);
  });

  it('refuses bad input with a usage error; a queue without DLQ or no broker is a clear error', async () => {
    let r = await cli('dlq', 'replay', '--limit', '2', '--message-id', 'x');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/give --limit or --message-id, not both/);
    r = await cli('dlq', 'list', '--limit', '0');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--limit must be a whole number from 1 to 1000/);
    r = await cli('dlq', 'list', '--queue', 'webhook-dispatcher.dlq');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/names the consumer queue, not its DLQ/);
    r = await cli('dlq', 'list', '--queue', 'nothing-here');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/dead-letter queue nothing-here\.dlq does not exist/);
    r = await cli('dlq', 'replay', '--message-id', 'not-there');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/no message with id not-there in webhook-dispatcher\.dlq/);
    r = await runCli(['dlq', 'list'], { AMQP_URL: 'amqp://user:pw@127.0.0.1:1/' });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/RabbitMQ \(AMQP_URL\)/);
    expect(r.stderr).not.toContain('pw');
  });

  it('queues migrate moves a classic queue of an earlier version to quorum, keeping its messages', async () => {
    const ch = await conn.createConfirmChannel();
    await ch.assertQueue('old-svc.dlq', { durable: true });
    await ch.bindQueue('old-svc.dlq', DEAD_LETTER_EXCHANGE, 'old-svc');
    await ch.assertQueue('old-svc', {
      durable: true,
      arguments: { 'x-dead-letter-exchange': DEAD_LETTER_EXCHANGE, 'x-dead-letter-routing-key': 'old-svc' },
    });
    await ch.bindQueue('old-svc', EXCHANGE, 'monitor.hit');
    ch.publish(EXCHANGE, 'monitor.hit', Buffer.from('{}'), { messageId: 'kept-1' });
    await ch.waitForConfirms();
    await ch.close();
    let r = await cli('queues', 'migrate', '--queue', 'old-svc');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--bindings is required for queue old-svc/);
    const out = await json('queues', 'migrate', '--queue', 'old-svc', '--bindings', 'monitor.hit');
    expect(out).toEqual({
      queue: 'old-svc',
      steps: [
        { name: 'old-svc.dlq', action: 'migrated', messages: 0 },
        { name: 'old-svc', action: 'migrated', messages: 1 },
        // only the dispatcher's queue has a parking queue
        { name: 'old-svc.parked', action: 'absent', messages: 0 },
      ],
    });
    expect(await depth('old-svc')).toBe(1);
    r = await cli('queues', 'migrate');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/webhook-dispatcher: already current/);
  });
});
