/**
 * The client to read-api: a keep-alive pool of raw sockets (node:net, or node:tls for an https
 * URL) speaking HTTP/1.1 with the strict parser of http/wire.ts. One request per socket at a
 * time (no pipelining), LIFO reuse, at most `maxSockets` open (further calls wait for a socket),
 * idle sockets closed after `idleSocketMs` (below read-api's own keep-alive timeout).
 *
 * Answers are small JSON documents, so the body is collected whole and handed back. Deadlines are
 * checked by one sweep timer instead of a timer per call.
 *
 * Failures are classified for the caller: `unavailable` (nothing listening: refused, reset, no
 * route) → 503, `timeout` (no connection or no complete answer in time) → 504, `failed` (a broken
 * answer) → 502. A GET/HEAD whose reused keep-alive socket closes before any byte of the answer
 * (the server closed it as we sent) is sent once more on a new socket; nothing else is retried.
 */
import net from 'node:net';
import tls from 'node:tls';
import { bodyFraming, ChunkedDecoder, headEnd, NO_BODY, parseHead, WireError, type Framing } from '../http/wire';

export type UpstreamFailureKind = 'unavailable' | 'timeout' | 'failed';

export class UpstreamFailure extends Error {
  override name = 'UpstreamFailure';
  constructor(
    readonly kind: UpstreamFailureKind,
    message: string,
    readonly causeCode?: string,
  ) {
    super(message);
  }
}

export interface UpstreamAnswer {
  status: number;
  /** lower-cased names */
  headers: Record<string, string>;
  body: Buffer;
}

export interface UpstreamClient {
  /**
   * Sends one call. `headers` are complete header lines (`name: value\r\n`) without Host and
   * Content-Length, which are added here; `body` null sends none.
   */
  forward(method: string, target: string, headers: string, body: Buffer | null): Promise<UpstreamAnswer>;
  /** closes every socket; call once in-flight calls are done */
  close(): void;
  /** sockets open now (for tests and metrics) */
  readonly openSockets: number;
}

export interface UpstreamOptions {
  /** base URL of read-api, e.g. http://127.0.0.1:3002 */
  url: string;
  /** overall deadline of one call, connect to last byte */
  timeoutMs: number;
  /** deadline for opening a new connection; default min(timeoutMs, 2000) */
  connectTimeoutMs?: number;
  /** most sockets open to read-api at once; default 128 */
  maxSockets?: number;
  /** idle keep-alive sockets are closed after this; default 30 s (read-api keeps them 65 s) */
  idleSocketMs?: number;
  /** largest answer accepted; default 8 MiB */
  maxAnswerBytes?: number;
  /**
   * answer headers the caller reads (lower-case); the framing ones are always kept. Default: all.
   */
  keepHeaders?: readonly string[];
}

const UNAVAILABLE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
]);
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS']);
const STATUS_LINE = /^HTTP\/1\.([01]) (\d{3})(?: |$)/;

function classify(err: NodeJS.ErrnoException): UpstreamFailure {
  if (err instanceof UpstreamFailure) return err;
  if (err instanceof WireError)
    return new UpstreamFailure('failed', `read-api sent a malformed answer: ${err.message}`);
  const code = err.code ?? '';
  if (UNAVAILABLE.has(code)) return new UpstreamFailure('unavailable', `read-api unreachable (${code})`, code);
  return new UpstreamFailure('failed', `read-api call failed (${code || err.message})`, code);
}

interface Call {
  method: string;
  request: string;
  body: Buffer | null;
  deadline: number;
  retried: boolean;
  resolve: (a: UpstreamAnswer) => void;
  reject: (e: UpstreamFailure) => void;
  conn: Conn | null;
}

class Conn {
  buf: Buffer | null = null;
  call: Call | null = null;
  /** answered at least one call: a close before any answer byte may be the keep-alive race */
  reused = false;
  connected = false;
  connectDeadline: number;
  gotBytes = false;
  // answer being read
  status = 0;
  headers: Record<string, string> | null = null;
  framing: Framing = NO_BODY;
  decoder: ChunkedDecoder | null = null;
  keepAlive = true;
  untilClose: Buffer[] | null = null;
  untilCloseBytes = 0;

  constructor(
    readonly socket: net.Socket,
    connectTimeoutMs: number,
  ) {
    this.connectDeadline = Date.now() + connectTimeoutMs;
  }
}

export function createUpstreamClient(opts: UpstreamOptions): UpstreamClient {
  const base = new URL(opts.url);
  const secure = base.protocol === 'https:';
  const hostname = base.hostname.replace(/^\[|\]$/g, '');
  const port = base.port === '' ? (secure ? 443 : 80) : Number(base.port);
  const hostHeader = base.host;
  const maxSockets = opts.maxSockets ?? 128;
  const idleSocketMs = opts.idleSocketMs ?? 30_000;
  const connectTimeoutMs = opts.connectTimeoutMs ?? Math.min(opts.timeoutMs, 2000);
  const maxAnswer = opts.maxAnswerBytes ?? 8 * 1024 * 1024;
  const keep = opts.keepHeaders
    ? new Set([...opts.keepHeaders, 'content-length', 'transfer-encoding', 'connection'])
    : undefined;

  const readBuffer = Buffer.allocUnsafe(64 * 1024);
  const idle: Conn[] = [];
  const all = new Set<Conn>();
  const waiting: Call[] = [];
  const active = new Set<Call>();
  let closed = false;

  // one timer checks every deadline: calls' and connections being opened
  const sweeper = setInterval(() => {
    if (active.size === 0 && waiting.length === 0) return;
    const now = Date.now();
    for (const call of active) {
      if (now < call.deadline) continue;
      const conn = call.conn;
      if (conn && !conn.connected)
        fail(call, new UpstreamFailure('timeout', 'read-api did not accept a connection in time'));
      else fail(call, new UpstreamFailure('timeout', 'read-api did not answer in time'));
    }
    for (const conn of all)
      if (!conn.connected && now >= conn.connectDeadline && conn.call)
        fail(conn.call, new UpstreamFailure('timeout', 'read-api did not accept a connection in time'));
  }, 25);
  sweeper.unref();

  function settle(call: Call): boolean {
    if (!active.has(call)) return false;
    active.delete(call);
    const i = waiting.indexOf(call);
    if (i !== -1) waiting.splice(i, 1);
    return true;
  }

  function fail(call: Call, err: UpstreamFailure): void {
    if (!settle(call)) return;
    const conn = call.conn;
    call.conn = null;
    if (conn) {
      conn.call = null;
      conn.socket.destroy();
    }
    call.reject(err);
  }

  function open(): Conn {
    const socket = secure
      ? tls.connect({
          host: hostname,
          port,
          servername: net.isIP(hostname) ? undefined : hostname,
          ALPNProtocols: ['http/1.1'],
        })
      : net.connect({
          host: hostname,
          port,
          // reads land in one shared buffer: no Buffer and no stream 'data' event per read
          onread: {
            buffer: readBuffer,
            callback: (n: number, buf: Uint8Array) => {
              onData(conn, (buf as Buffer).subarray(0, n), true);
              return true;
            },
          },
        });
    const conn = new Conn(socket, connectTimeoutMs);
    all.add(conn);
    socket.setNoDelay(true);
    socket.on(secure ? 'secureConnect' : 'connect', () => {
      conn.connected = true;
      const call = conn.call;
      if (call) write(conn, call);
    });
    if (secure) socket.on('data', (chunk: Buffer) => onData(conn, chunk, false));
    // idle for idleSocketMs: close it (a call's own deadline is the sweeper's business)
    socket.setTimeout(idleSocketMs);
    socket.on('timeout', () => {
      if (conn.call === null) socket.destroy();
    });
    socket.on('error', (err: NodeJS.ErrnoException) => lost(conn, err));
    socket.on('end', () => lost(conn, null));
    socket.on('close', () => lost(conn, null));
    return conn;
  }

  /** the socket is gone or going: finish or fail its call, forget it */
  function lost(conn: Conn, err: NodeJS.ErrnoException | null): void {
    if (!all.delete(conn)) {
      conn.socket.destroy();
      return;
    }
    const i = idle.indexOf(conn);
    if (i !== -1) idle.splice(i, 1);
    const call = conn.call;
    conn.call = null;
    conn.socket.destroy();
    if (call) {
      if (conn.untilClose !== null && err === null) {
        // an answer delimited by the end of the connection
        const body = Buffer.concat(conn.untilClose, conn.untilCloseBytes);
        if (settle(call)) call.resolve({ status: conn.status, headers: conn.headers!, body });
      } else if (conn.reused && !conn.gotBytes && call.body === null && IDEMPOTENT.has(call.method) && !call.retried) {
        // the server closed a kept-alive socket as we sent on it: send once more on a new one
        call.retried = true;
        call.conn = null;
        assign(call, null);
      } else {
        const cause = err ?? Object.assign(new Error('connection closed before the answer'), { code: 'ECONNRESET' });
        fail(call, classify(cause));
      }
    }
    pump();
  }

  function write(conn: Conn, call: Call): void {
    conn.gotBytes = false;
    conn.status = 0;
    conn.headers = null;
    conn.buf = null;
    if (call.body === null || call.body.length === 0) conn.socket.write(call.request, 'latin1');
    else {
      const out = Buffer.allocUnsafe(call.request.length + call.body.length);
      out.write(call.request, 0, 'latin1');
      call.body.copy(out, call.request.length);
      conn.socket.write(out);
    }
  }

  /** gives `call` a socket: `conn` when one was just freed, else an idle one, a new one, or the queue */
  function assign(call: Call, conn: Conn | null): void {
    const c = conn ?? idle.pop() ?? (all.size < maxSockets ? open() : null);
    if (c === null) {
      waiting.push(call);
      return;
    }
    c.call = call;
    call.conn = c;
    if (c.connected) write(c, call);
  }

  function pump(): void {
    while (waiting.length > 0 && (idle.length > 0 || all.size < maxSockets)) assign(waiting.shift()!, null);
  }

  function release(conn: Conn): void {
    conn.call = null;
    conn.reused = true;
    if (closed || !conn.keepAlive) {
      all.delete(conn);
      conn.socket.destroy();
      pump();
      return;
    }
    const next = waiting.shift();
    if (next) {
      assign(next, conn);
      return;
    }
    idle.push(conn);
  }

  /**
   * `borrowed`: `chunk` is a view of the shared read buffer, valid only during this call — what is
   * kept beyond it (a partial answer, the body handed to the caller) is copied.
   */
  function onData(conn: Conn, chunk: Buffer, borrowed: boolean): void {
    const call = conn.call;
    if (call === null) {
      // nothing was asked: a server must not talk now; the socket cannot be trusted
      conn.socket.destroy();
      return;
    }
    conn.gotBytes = true;
    // answers spread over several reads (rare: read-api's are small) take the copying path
    if (borrowed && (conn.buf !== null || conn.untilClose !== null)) {
      chunk = Buffer.from(chunk);
      borrowed = false;
    }
    const own = (b: Buffer) => (borrowed ? Buffer.from(b) : b);
    try {
      if (conn.untilClose !== null) {
        conn.untilCloseBytes += chunk.length;
        if (conn.untilCloseBytes > maxAnswer) throw new WireError(502, 'BAD_GATEWAY', 'answer too large');
        conn.untilClose.push(chunk);
        return;
      }
      let buf = conn.buf === null ? chunk : Buffer.concat([conn.buf, chunk]);
      for (;;) {
        if (conn.headers === null) {
          const end = headEnd(buf);
          if (end === -1) {
            if (buf.length > 64 * 1024) throw new WireError(502, 'BAD_GATEWAY', 'answer head too large');
            conn.buf = own(buf);
            return;
          }
          const head = parseHead(buf.toString('latin1', 0, end), keep);
          buf = buf.subarray(end + 4);
          const m = STATUS_LINE.exec(head.start);
          if (!m) throw new WireError(502, 'BAD_GATEWAY', 'malformed status line');
          const status = Number(m[2]);
          const headers = head.headers;
          if (status >= 100 && status < 200) continue; // 100 Continue, 103 Early Hints
          conn.status = status;
          conn.headers = headers;
          const connection = headers.connection?.toLowerCase();
          conn.keepAlive = m[1] === '1' ? !(connection !== undefined && connection.includes('close')) : false;
          if (call.method === 'HEAD' || status === 204 || status === 304) conn.framing = NO_BODY;
          else {
            conn.framing = bodyFraming(headers);
            if (conn.framing.kind === 'none' && headers['content-length'] === undefined) {
              // no length: the answer ends with the connection
              conn.keepAlive = false;
              conn.untilClose = buf.length > 0 ? [own(buf)] : [];
              conn.untilCloseBytes = buf.length;
              conn.buf = null;
              return;
            }
            if (conn.framing.kind === 'length' && conn.framing.length > maxAnswer)
              throw new WireError(502, 'BAD_GATEWAY', 'answer too large');
          }
          conn.decoder = conn.framing.kind === 'chunked' ? new ChunkedDecoder(maxAnswer) : null;
        }
        let body: Buffer;
        if (conn.framing.kind === 'none') body = Buffer.alloc(0);
        else if (conn.framing.kind === 'length') {
          if (buf.length < conn.framing.length) {
            conn.buf = own(buf);
            return;
          }
          body = own(buf.length === conn.framing.length ? buf : buf.subarray(0, conn.framing.length));
          buf = buf.subarray(conn.framing.length);
        } else {
          // the decoder keeps views of what it is fed
          if (borrowed) {
            buf = Buffer.from(buf);
            borrowed = false;
          }
          const used = conn.decoder!.feed(buf);
          buf = buf.subarray(used);
          if (!conn.decoder!.done) {
            conn.buf = buf.length > 0 ? buf : null;
            return;
          }
          body = conn.decoder!.body;
        }
        // complete: bytes beyond the answer mean the server and we disagree on framing
        if (buf.length > 0) conn.keepAlive = false;
        conn.buf = null;
        const answer: UpstreamAnswer = { status: conn.status, headers: conn.headers, body };
        call.conn = null;
        if (settle(call)) call.resolve(answer);
        release(conn);
        return;
      }
    } catch (err) {
      fail(call, classify(err as NodeJS.ErrnoException));
    }
  }

  return {
    get openSockets() {
      return all.size;
    },
    forward(method, target, headers, body) {
      if (closed) return Promise.reject(new UpstreamFailure('unavailable', 'the upstream client is closed'));
      return new Promise<UpstreamAnswer>((resolve, reject) => {
        const request =
          `${method} ${target} HTTP/1.1\r\nhost: ${hostHeader}\r\n${headers}` +
          (body === null ? '\r\n' : `content-length: ${body.length}\r\n\r\n`);
        const call: Call = {
          method,
          request,
          body,
          deadline: Date.now() + opts.timeoutMs,
          retried: false,
          resolve,
          reject,
          conn: null,
        };
        active.add(call);
        assign(call, null);
      });
    },
    close() {
      closed = true;
      clearInterval(sweeper);
      for (const conn of all) conn.socket.destroy();
      for (const call of [...active]) fail(call, new UpstreamFailure('unavailable', 'the upstream client is closed'));
    },
  };
}
