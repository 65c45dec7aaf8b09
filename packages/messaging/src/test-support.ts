/**
 * Helpers for this package's tests (not exported from the package): a capturing logger, a raw
 * amqplib connection to the test vhost, the RabbitMQ management API, and a TCP proxy that a test
 * can cut to simulate a broker connection loss without touching the shared RabbitMQ server.
 */
import net from 'node:net';
import { Writable } from 'node:stream';
import { connect, type Channel, type ChannelModel } from 'amqplib';
import { createLogger, type Logger } from '@sts/common';
import { testServiceUrls } from '@sts/testing';
import type { MonitorHitEvent, MonitorTestEvent } from './contracts';

export function capturingLogger(service = 'messaging-test'): {
  logger: Logger;
  lines: () => Record<string, unknown>[];
} {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer | string, _enc, cb) {
      chunks.push(chunk.toString());
      cb();
    },
  });
  const logger = createLogger({ service, level: 'debug', stream });
  return {
    logger,
    lines: () =>
      chunks
        .join('')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

export async function rawChannel(
  url: string,
): Promise<{ conn: ChannelModel; ch: Channel; close: () => Promise<void> }> {
  const conn = await connect(url);
  const ch = await conn.createChannel();
  ch.on('error', (err: unknown) => console.warn(`raw test channel error: ${String(err)}`));
  conn.on('error', (err: unknown) => console.warn(`raw test connection error: ${String(err)}`));
  return { conn, ch, close: () => conn.close().catch(() => undefined) };
}

function managementBase(): { base: URL; auth: string } {
  const raw = testServiceUrls().amqpManagement ?? 'http://guest:guest@127.0.0.1:15672';
  const base = new URL(raw);
  const auth = Buffer.from(`${decodeURIComponent(base.username)}:${decodeURIComponent(base.password)}`).toString(
    'base64',
  );
  base.username = '';
  base.password = '';
  return { base, auth };
}

export async function management(method: string, path: string): Promise<Response> {
  const { base, auth } = managementBase();
  return fetch(new URL(path, base), {
    method,
    headers: { authorization: `Basic ${auth}` },
    signal: AbortSignal.timeout(10_000),
  });
}

interface MgmtConnection {
  name: string;
  vhost: string;
  client_properties?: { connection_name?: string };
}

/** Force-closes (management API) every connection in the vhost whose client-given name is `connectionName`; returns how many. */
export async function closeConnectionsNamed(vhost: string, connectionName: string): Promise<number> {
  const r = await management('GET', `/api/vhosts/${encodeURIComponent(vhost)}/connections`);
  if (!r.ok) throw new Error(`management API: ${r.status}`);
  const conns = ((await r.json()) as MgmtConnection[]).filter(
    (c) => c.client_properties?.connection_name === connectionName,
  );
  for (const c of conns) {
    const d = await management('DELETE', `/api/connections/${encodeURIComponent(c.name)}`);
    if (!d.ok && d.status !== 404) throw new Error(`management API DELETE connection: ${d.status}`);
  }
  return conns.length;
}

export async function queueInfo(
  vhost: string,
  queue: string,
): Promise<{ durable: boolean; arguments: Record<string, unknown> } | null> {
  const r = await management('GET', `/api/queues/${encodeURIComponent(vhost)}/${encodeURIComponent(queue)}`);
  if (r.status === 404) return null;
  if (!r.ok) throw new Error(`management API: ${r.status}`);
  return (await r.json()) as { durable: boolean; arguments: Record<string, unknown> };
}

/** A TCP proxy in front of the broker. cut() drops every connection and refuses new ones until restore(). */
export class TcpProxy {
  private server: net.Server | null = null;
  private readonly sockets = new Set<net.Socket>();
  private accepting = true;
  private blackholed = false;
  port = 0;

  constructor(
    private readonly upstreamHost: string,
    private readonly upstreamPort: number,
  ) {}

  static forAmqpUrl(amqpUrl: string): TcpProxy {
    const u = new URL(amqpUrl);
    return new TcpProxy(u.hostname, Number(u.port || 5672));
  }

  async listen(): Promise<void> {
    this.server = net.createServer((client) => {
      if (!this.accepting) {
        client.destroy();
        return;
      }
      const upstream = net.connect(this.upstreamPort, this.upstreamHost);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => undefined);
      }
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
      // client -> broker bytes are dropped while black-holed (the connection is cut right after)
      client.on('data', (chunk: Buffer) => {
        if (!this.blackholed) upstream.write(chunk);
      });
      upstream.pipe(client);
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as net.AddressInfo).port;
  }

  /** The given AMQP URL (same credentials and vhost) routed through this proxy. */
  urlFor(amqpUrl: string): string {
    const u = new URL(amqpUrl);
    u.hostname = '127.0.0.1';
    u.port = String(this.port);
    return u.toString();
  }

  get openConnections(): number {
    return this.sockets.size;
  }

  /** Silently drops what clients send from now on (nothing reaches the broker) until cut(). */
  blackhole(): void {
    this.blackholed = true;
  }

  cut(): void {
    this.accepting = false;
    this.blackholed = false;
    for (const s of this.sockets) s.destroy();
  }

  restore(): void {
    this.accepting = true;
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

let seq = 0;

export function hitPayload(over: Partial<MonitorHitEvent> = {}): MonitorHitEvent {
  seq++;
  return {
    event: 'monitor.hit',
    monitor: { id: 'mon_1', targetUsername: 'alice', keywords: ['launch', 'big news'] },
    tweet: {
      id: `17900000000000${String(seq).padStart(5, '0')}`,
      text: 'The launch is today: big news',
      authorUsername: 'alice',
      createdAt: '2024-05-01T12:00:00.000Z',
    },
    detectedAt: '2024-05-01T12:00:05.123Z',
    ...over,
  };
}

export function testPayload(): MonitorTestEvent {
  return { event: 'monitor.test', monitor: { id: 'mon_2', targetUsername: 'bob', keywords: null }, test: true };
}

/** Resolves after the event loop has turned a few times (lets pending I/O callbacks run). */
export async function turns(n = 5): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
}
