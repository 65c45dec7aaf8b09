/**
 * The client to read-api: a keep-alive pool of raw sockets (node:net, or node:tls for an https
 * URL) speaking HTTP/1.1 with the strict parser of http/wire.ts. LIFO reuse, at most `maxSockets`
 * open (further calls wait for a socket), idle sockets closed after `idleSocketMs` (below
 * read-api's own keep-alive timeout).
 *
 * Write coalescing: calls are not written the moment they are made but at the end of the event
 * loop turn (setImmediate). The safe calls (GET, HEAD, OPTIONS; no body) of one turn — under
 * load, the calls of every client socket that was readable in that turn — go out together, up to
 * `pipelineDepth` of them in one write on one socket (HTTP/1.1 pipelining; read-api answers them
 * in order). One write and one read carry many calls instead of one each, on both sides of the
 * hop. Only an idle socket takes a batch; a socket with calls in flight takes no more until all
 * are answered, so a call can only wait behind calls of its own turn. And only calls of a route
 * that read-api answers fast are grouped (its Server-Timing `dur`, averaged per route shape, at
 * most `pipelineMaxMs`): a route not answered yet, or slow, goes alone, so a slow call never holds
 * up fast ones. Calls with a body (and other methods) always go alone. `pipelineDepth` 1 turns
 * pipelining off (one call per socket at a time).
 *
 * Answers are small JSON documents, so the body is collected whole and handed back. Deadlines are
 * checked by one sweep timer instead of a timer per call.
 *
 * Failures are classified for the caller: `unavailable` (nothing listening: refused, reset, no
 * route) → 503, `timeout` (no connection or no complete answer in time) → 504, `failed` (a broken
 * answer) → 502. When a socket that read-api had already answered on is lost, its safe calls
 * that got no byte of their answer (the server closed a kept-alive socket as we sent, or closed
 * after answering earlier calls of a batch) are sent once more on a new socket, within their own
 * deadline; nothing else is retried.
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
  /**
   * most safe (GET, HEAD, OPTIONS) calls of one event-loop turn written together on one socket (pipelined);
   * default 8; 1 sends one call per socket at a time
   */
  pipelineDepth?: number;
  /**
   * only calls of a route that read-api answers fast are pipelined: on average within this many
   * milliseconds by its `Server-Timing: app;dur=…` (default 2). Calls of a slower route, or of a
   * route not answered yet, go alone, so a slow call never holds up fast ones behind it.
   */
  pipelineMaxMs?: number;
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
/** safe methods: sent without a body, their calls may share a socket and may be sent again */
const SAFE = new Set(['GET', 'HEAD', 'OPTIONS']);
const STATUS_LINE = /^HTTP\/1\.([01]) (\d{3})(?: |$)/;
/** most routes whose answer time is remembered (the gateway passes any /api/v1/ path on) */
const MAX_ROUTES = 256;

/** a route's shape: the method, the first three path segments and how many there are (`GET api/v1/users 5`) */
export function routeOf(method: string, target: string): string {
  const q = target.indexOf('?');
  const end = q === -1 ? target.length : q;
  let slashes = 0;
  let cut = end;
  for (let i = 0; i < end; i++) if (target.charCodeAt(i) === 47 && ++slashes === 4) cut = i; // one scan, no split (hot path)
  return `${method} ${target.slice(1, cut)} ${slashes + 1}`;
}

function classify(err: NodeJS.ErrnoException): UpstreamFailure {
  if (err instanceof UpstreamFailure) return err;
  if (err instanceof WireError)
    return new UpstreamFailure('failed', `read-api sent a malformed answer: ${err.message}`);
  const code = err.code ?? '';
  if (UNAVAILABLE.has(code)) return new UpstreamFailure('unavailable', `read-api unreachable (${code})`, code);
  return new UpstreamFailure('failed', `read-api call failed (${code || err.message})`, code);
}

const connectionLost = () =>
  classify(Object.assign(new Error('connection closed before the answer'), { code: 'ECONNRESET' }));

interface Call {
  method: string;
  request: string;
  body: Buffer | null;
  /** a safe method without a body: may share a write with other calls, may be sent again */
  safe: boolean;
  /** routeOf the call, when it may be pipelined */
  route: string | null;
  deadline: number;
  retried: boolean;
  resolve: (a: UpstreamAnswer) => void;
  reject: (e: UpstreamFailure) => void;
  conn: Conn | null;
}

class Conn {
  /** calls written (or to be written once connected), in order; the first is being answered */
  readonly queue: Call[] = [];
  /** answers completed on this socket: read-api was there */
  answered = 0;
  connected = false;
  connectDeadline: number;
  // the answer being read (to queue[0])
  buf: Buffer | null = null;
  gotBytes = false;
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

  /** ready for the next answer */
  nextAnswer(): void {
    this.buf = null;
    this.gotBytes = false;
    this.status = 0;
    this.headers = null;
  }
}

export function createUpstreamClient(opts: UpstreamOptions): UpstreamClient {
  const base = new URL(opts.url);
  const secure = base.protocol === 'https:';
  const hostname = base.hostname.replace(/^\[|\]$/g, '');
  const port = base.port === '' ? (secure ? 443 : 80) : Number(base.port);
  const hostHeader = base.host;
  const maxSockets = opts.maxSockets ?? 128;
  const depth = Math.max(1, opts.pipelineDepth ?? 8);
  const pipelineMaxMs = opts.pipelineMaxMs ?? 2;
  const idleSocketMs = opts.idleSocketMs ?? 30_000;
  const connectTimeoutMs = opts.connectTimeoutMs ?? Math.min(opts.timeoutMs, 2000);
  const maxAnswer = opts.maxAnswerBytes ?? 8 * 1024 * 1024;
  const keep = opts.keepHeaders
    ? new Set([...opts.keepHeaders, 'content-length', 'transfer-encoding', 'connection', 'server-timing'])
    : undefined;

  const readBuffer = Buffer.allocUnsafe(64 * 1024);
  const idle: Conn[] = [];
  const all = new Set<Conn>();
  /** calls without a socket yet: this turn's, and those waiting for a free socket */
  const waiting: Call[] = [];
  const active = new Set<Call>();
  /** read-api's time per answer, by route (moving average, ms) */
  const routeMs = new Map<string, number>();
  let pumpScheduled = false;
  let closed = false;

  // one timer checks every deadline: calls' and connections being opened
  const sweeper = setInterval(() => {
    if (active.size === 0) return;
    const now = Date.now();
    for (const call of active) {
      if (now < call.deadline) continue;
      const conn = call.conn;
      if (conn && !conn.connected)
        fail(call, new UpstreamFailure('timeout', 'read-api did not accept a connection in time'));
      else fail(call, new UpstreamFailure('timeout', 'read-api did not answer in time'));
    }
    for (const conn of all)
      if (!conn.connected && now >= conn.connectDeadline && conn.queue.length > 0)
        fail(conn.queue[0]!, new UpstreamFailure('timeout', 'read-api did not accept a connection in time'));
  }, 25);
  sweeper.unref();

  function settle(call: Call): boolean {
    if (!active.delete(call)) return false;
    if (call.conn === null) {
      const i = waiting.indexOf(call);
      if (i !== -1) waiting.splice(i, 1);
    }
    return true;
  }

  /** fails `call`; its socket (which may still bring its answer) is given up, with `err` for the others on it */
  function fail(call: Call, err: UpstreamFailure): void {
    if (!settle(call)) return;
    const conn = call.conn;
    call.conn = null;
    if (conn) {
      const i = conn.queue.indexOf(call);
      if (i !== -1) conn.queue.splice(i, 1);
      if (i === 0) conn.nextAnswer(); // what arrived was this call's
      abandon(conn, err);
    }
    call.reject(err);
  }

  /**
   * The socket is gone or cannot be trusted: forget and destroy it. Its calls are sent again on
   * another socket where that is safe (see the file comment), else failed with `err`.
   */
  function abandon(conn: Conn, err: UpstreamFailure): void {
    const known = all.delete(conn);
    conn.socket.destroy();
    if (!known) return;
    const i = idle.indexOf(conn);
    if (i !== -1) idle.splice(i, 1);
    const calls = conn.queue.splice(0);
    const now = Date.now();
    calls.forEach((call, n) => {
      call.conn = null;
      const untouched = n > 0 || !conn.gotBytes;
      if (!closed && call.safe && !call.retried && conn.answered > 0 && untouched && now < call.deadline) {
        call.retried = true;
        waiting.push(call);
      } else if (settle(call)) call.reject(err);
    });
    pump();
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
      if (conn.queue.length > 0) write(conn, conn.queue);
    });
    if (secure) socket.on('data', (chunk: Buffer) => onData(conn, chunk, false));
    // idle for idleSocketMs: close it (a call's own deadline is the sweeper's business)
    socket.setTimeout(idleSocketMs);
    socket.on('timeout', () => {
      if (conn.queue.length === 0) socket.destroy();
    });
    socket.on('error', (err: NodeJS.ErrnoException) => lost(conn, err));
    socket.on('end', () => lost(conn, null));
    socket.on('close', () => lost(conn, null));
    return conn;
  }

  /** the socket closed or failed */
  function lost(conn: Conn, err: NodeJS.ErrnoException | null): void {
    if (!all.has(conn)) {
      conn.socket.destroy();
      return;
    }
    if (conn.queue.length > 0 && conn.untilClose !== null && err === null)
      // an answer delimited by the end of the connection
      answerHead(conn, Buffer.concat(conn.untilClose, conn.untilCloseBytes));
    abandon(conn, err === null ? connectionLost() : classify(err));
  }

  /** the first call on `conn` has its whole answer (status and headers read, `body`): hand it over */
  function answerHead(conn: Conn, body: Buffer): void {
    const call = conn.queue.shift()!;
    const answer: UpstreamAnswer = { status: conn.status, headers: conn.headers!, body };
    call.conn = null;
    conn.answered++;
    conn.nextAnswer();
    if (call.route !== null) noteTime(call.route, answer.headers['server-timing']);
    if (settle(call)) call.resolve(answer);
  }

  /** writes `calls` (already in conn.queue) in one write */
  function write(conn: Conn, calls: readonly Call[]): void {
    if (calls.length === 1) {
      const call = calls[0]!;
      if (call.body === null || call.body.length === 0) conn.socket.write(call.request, 'latin1');
      else {
        const out = Buffer.allocUnsafe(call.request.length + call.body.length);
        out.write(call.request, 0, 'latin1');
        call.body.copy(out, call.request.length);
        conn.socket.write(out);
      }
      return;
    }
    let text = '';
    for (const call of calls) text += call.request; // pipelined calls have no body
    conn.socket.write(text, 'latin1');
  }

  /** safe, of a route read-api is known to answer fast */
  function groupable(call: Call): boolean {
    return call.route !== null && (routeMs.get(call.route) ?? Infinity) <= pipelineMaxMs;
  }

  /** remembers how long read-api took for a route, from its Server-Timing `dur` */
  function noteTime(route: string, timing: string | undefined): void {
    const at = timing === undefined ? -1 : timing.indexOf('dur=');
    if (at === -1) return;
    const ms = parseFloat(timing!.slice(at + 4));
    if (!(ms >= 0)) return;
    const prev = routeMs.get(route);
    if (prev === undefined && routeMs.size >= MAX_ROUTES) routeMs.clear();
    routeMs.set(route, prev === undefined ? ms : prev + 0.2 * (ms - prev));
  }

  /** the next calls for one socket, taken from the front of `waiting`: one call, or up to `depth` groupable ones */
  function takeGroup(): Call[] {
    if (!groupable(waiting[0]!)) return waiting.splice(0, 1);
    let n = 1;
    while (n < depth && n < waiting.length && groupable(waiting[n]!)) n++;
    return waiting.splice(0, n);
  }

  /** gives `conn` (idle) the next calls that wait */
  function send(conn: Conn, calls: Call[]): void {
    for (const call of calls) {
      call.conn = conn;
      conn.queue.push(call);
    }
    if (conn.connected) write(conn, calls);
  }

  /** hands waiting calls to idle or new sockets while there are any */
  function pump(): void {
    pumpScheduled = false;
    while (waiting.length > 0) {
      const conn = idle.pop() ?? (all.size < maxSockets && !closed ? open() : null);
      if (conn === null) return;
      send(conn, takeGroup());
    }
  }

  /** every call on `conn` is answered */
  function release(conn: Conn): void {
    if (closed || !conn.keepAlive) {
      abandon(conn, connectionLost());
      return;
    }
    if (waiting.length > 0) send(conn, takeGroup());
    else idle.push(conn);
  }

  /**
   * `borrowed`: `chunk` is a view of the shared read buffer, valid only during this call — what is
   * kept beyond it (a partial answer, the bodies handed to callers) is copied.
   */
  function onData(conn: Conn, chunk: Buffer, borrowed: boolean): void {
    let call = conn.queue[0];
    if (call === undefined) {
      // nothing was asked: a server must not talk now; the socket cannot be trusted
      abandon(conn, connectionLost());
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
        answerHead(conn, body);
        const next = conn.queue[0];
        if (!conn.keepAlive) {
          // read-api closes after this answer: the calls behind it go to another socket
          abandon(conn, connectionLost());
          return;
        }
        if (next === undefined) {
          // bytes beyond the last answer asked for: the server and we disagree on framing
          if (buf.length > 0) abandon(conn, connectionLost());
          else release(conn);
          return;
        }
        call = next;
        if (buf.length === 0) return;
        conn.gotBytes = true;
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
      const safe = body === null && SAFE.has(method);
      return new Promise<UpstreamAnswer>((resolve, reject) => {
        const request =
          `${method} ${target} HTTP/1.1\r\nhost: ${hostHeader}\r\n${headers}` +
          (body === null ? '\r\n' : `content-length: ${body.length}\r\n\r\n`);
        const call: Call = {
          method,
          request,
          body,
          safe,
          route: safe && depth > 1 ? routeOf(method, target) : null,
          deadline: Date.now() + opts.timeoutMs,
          retried: false,
          resolve,
          reject,
          conn: null,
        };
        active.add(call);
        waiting.push(call);
        // written at the end of this event-loop turn, together with the turn's other calls
        if (!pumpScheduled) {
          pumpScheduled = true;
          setImmediate(pump);
        }
      });
    },
    close() {
      closed = true;
      clearInterval(sweeper);
      for (const conn of [...all]) abandon(conn, new UpstreamFailure('unavailable', 'the upstream client is closed'));
      for (const call of [...active]) fail(call, new UpstreamFailure('unavailable', 'the upstream client is closed'));
    },
  };
}
