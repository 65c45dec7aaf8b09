/**
 * RabbitMQ beside the AMQP client under test: a raw amqplib channel to a test vhost, and the
 * management API (queues, force-closing connections by their client-given name).
 */
import { connect, type Channel, type ChannelModel } from 'amqplib';
import { testServiceUrls } from './isolation';

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

/** A call to the RabbitMQ management API (`body`, when given, is sent as JSON: policies, …). */
export async function management(method: string, path: string, body?: unknown): Promise<Response> {
  const { base, auth } = managementBase();
  return fetch(new URL(path, base), {
    method,
    headers: { authorization: `Basic ${auth}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
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
