import { createServer, connect, type Server, type Socket } from 'node:net';
import type { ChannelModel } from 'amqplib';
import { randomUUID } from 'node:crypto';
import { capturingLogger, createTestVhost, rawChannel, waitFor } from '@sts/testing';
import { AmqpClient } from './client';
import { coalesceWrites } from './coalesce';
import { hitPayload } from '../test/payloads';

/** a connected TCP pair on loopback: what the client socket writes, the server side receives */
async function socketPair(): Promise<{ client: Socket; received: () => Buffer; server: Server }> {
  const chunks: Buffer[] = [];
  const server = createServer((s) => s.on('data', (c: Buffer) => chunks.push(c)));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  const client = connect(port, '127.0.0.1');
  await new Promise<void>((r) => client.once('connect', r));
  return { client, server, received: () => Buffer.concat(chunks) };
}

/** counts the socket's system-call-level writes (node's _write and _writev) */
function countWrites(socket: Socket): { writes: number } {
  const counter = { writes: 0 };
  const s = socket as unknown as Record<'_write' | '_writev', (...a: unknown[]) => unknown>;
  for (const name of ['_write', '_writev'] as const) {
    const original = s[name].bind(socket);
    s[name] = (...args: unknown[]) => {
      counter.writes++;
      return original(...args);
    };
  }
  return counter;
}

const asModel = (stream: unknown) => ({ connection: { stream } }) as unknown as ChannelModel;

describe('coalesceWrites', () => {
  it('sends the frames written in one turn as one write, in order, and later turns again', async () => {
    const { client, server, received } = await socketPair();
    try {
      const counter = countWrites(client);
      expect(coalesceWrites(asModel(client))).toBe(true);
      const frames = Array.from({ length: 100 }, (_, i) => Buffer.from(`frame-${i};`));
      for (const f of frames) client.write(f);
      await new Promise((r) => setImmediate(r));
      expect(counter.writes).toBe(1);
      client.write(Buffer.from('later;'));
      const expected = Buffer.concat([...frames, Buffer.from('later;')]).toString();
      await waitFor(() => received().toString() === expected, 5000);
      expect(counter.writes).toBe(2);
    } finally {
      client.destroy();
      server.close();
    }
  });

  it('leaves a connection without a writable socket alone', () => {
    expect(coalesceWrites(asModel(undefined))).toBe(false);
    expect(coalesceWrites({} as ChannelModel)).toBe(false);
  });
});

describe('AmqpClient acknowledgements settled in one turn', () => {
  it('all reach the broker before the connection closes: none comes back', async () => {
    const vhost = await createTestVhost();
    const client = new AmqpClient({ url: vhost.url, logger: capturingLogger().logger, name: 'coalesce-test' });
    const raw = await rawChannel(vhost.url);
    await client.start();
    const queue = `coalesce-${randomUUID()}`;
    const n = 200;
    try {
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const seen = new Map<string, number>();
      await client.consume({
        queue,
        bindings: ['monitor.hit'],
        prefetch: n,
        handler: async (env) => {
          seen.set(env.messageId, (seen.get(env.messageId) ?? 0) + 1);
          await gate; // every handler settles in the same turn
          return 'ack';
        },
      });
      for (let i = 0; i < n; i++) {
        await client.publish('monitor.hit', hitPayload(), {
          messageId: `m-${i}`,
          headers: { accountId: 'acc', hitId: randomUUID() },
        });
      }
      await waitFor(() => seen.size === n, 20_000);
      release();
    } finally {
      // unacknowledged messages go back to the queue when the channel closes
      await client.stop();
    }
    expect((await raw.ch.checkQueue(queue)).messageCount).toBe(0);
    await raw.close();
  }, 60_000);
});
