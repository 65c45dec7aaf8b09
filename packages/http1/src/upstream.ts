/**
 * A client to one upstream HTTP/1.1 server (the gateway uses it for read-api): a keep-alive pool of raw
 * sockets (node:net, or node:tls for an https URL) speaking HTTP/1.1 with the strict parser of
 * wire.ts. LIFO reuse, at most `maxSockets` open (further calls wait for a socket), idle sockets
 * closed after `idleSocketMs` (below the upstream's own keep-alive timeout).
 *
 * Write coalescing: calls are not written the moment they are made but at the end of the event
 * loop turn (setImmediate). The safe calls (GET, HEAD, OPTIONS; no body) of one turn — under
 * load, the calls of every client socket that was readable in that turn — go out together, up to
 * `pipelineDepth` of them in one write on one socket (HTTP/1.1 pipelining; the upstream answers them
 * in order). One write and one read carry many calls instead of one each, on both sides of the
 * hop. Only an idle socket takes a batch; a socket with calls in flight takes no more until all
 * are answered, so a call can only wait behind calls of its own turn. And only calls of a route
 * that the upstream answers fast are grouped (its Server-Timing `dur`, averaged per route shape, at
 * most `pipelineMaxMs`): a route not answered yet, or slow, goes alone, so a slow call never holds
 * up fast ones. Calls with a body (and other methods) always go alone. `pipelineDepth` 1 turns
 * pipelining off (one call per socket at a time).
 *
 * Answers are small JSON documents, so the body is collected whole and handed back. Deadlines and
 * idle sockets are checked by one sweep timer instead of a timer per call or per socket (node
 * re-arms a socket's timeout on every read and write).
 *
 * Answers are matched to calls by order, so an answer framed wrongly would hand one client's bytes
 * to another. Three checks keep the framing honest:
 * - every answer must echo the call's `x-request-id` (when the call has one): a mismatch means the
 *   socket is out of step, and it is dropped;
 * - an answer with calls behind it on the same socket is held until the next answer's head has
 *   been read and checked: a Content-Length too long swallows the start of the next answer (whose
 *   head then never matches), one too short leaves bytes that do not form the next head; either
 *   way the held answer is failed, never handed over;
 * - bytes after the last answer asked for fail that answer too (a Content-Length too short).
 * Such a socket's calls without an answer fail (502) and are not sent again: the upstream is not
 * framing its answers as we read them.
 *
 * Failures are classified for the caller: `unavailable` (nothing listening: refused, reset, no
 * route) → 503, `timeout` (no connection or no complete answer in time) → 504, `failed` (a broken
 * answer) → 502, `cancelled` (the caller's client went away before the call was written; it was
 * not sent). When a socket that the upstream had already answered on is lost, its safe calls
 * that got no byte of their answer (the server closed a kept-alive socket as we sent, or closed
 * after answering earlier calls of a batch) are sent once more on a new socket, within their own
 * deadline; nothing else is retried.
 */
import net from 'node:net';
import tls from 'node:tls';
import { endSpan, SpanKind, startSpan, traceHeaders, tracingEnabled } from '@sts/telemetry';
import {
  bodyFraming,
  ChunkedDecoder,
  headEnd,
  NO_BODY,
  parseHead,
  SAFE_METHODS,
  WireError,
  type Framing,
} from './wire';

export type UpstreamFailureKind = 'unavailable' | 'timeout' | 'failed' | 'cancelled';

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

/** how a call ends: its answer, or the failure (then `answer` is undefined) */
export type UpstreamDone = (err: UpstreamFailure | null, answer?: UpstreamAnswer) => void;

/** the caller's client: once it is `closed`, a call not written yet is not sent (it fails as `cancelled`) */
export interface UpstreamCaller {
  readonly closed: boolean;
}

export interface UpstreamClient {
  /**
   * Sends one call. `headers` are complete header lines (`name: value\r\n`) without Host and
   * Content-Length, which are added here; `body` null sends none. `requestId`: the x-request-id
   * sent in `headers`, which the answer must echo (else the socket is dropped as out of step).
   */
  forward(
    method: string,
    target: string,
    headers: string,
    body: Buffer | null,
    requestId?: string,
    caller?: UpstreamCaller,
  ): Promise<UpstreamAnswer>;
  /**
   * forward() with a callback instead of a promise, for a hot path (no promise, no microtask per
   * call). `done` is called once, never from within this call, possibly synchronously from within
   * the client's handling of a read or a timer; it must not throw.
   */
  call(
    method: string,
    target: string,
    headers: string,
    body: Buffer | null,
    requestId: string | undefined,
    caller: UpstreamCaller | undefined,
    done: UpstreamDone,
  ): void;
  /** closes every socket; call once in-flight calls are done */
  close(): void;
  /** sockets open now (for tests and metrics) */
  readonly openSockets: number;
}

export interface UpstreamOptions {
  /** base URL of the upstream, e.g. http://127.0.0.1:3002 */
  url: string;
  /** overall deadline of one call, connect to last byte */
  timeoutMs: number;
  /** deadline for opening a new connection; default min(timeoutMs, 2000) */
  connectTimeoutMs?: number;
  /** most sockets open to the upstream at once; default 128 */
  maxSockets?: number;
  /**
   * most safe (GET, HEAD, OPTIONS) calls of one event-loop turn written together on one socket (pipelined);
   * default 8; 1 sends one call per socket at a time
   */
  pipelineDepth?: number;
  /**
   * only calls of a route that the upstream answers fast are pipelined: on average within this many
   * milliseconds by its `Server-Timing: app;dur=…` (default 2). Calls of a slower route, or of a
   * route not answered yet, go alone, so a slow call never holds up fast ones behind it.
   */
  pipelineMaxMs?: number;
  /** idle keep-alive sockets are closed after this; default 30 s (keep it below the upstream's keep-alive timeout) */
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
const STATUS_LINE = /^HTTP\/1\.([01]) (\d{3})(?: |$)/;
/** most routes whose answer time is remembered (a proxy may pass any path on) */
const MAX_ROUTES = 256;
/** longest answer head accepted */
const MAX_ANSWER_HEAD = 64 * 1024;

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
    return new UpstreamFailure('failed', `upstream sent a malformed answer: ${err.message}`);
  const code = err.code ?? '';
  if (UNAVAILABLE.has(code)) return new UpstreamFailure('unavailable', `upstream unreachable (${code})`, code);
  return new UpstreamFailure('failed', `upstream call failed (${code || err.message})`, code);
}

const connectionLost = () =>
  classify(Object.assign(new Error('connection closed before the answer'), { code: 'ECONNRESET' }));

/** the upstream's answers and our calls are out of step on a socket: it is not trusted any more */
class OutOfStep extends UpstreamFailure {
  constructor(message: string) {
    super('failed', `upstream answers out of step: ${message}`);
  }
}

interface Call {
  method: string;
  request: string;
  body: Buffer | null;
  /** a safe method without a body: may share a write with other calls, may be sent again */
  safe: boolean;
  /** routeOf the call, when it may be pipelined */
  route: string | null;
  requestId: string | null;
  caller: UpstreamCaller | null;
  deadline: number;
  retried: boolean;
  done: UpstreamDone;
  conn: Conn | null;
}

class Conn {
  /** calls written (or to be written once connected), in order; the first is being answered */
  readonly queue: Call[] = [];
  /** a call with a complete answer not handed over yet: the next answer's head must show the framing held */
  held: Call | null = null;
  heldAnswer: UpstreamAnswer | null = null;
  /** answers completed on this socket: the upstream was there */
  answered = 0;
  connected = false;
  connectDeadline: number;
  /** when it last joined the idle sockets (Date.now()) */
  idleSince = 0;
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

/** the settings and the state of one client, shared by the functions below */
interface Pool {
  readonly secure: boolean;
  readonly hostname: string;
  readonly port: number;
  readonly hostHeader: string;
  readonly timeoutMs: number;
  readonly maxSockets: number;
  readonly depth: number;
  readonly pipelineMaxMs: number;
  readonly idleSocketMs: number;
  readonly connectTimeoutMs: number;
  readonly maxAnswer: number;
  readonly keep: ReadonlySet<string> | undefined;
  /** reads of plain sockets land here: no Buffer and no stream 'data' event per read */
  readonly readBuffer: Buffer;
  /** sockets with no call, in the order they became idle (the last is taken first) */
  readonly idle: Conn[];
  readonly all: Set<Conn>;
  /** calls without a socket yet: this turn's, and those waiting for a free socket */
  readonly waiting: Call[];
  readonly active: Set<Call>;
  /** the upstream's time per answer, by route (moving average, ms) */
  readonly routeMs: Map<string, number>;
  pumpScheduled: boolean;
  /** pump(this), made once (handed to setImmediate) */
  runPump: () => void;
  closed: boolean;
}

function createPool(opts: UpstreamOptions): Pool {
  const base = new URL(opts.url);
  const secure = base.protocol === 'https:';
  const p: Pool = {
    secure,
    hostname: base.hostname.replace(/^\[|\]$/g, ''),
    port: base.port === '' ? (secure ? 443 : 80) : Number(base.port),
    hostHeader: base.host,
    timeoutMs: opts.timeoutMs,
    maxSockets: opts.maxSockets ?? 128,
    depth: Math.max(1, opts.pipelineDepth ?? 8),
    pipelineMaxMs: opts.pipelineMaxMs ?? 2,
    idleSocketMs: opts.idleSocketMs ?? 30_000,
    connectTimeoutMs: opts.connectTimeoutMs ?? Math.min(opts.timeoutMs, 2000),
    maxAnswer: opts.maxAnswerBytes ?? 8 * 1024 * 1024,
    keep: opts.keepHeaders
      ? new Set([
          ...opts.keepHeaders,
          'content-length',
          'transfer-encoding',
          'connection',
          'server-timing',
          'x-request-id',
        ])
      : undefined,
    readBuffer: Buffer.allocUnsafe(64 * 1024),
    idle: [],
    all: new Set(),
    waiting: [],
    active: new Set(),
    routeMs: new Map(),
    pumpScheduled: false,
    runPump: () => pump(p),
    closed: false,
  };
  return p;
}

/** the waiting calls are handed out at the end of this event-loop turn, together with the turn's other calls */
function schedulePump(p: Pool): void {
  if (p.pumpScheduled) return;
  p.pumpScheduled = true;
  setImmediate(p.runPump);
}

// ---------------------------------------------------------------------------------------------
// settling calls and giving up sockets

function settle(p: Pool, call: Call): boolean {
  if (!p.active.delete(call)) return false;
  if (call.conn === null) {
    const i = p.waiting.indexOf(call);
    if (i !== -1) p.waiting.splice(i, 1);
  }
  return true;
}

/** fails `call`; its socket (which may still bring its answer) is given up, with `err` for the others on it */
function fail(p: Pool, call: Call, err: UpstreamFailure): void {
  if (!settle(p, call)) return;
  const conn = call.conn;
  call.conn = null;
  if (conn) {
    if (conn.held === call) conn.held = conn.heldAnswer = null;
    const i = conn.queue.indexOf(call);
    if (i !== -1) conn.queue.splice(i, 1);
    if (i === 0) conn.nextAnswer(); // what arrived was this call's
    abandon(p, conn, err);
  }
  call.done(err);
}

/**
 * The socket is gone or cannot be trusted: forget and destroy it. Its calls are sent again on
 * another socket where that is safe (see the file comment), else failed with `err`. A held answer
 * fails too: without the next head, its framing is not proven.
 */
function abandon(p: Pool, conn: Conn, err: UpstreamFailure): void {
  const known = p.all.delete(conn);
  conn.socket.destroy();
  if (!known) return;
  const i = p.idle.indexOf(conn);
  if (i !== -1) p.idle.splice(i, 1);
  const held = conn.held;
  conn.held = conn.heldAnswer = null;
  if (held !== null) {
    held.conn = null;
    if (settle(p, held)) held.done(err);
  }
  const calls = conn.queue.splice(0);
  const now = Date.now();
  const retry = !(err instanceof OutOfStep) && !p.closed && conn.answered > 0;
  calls.forEach((call, n) => {
    call.conn = null;
    const untouched = n > 0 || !conn.gotBytes;
    if (retry && call.safe && !call.retried && untouched && now < call.deadline) {
      call.retried = true;
      p.waiting.push(call);
    } else if (settle(p, call)) call.done(err);
  });
  pump(p);
}

/** the socket closed or failed */
function lost(p: Pool, conn: Conn, err: NodeJS.ErrnoException | null): void {
  if (!p.all.has(conn)) {
    conn.socket.destroy();
    return;
  }
  if (conn.queue.length > 0 && conn.untilClose !== null && err === null)
    // an answer delimited by the end of the connection
    complete(p, conn, Buffer.concat(conn.untilClose, conn.untilCloseBytes), Buffer.alloc(0));
  else if (conn.held !== null && conn.buf === null && !conn.gotBytes) {
    // the connection ended right after a complete answer: hand it over, unless its body holds the
    // next call's answer (a length too long by exactly the rest: the next answer echoes its id)
    const id = conn.queue[0]?.requestId;
    if (id == null || !holdsHead(conn.heldAnswer!.body, id)) handOver(p, conn);
  }
  abandon(p, conn, err === null ? connectionLost() : classify(err));
}

/** `body` contains an answer head echoing `requestId` (rare path: a connection lost after a held answer) */
function holdsHead(body: Buffer, requestId: string): boolean {
  const text = body.toString('latin1');
  const at = text.toLowerCase().indexOf(`\r\nx-request-id:`);
  return at !== -1 && text.includes(requestId, at);
}

// ---------------------------------------------------------------------------------------------
// sockets and writes

function open(p: Pool): Conn {
  const socket = p.secure
    ? tls.connect({
        host: p.hostname,
        port: p.port,
        servername: net.isIP(p.hostname) ? undefined : p.hostname,
        ALPNProtocols: ['http/1.1'],
      })
    : net.connect({
        host: p.hostname,
        port: p.port,
        onread: {
          buffer: p.readBuffer,
          callback: (n: number, buf: Uint8Array) => {
            onData(p, conn, (buf as Buffer).subarray(0, n), true);
            return true;
          },
        },
      });
  const conn = new Conn(socket, p.connectTimeoutMs);
  p.all.add(conn);
  socket.setNoDelay(true);
  socket.on(p.secure ? 'secureConnect' : 'connect', () => {
    conn.connected = true;
    if (conn.queue.length > 0) write(conn, conn.queue);
  });
  if (p.secure) socket.on('data', (chunk: Buffer) => onData(p, conn, chunk, false));
  // idle for idleSocketMs: closed by the sweep (closeIdle)
  socket.on('error', (err: NodeJS.ErrnoException) => lost(p, conn, err));
  socket.on('end', () => lost(p, conn, null));
  socket.on('close', () => lost(p, conn, null));
  return conn;
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

/** safe, of a route the upstream is known to answer fast */
function groupable(p: Pool, call: Call): boolean {
  return call.route !== null && (p.routeMs.get(call.route) ?? Infinity) <= p.pipelineMaxMs;
}

/** remembers how long the upstream took for a route, from its Server-Timing `dur` */
function noteTime(p: Pool, route: string, timing: string | undefined): void {
  const at = timing === undefined ? -1 : timing.indexOf('dur=');
  if (at === -1) return;
  const ms = parseFloat(timing!.slice(at + 4));
  if (!(ms >= 0)) return;
  const prev = p.routeMs.get(route);
  if (prev === undefined && p.routeMs.size >= MAX_ROUTES) p.routeMs.clear();
  p.routeMs.set(route, prev === undefined ? ms : prev + 0.2 * (ms - prev));
}

/**
 * The next calls for one socket, taken from the front of `waiting`: one call, or up to `depth`
 * groupable ones. Calls whose client has gone are dropped on the way (never written).
 */
function takeGroup(p: Pool): Call[] {
  const { waiting } = p;
  const group: Call[] = [];
  let i = 0;
  for (; i < waiting.length && group.length < p.depth; i++) {
    const call = waiting[i]!;
    if (call.caller !== null && call.caller.closed) {
      if (p.active.delete(call)) call.done(new UpstreamFailure('cancelled', 'the client went away; not sent'));
    } else if (group.length === 0) {
      group.push(call);
      if (!groupable(p, call)) {
        i++;
        break;
      }
    } else if (groupable(p, call)) group.push(call);
    else break;
  }
  waiting.splice(0, i);
  return group;
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
function pump(p: Pool): void {
  p.pumpScheduled = false;
  while (p.waiting.length > 0) {
    const conn = p.idle.pop() ?? (p.all.size < p.maxSockets && !p.closed ? open(p) : null);
    if (conn === null) return;
    const group = takeGroup(p);
    if (group.length > 0) send(conn, group);
    else toIdle(conn, p); // every call left had been given up by its client
  }
}

/** every call on `conn` is answered */
function release(p: Pool, conn: Conn): void {
  if (p.closed || !conn.keepAlive) {
    abandon(p, conn, connectionLost());
    return;
  }
  const group = p.waiting.length > 0 ? takeGroup(p) : null;
  if (group !== null && group.length > 0) send(conn, group);
  else toIdle(conn, p);
}

function toIdle(conn: Conn, p: Pool): void {
  conn.idleSince = Date.now();
  p.idle.push(conn);
}

/** closes the sockets idle for idleSocketMs (the first in `idle` has been idle longest) */
function closeIdle(p: Pool, now: number): void {
  const { idle } = p;
  let n = 0;
  while (n < idle.length && now - idle[n]!.idleSince >= p.idleSocketMs) n++;
  if (n === 0) return;
  for (const conn of idle.splice(0, n)) abandon(p, conn, connectionLost());
}

// ---------------------------------------------------------------------------------------------
// reading answers

/** hands the held answer to its caller */
function handOver(p: Pool, conn: Conn): void {
  const call = conn.held!;
  const answer = conn.heldAnswer!;
  conn.held = conn.heldAnswer = null;
  call.conn = null;
  if (settle(p, call)) call.done(null, answer);
}

/**
 * The first call on `conn` has its whole answer (status and headers read, `body`; `rest`: the
 * bytes after it). With calls behind it, it is held until the next head proves the framing; else
 * handed over at once unless bytes follow it.
 */
function complete(p: Pool, conn: Conn, body: Buffer, rest: Buffer): void {
  const call = conn.queue.shift()!;
  const answer: UpstreamAnswer = { status: conn.status, headers: conn.headers!, body };
  conn.answered++;
  conn.nextAnswer();
  if (call.route !== null) noteTime(p, call.route, answer.headers['server-timing']);
  conn.held = call;
  conn.heldAnswer = answer;
  if (conn.queue.length > 0 && conn.keepAlive) return;
  if (rest.length > 0) throw new OutOfStep('bytes after the last answer asked for');
  handOver(p, conn);
}

/** `b` itself, or a copy of it when it is a view of the shared read buffer (a function, not a closure per read) */
function own(b: Buffer, borrowed: boolean): Buffer {
  return borrowed ? Buffer.from(b) : b;
}

/**
 * Reads one answer head from `buf` for `call` (the first call on `conn`): the bytes after it, or
 * null when the head is not complete (kept in conn.buf) or the answer runs to the close.
 */
function readAnswerHead(p: Pool, conn: Conn, call: Call, buf: Buffer, borrowed: boolean): Buffer | null {
  for (;;) {
    const end = headEnd(buf);
    if (end === -1) {
      if (buf.length > MAX_ANSWER_HEAD) throw new WireError(502, 'BAD_GATEWAY', 'answer head too large');
      conn.buf = own(buf, borrowed);
      return null;
    }
    const head = parseHead(buf.toString('latin1', 0, end), p.keep);
    buf = buf.subarray(end + 4);
    const m = STATUS_LINE.exec(head.start);
    if (!m) throw new WireError(502, 'BAD_GATEWAY', 'malformed status line');
    const status = Number(m[2]);
    const headers = head.headers;
    if (status >= 100 && status < 200) continue; // 100 Continue, 103 Early Hints
    if (call.requestId !== null && headers['x-request-id'] !== call.requestId)
      throw new OutOfStep('an answer did not echo its call’s x-request-id');
    // this head is in step: the answer before it was framed as the upstream meant it
    if (conn.held !== null) handOver(p, conn);
    conn.status = status;
    conn.headers = headers;
    const connection = headers.connection?.toLowerCase();
    conn.keepAlive = m[1] === '1' ? !(connection !== undefined && connection.includes('close')) : false;
    if (call.method === 'HEAD' || status === 204 || status === 304) conn.framing = NO_BODY;
    else {
      conn.framing = bodyFraming(headers);
      if (conn.framing.kind === 'none' && headers['content-length'] === undefined) {
        // no length: the answer ends with the connection, so it must be the last one asked for
        if (conn.queue.length > 1) throw new OutOfStep('an answer without a length had calls behind it');
        conn.keepAlive = false;
        conn.untilClose = buf.length > 0 ? [own(buf, borrowed)] : [];
        conn.untilCloseBytes = buf.length;
        conn.buf = null;
        return null;
      }
      if (conn.framing.kind === 'length' && conn.framing.length > p.maxAnswer)
        throw new WireError(502, 'BAD_GATEWAY', 'answer too large');
    }
    conn.decoder = conn.framing.kind === 'chunked' ? new ChunkedDecoder(p.maxAnswer) : null;
    return buf;
  }
}

/**
 * `borrowed`: `chunk` is a view of the shared read buffer, valid only during this call — what is
 * kept beyond it (a partial answer, the bodies handed to callers) is copied.
 */
function onData(p: Pool, conn: Conn, chunk: Buffer, borrowed: boolean): void {
  let call = conn.queue[0];
  if (call === undefined) {
    // nothing was asked: a server must not talk now; the socket cannot be trusted
    abandon(p, conn, conn.held === null ? connectionLost() : new OutOfStep('bytes after the last answer asked for'));
    return;
  }
  conn.gotBytes = true;
  // answers spread over several reads (rare: the upstream's are small) take the copying path
  if (borrowed && (conn.buf !== null || conn.untilClose !== null)) {
    chunk = Buffer.from(chunk);
    borrowed = false;
  }
  try {
    if (conn.untilClose !== null) {
      conn.untilCloseBytes += chunk.length;
      if (conn.untilCloseBytes > p.maxAnswer) throw new WireError(502, 'BAD_GATEWAY', 'answer too large');
      conn.untilClose.push(chunk);
      return;
    }
    let buf: Buffer | null = conn.buf === null ? chunk : Buffer.concat([conn.buf, chunk]);
    for (;;) {
      if (conn.headers === null) {
        buf = readAnswerHead(p, conn, call, buf, borrowed);
        if (buf === null) return;
      }
      let body: Buffer;
      if (conn.framing.kind === 'none') body = Buffer.alloc(0);
      else if (conn.framing.kind === 'length') {
        if (buf.length < conn.framing.length) {
          conn.buf = own(buf, borrowed);
          return;
        }
        body = own(buf.length === conn.framing.length ? buf : buf.subarray(0, conn.framing.length), borrowed);
        buf = buf.subarray(conn.framing.length);
      } else {
        // the decoder keeps views of what it is fed
        if (borrowed) {
          buf = Buffer.from(buf);
          borrowed = false;
        }
        buf = buf.subarray(conn.decoder!.feed(buf));
        if (!conn.decoder!.done) {
          conn.buf = buf.length > 0 ? buf : null;
          return;
        }
        body = conn.decoder!.body;
      }
      complete(p, conn, body, buf);
      const next = conn.queue[0];
      if (!conn.keepAlive) {
        // the upstream closes after this answer: the calls behind it go to another socket
        if (buf.length > 0) throw new OutOfStep('bytes after an answer that closes the connection');
        if (conn.held !== null) handOver(p, conn);
        abandon(p, conn, connectionLost());
        return;
      }
      if (next === undefined) {
        release(p, conn);
        return;
      }
      call = next;
      if (buf.length === 0) return;
      conn.gotBytes = true;
    }
  } catch (err) {
    const e = classify(err as NodeJS.ErrnoException);
    if (conn.queue[0] === call) fail(p, call, e);
    else abandon(p, conn, e);
  }
}

// ---------------------------------------------------------------------------------------------

/** one timer checks every deadline: calls', connections being opened, and idle sockets' */
function sweep(p: Pool): void {
  const now = Date.now();
  if (p.idle.length > 0) closeIdle(p, now);
  if (p.active.size === 0) return;
  for (const call of p.active) {
    if (now < call.deadline) continue;
    const conn = call.conn;
    if (conn && !conn.connected)
      fail(p, call, new UpstreamFailure('timeout', 'upstream did not accept a connection in time'));
    else fail(p, call, new UpstreamFailure('timeout', 'upstream did not answer in time'));
  }
  for (const conn of p.all)
    if (!conn.connected && now >= conn.connectDeadline && conn.queue.length > 0)
      fail(p, conn.queue[0]!, new UpstreamFailure('timeout', 'upstream did not accept a connection in time'));
}

export function createUpstreamClient(opts: UpstreamOptions): UpstreamClient {
  const p = createPool(opts);
  const sweeper = setInterval(() => sweep(p), 25);
  sweeper.unref();
  const enqueue: UpstreamClient['call'] = (method, target, headers, body, requestId, caller, done) => {
    const safe = body === null && SAFE_METHODS.has(method);
    const request =
      `${method} ${target} HTTP/1.1\r\nhost: ${p.hostHeader}\r\n${headers}` +
      (body === null ? '\r\n' : `content-length: ${body.length}\r\n\r\n`);
    const call: Call = {
      method,
      request,
      body,
      safe,
      route: safe && p.depth > 1 ? routeOf(method, target) : null,
      requestId: requestId ?? null,
      caller: caller ?? null,
      deadline: Date.now() + p.timeoutMs,
      retried: false,
      done,
      conn: null,
    };
    p.active.add(call);
    p.waiting.push(call);
    // written at the end of this event-loop turn, together with the turn's other calls
    schedulePump(p);
  };
  const send: UpstreamClient['forward'] = (method, target, headers, body, requestId, caller) =>
    new Promise<UpstreamAnswer>((resolve, reject) =>
      enqueue(method, target, headers, body, requestId, caller, (err, answer) =>
        err === null ? resolve(answer!) : reject(err),
      ),
    );
  const closedFailure = () => new UpstreamFailure('unavailable', 'the upstream client is closed');

  return {
    get openSockets() {
      return p.all.size;
    },
    forward(method, target, headers, body, requestId, caller) {
      if (p.closed) return Promise.reject(closedFailure());
      // OpenTelemetry (@sts/telemetry): only when tracing is on, a CLIENT span and its traceparent
      if (tracingEnabled()) return tracedSend(send, method, target, headers, body, requestId, caller);
      return send(method, target, headers, body, requestId, caller);
    },
    call(method, target, headers, body, requestId, caller, done) {
      if (p.closed) process.nextTick(done, closedFailure());
      else if (tracingEnabled())
        tracedSend(send, method, target, headers, body, requestId, caller).then(
          (answer) => done(null, answer),
          (err: unknown) => done(err as UpstreamFailure),
        );
      else enqueue(method, target, headers, body, requestId, caller, done);
    },
    close() {
      p.closed = true;
      clearInterval(sweeper);
      for (const conn of [...p.all])
        abandon(p, conn, new UpstreamFailure('unavailable', 'the upstream client is closed'));
      for (const call of [...p.active])
        fail(p, call, new UpstreamFailure('unavailable', 'the upstream client is closed'));
    },
  };
}

/** a call sent while tracing is on: within a CLIENT span whose `traceparent` goes in the head */
function tracedSend(
  forward: UpstreamClient['forward'],
  ...[method, target, headers, body, requestId, caller]: Parameters<UpstreamClient['forward']>
): Promise<UpstreamAnswer> {
  const query = target.indexOf('?');
  const span = startSpan(`upstream ${method}`, SpanKind.CLIENT, {
    'http.request.method': method,
    'url.path': query === -1 ? target : target.slice(0, query),
  });
  let lines = headers;
  for (const [name, value] of Object.entries(traceHeaders(span))) lines += `${name}: ${value}\r\n`;
  return forward(method, target, lines, body, requestId, caller).then(
    (answer) => {
      span.setAttribute('http.response.status_code', answer.status);
      endSpan(span, answer.status >= 500 ? `HTTP ${answer.status}` : undefined);
      return answer;
    },
    (err: unknown) => {
      endSpan(span, err instanceof Error ? err : String(err));
      throw err;
    },
  );
}
