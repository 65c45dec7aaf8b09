/**
 * Keep-alive HTTPS connections per origin for the sender: each connection is an undici `Client`
 * (one socket, one request at a time), handed out newest first. The pool knows, per request,
 * whether it goes out on a socket that already served one (`open` when acquired): only such a
 * request may be sent again when the socket turns out closed (see httpsSender.ts).
 *
 * Invariants: a connection is either in use (acquired, not yet released) or idle in its origin's
 * list, never both; an idle connection whose socket closes (the receiver hung up, or undici's
 * keep-alive timer ran out) leaves the pool and is destroyed, so an origin no longer used leaves
 * nothing behind; at most `maxIdlePerOrigin` connections stay idle per origin. The number in use
 * is bounded by the sender's per-endpoint semaphores, not here (many endpoints share a host).
 */
import { buildConnector, Client } from 'undici';
import type { LookupFunction } from 'node:net';

export interface Connection {
  readonly client: Client;
  readonly origin: string;
  /** its socket is connected: a request now goes out on a socket that served one before */
  open: boolean;
  /** in its origin's idle list */
  idle: boolean;
}

export interface ConnectionPoolOptions {
  /** resolves host names for the socket (the sender's address-policy check) */
  lookup: LookupFunction;
  /** connect, headers and body time limits of undici (the sender also has its whole-request deadline) */
  timeoutMs: number;
  /** an idle socket is closed after this long */
  keepAliveMs: number;
  maxIdlePerOrigin: number;
}

export class ConnectionPool {
  private readonly idle = new Map<string, Connection[]>();
  private readonly all = new Set<Connection>();
  private readonly connect: buildConnector.connector;
  private closed = false;

  constructor(private readonly options: ConnectionPoolOptions) {
    // one connector for every origin: it also holds the TLS session cache (resumed handshakes)
    this.connect = buildConnector({ lookup: options.lookup, timeout: options.timeoutMs });
  }

  /** an idle connection to `origin` (the newest), or a new one (it connects on its first request) */
  acquire(origin: string): Connection {
    const list = this.idle.get(origin);
    const conn = list?.pop();
    if (conn) {
      conn.idle = false;
      if (list!.length === 0) this.idle.delete(origin);
      return conn;
    }
    return this.create(origin);
  }

  /** gives a connection back after its request; one that is not `reusable` (or not connected) is destroyed */
  release(conn: Connection, reusable: boolean): void {
    if (!reusable || !conn.open || this.closed) return this.drop(conn);
    let list = this.idle.get(conn.origin);
    if (!list) this.idle.set(conn.origin, (list = []));
    if (list.length >= this.options.maxIdlePerOrigin) return this.drop(conn);
    conn.idle = true;
    list.push(conn);
  }

  /** destroys a connection, in use or not (ends its request with `err`) */
  drop(conn: Connection, err?: Error): void {
    if (conn.idle) this.unlistIdle(conn);
    if (!this.all.delete(conn)) return;
    void conn.client.destroy(err ?? null).catch(() => undefined);
  }

  close(): void {
    this.closed = true;
    for (const conn of [...this.all]) this.drop(conn);
  }

  private create(origin: string): Connection {
    const { timeoutMs, keepAliveMs } = this.options;
    const client = new Client(origin, {
      connect: this.connect,
      pipelining: 1,
      keepAliveTimeout: keepAliveMs,
      keepAliveMaxTimeout: keepAliveMs,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    const conn: Connection = { client, origin, open: false, idle: false };
    client.on('connect', () => (conn.open = true));
    client.on('disconnect', () => {
      conn.open = false;
      if (conn.idle) this.drop(conn);
    });
    // a failed connect also ends the request that asked for it; nothing to keep
    client.on('connectionError', () => (conn.open = false));
    this.all.add(conn);
    return conn;
  }

  private unlistIdle(conn: Connection): void {
    conn.idle = false;
    const list = this.idle.get(conn.origin);
    if (!list) return;
    const i = list.indexOf(conn);
    if (i >= 0) list.splice(i, 1);
    if (list.length === 0) this.idle.delete(conn.origin);
  }
}
