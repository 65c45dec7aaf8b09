/**
 * An HTTP/1.1 server straight on node:net, for a hop whose CPU per call matters (a proxy).
 *
 * Why not node:http: node:http builds an IncomingMessage, a ServerResponse, stream machinery and
 * header objects for every call; here a request is one buffer scan, a few string slices and one
 * write for the answer (see this package's README for the measurements).
 *
 * Scope, deliberately small and strict (RFC 9112):
 * - origin-form request targets of printable ASCII, at most `maxTargetBytes` (414); HTTP/1.1 and
 *   HTTP/1.0 (1.0 closes after the answer); exactly one Host header on 1.1; only the methods
 *   llhttp (node:http) also knows (501 otherwise);
 * - the request body is read whole before the handler runs: Content-Length or chunked, at most
 *   `maxBodyBytes` (413); `Expect: 100-continue` is honoured; any other expectation is a 417;
 * - pipelined requests are answered in order, one at a time;
 * - a head larger than `maxHeadBytes` is a 431; a head or body not complete within
 *   `requestTimeoutMs` is a 408; idle keep-alive connections close after `keepAliveTimeoutMs`;
 *   a bare CR or LF is a 400 as soon as it arrives (not only once the head is complete);
 * - every malformed message is a 4xx (or 501/505) naming the problem (its body made by the
 *   `errorBody` option), then the connection closes, since after a framing error nobody can tell where the next request would begin.
 *
 * Against clients that do not play along:
 * - backpressure: while a connection's answers not yet taken by the client exceed
 *   `maxUnsentBytes` (socket.writableLength), nothing more is parsed or read on it until 'drain';
 *   while a request is being handled (or output waits), at most `maxHeadBytes + maxBodyBytes` of
 *   later input is buffered before the socket stops reading — so a client that pipelines and never
 *   reads holds a bounded amount of memory, whatever it sends;
 * - half-close: a client that shuts its write side after its requests (`shutdown(SHUT_WR)`) gets
 *   the answers to every complete request it sent, then the connection ends;
 * - input arriving in many small reads is appended to a growing buffer (capacity doubled), never
 *   re-copied whole on every read.
 */
import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import net from 'node:net';
import { listenOn } from '@sts/common';
import { bodyFraming, ChunkedDecoder, headEnd, httpDate, parseHead, WireError, type Framing } from './wire';

export interface HttpRequest {
  method: string;
  /** the request target as sent (path and query) */
  target: string;
  /** the target without its query */
  path: string;
  /** lower-cased header names; repeated headers joined with ", " */
  headers: Record<string, string>;
  body: Buffer | null;
  /** the request's id, from the `requestId` option (default: a new UUID) */
  requestId: string;
  /** the peer's address (the socket's; a proxy in front shows up here) */
  remoteAddress: string;
}

/** Header lines for an answer, each `name: value\r\n`, without content-length (added by send). */
export type HeaderBlock = string;

export interface HttpResponder {
  /**
   * Writes the whole answer once: status, header lines and body (omitted for HEAD, with the
   * content-length the body would have). Later calls are ignored.
   */
  send(status: number, headers: HeaderBlock, body: Buffer | string | null): void;
  /** true once the client has gone away (the answer would be dropped) */
  readonly closed: boolean;
  /**
   * Starts a long-lived answer instead (chunked, `connection: close`), written piece by piece as
   * it is produced, never gathered. The connection serves nothing else afterwards.
   */
  stream(status: number, headers: HeaderBlock, options: ResponseStreamOptions): ResponseStream;
}

export interface ResponseStreamOptions {
  /**
   * bytes the client may leave unread; a write beyond it destroys the connection (a reader that
   * stopped must not make the server's memory grow)
   */
  maxUnsentBytes: number;
  /** called once when the stream is over, whoever ended it */
  onClose: () => void;
}

/** a long-lived answer being written (Responder.stream) */
export interface ResponseStream {
  /** writes one piece; false when the stream is over (closed, or just cut for exceeding maxUnsentBytes) */
  write(data: string): boolean;
  /** bytes written and not yet taken by the client */
  readonly unsentBytes: number;
  /** resolves when the unsent bytes fall to zero, or the stream is over */
  drained(): Promise<void>;
  /** ends the answer cleanly (last chunk), then the connection */
  end(): void;
  readonly closed: boolean;
}

export type RequestHandler = (req: HttpRequest, res: HttpResponder) => void;

export interface HttpServerOptions {
  handler: RequestHandler;
  /** default 16 KiB, like node:http */
  maxHeadBytes?: number;
  /** default 64 KiB */
  maxBodyBytes?: number;
  /** longest request target (path and query); default 8 KiB (414 beyond) */
  maxTargetBytes?: number;
  /** answers not yet taken by the client above which a connection is not read; default 64 KiB */
  maxUnsentBytes?: number;
  /** a request's head and body must arrive within this; default 30 s */
  requestTimeoutMs?: number;
  /** idle keep-alive connections are closed after this; default 65 s (above common LB idle timeouts) */
  keepAliveTimeoutMs?: number;
  /**
   * request headers the handler reads (lower-case); the ones the server itself needs (framing,
   * host, connection, expect, x-request-id) are always kept. Default: all.
   */
  keepHeaders?: readonly string[];
  /** called when a handler throws (the client gets a 500) */
  onHandlerError?: (err: unknown, req: HttpRequest) => void;
  /**
   * The id of a request, from the client's X-Request-Id (undefined when none was sent); the server
   * sends it back as `x-request-id` on the answers it makes itself. Default: a new UUID each time
   * (the client's value is not trusted unless you say how).
   */
  requestId?: (clientValue: string | undefined) => string;
  /**
   * The answer to a request the server refuses (malformed: 4xx/501/505, `code` from WireError)
   * or whose handler threw (500, code `INTERNAL`). Default: the message as text/plain.
   */
  errorBody?: (error: ServerError) => { contentType: string; body: string };
}

/** what errorBody is asked to render */
export interface ServerError {
  status: number;
  /** UPPER_SNAKE: INVALID_REQUEST, HEADERS_TOO_LARGE, REQUEST_TIMEOUT, …, INTERNAL */
  code: string;
  /** names the problem; safe to show to the client */
  message: string;
  requestId: string;
}

export interface HttpServer {
  readonly server: net.Server;
  listen(port: number, host?: string): Promise<number>;
  /**
   * Stops accepting; idle connections close now, busy ones after their answer (sent with
   * `connection: close`); after `graceMs` the rest are cut. Resolves when all are gone.
   */
  close(graceMs: number): Promise<void>;
  /** requests whose answer has not been sent */
  readonly inFlight: number;
  /** connections not read now because of backpressure (unsent output or a full input buffer) */
  readonly pausedConnections: number;
}

const plainErrorBody = (e: ServerError) => ({ contentType: 'text/plain; charset=utf-8', body: `${e.message}\n` });
const newRequestId = () => randomUUID();
const REQUEST_LINE = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+) (\S+) HTTP\/(\d)\.(\d)$/;
const ORIGIN_FORM = /^\/[\x21-\x7e]*$/;
const CLOSE_TOKEN = /(?:^|,)\s*close\s*(?:,|$)/;
/** an HTAB in a framing field's line (llhttp refuses `5<HTAB>` and does not read `chunked<HTAB>` as chunked) */
const FRAMING_TAB = /^(?:transfer-encoding|content-length):[^\r\n]*\t/im;
/**
 * Methods passed to the handler: the ones of RFC 9110 but CONNECT (a tunnel, which llhttp stops
 * parsing at). llhttp knows more (WebDAV, …); none of them is an API method here, and an unknown
 * one is a 501 rather than something a later hop might read differently.
 */
const KNOWN_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH', 'TRACE']);
/** header fields that must not be repeated (RFC 9112 §3.2: a request with several Host fields is a 400) */
const SINGLE_FIELDS: ReadonlySet<string> = new Set(['host']);
const STATUS_LINES: string[] = [];
function statusLine(status: number): string {
  return (STATUS_LINES[status] ??= `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Unknown'}\r\n`);
}
const timeoutError = () => new WireError(408, 'REQUEST_TIMEOUT', 'the request did not arrive in time');

const enum State {
  Head,
  Body,
  Busy,
  Closed,
}

/** the server-wide settings and counters every connection shares */
interface Shared {
  readonly handler: RequestHandler;
  readonly onHandlerError: ((err: unknown, req: HttpRequest) => void) | undefined;
  readonly requestId: (clientValue: string | undefined) => string;
  readonly errorBody: (error: ServerError) => { contentType: string; body: string };
  readonly maxHead: number;
  readonly maxBody: number;
  readonly maxTarget: number;
  readonly maxUnsent: number;
  /** input buffered while a connection waits (for its answer or for the client to read) */
  readonly maxBuffered: number;
  readonly requestTimeoutMs: number;
  readonly keepAliveTimeoutMs: number;
  readonly keepHeaders: ReadonlySet<string> | undefined;
  readonly connections: Set<Connection>;
  closing: boolean;
  inFlight: number;
  paused: number;
  onDrained: (() => void) | undefined;
}

/** the request line and head of one request, checked */
interface RequestHead {
  method: string;
  target: string;
  headers: Record<string, string>;
  keepAlive: boolean;
  framing: Framing;
}

/** Parses and checks the head of a request (`text`: up to, not including, the blank line). */
function readRequestHead(text: string, sh: Shared): RequestHead {
  const head = parseHead(text, sh.keepHeaders, SINGLE_FIELDS);
  const m = REQUEST_LINE.exec(head.start);
  if (!m) throw new WireError(400, 'INVALID_REQUEST', 'malformed request line');
  const [, method, target, major, minor] = m as unknown as [string, string, string, string, string];
  if (major !== '1' || (minor !== '1' && minor !== '0'))
    throw new WireError(505, 'HTTP_VERSION_NOT_SUPPORTED', `HTTP/${major}.${minor} is not supported; use HTTP/1.1`);
  if (!KNOWN_METHODS.has(method))
    throw new WireError(501, 'NOT_IMPLEMENTED', `the method ${method.slice(0, 20)} is not implemented`);
  if (target.length > sh.maxTarget)
    throw new WireError(414, 'URI_TOO_LONG', `the request target is longer than ${sh.maxTarget} bytes`);
  if (!ORIGIN_FORM.test(target))
    throw new WireError(
      400,
      'INVALID_REQUEST',
      'the request target must be a path of printable ASCII starting with "/" (percent-encode other characters)',
    );
  const headers = head.headers;
  if (minor === '1' && headers.host === undefined) throw new WireError(400, 'INVALID_REQUEST', 'missing Host header');
  const connection = headers.connection;
  // an Upgrade request (not supported: answered as a plain request) ends the connection, since
  // llhttp would read what follows it as the other protocol, not as requests
  const keepAlive =
    minor === '1' &&
    headers.upgrade === undefined &&
    !(connection !== undefined && CLOSE_TOKEN.test(connection.toLowerCase()));
  if ((headers['transfer-encoding'] !== undefined || headers['content-length'] !== undefined) && FRAMING_TAB.test(text))
    throw new WireError(400, 'INVALID_REQUEST', 'a tab in Content-Length or Transfer-Encoding');
  const framing = bodyFraming(headers);
  if (framing.kind === 'length' && framing.length > sh.maxBody)
    throw new WireError(413, 'PAYLOAD_TOO_LARGE', `request body larger than ${sh.maxBody} bytes`);
  return { method, target, headers, keepAlive, framing };
}

/**
 * Index of the first bare CR or LF in `buf` at or after `from` (a CR at the very end may still be
 * followed by its LF: not counted), else -1. Only run on heads not complete yet, so that a
 * request written with bare LF line ends is refused at once instead of waiting for a CRLFCRLF
 * that never comes.
 */
function bareLineEnd(buf: Buffer, from: number): number {
  for (let i = buf.indexOf(10, from); i !== -1; i = buf.indexOf(10, i + 1)) if (i === 0 || buf[i - 1] !== 13) return i;
  for (let i = buf.indexOf(13, from); i !== -1 && i + 1 < buf.length; i = buf.indexOf(13, i + 1))
    if (buf[i + 1] !== 10) return i;
  return -1;
}

/** One client connection: reads and parses requests, hands them to the handler one at a time. */
class Connection {
  state = State.Head;
  /** unparsed input; a view of `store` when `store` is set (then it ends at `store[fill]`) */
  buf: Buffer | null = null;
  /** a buffer of ours that input is appended into (capacity doubled), so input is not re-copied per read */
  private store: Buffer | null = null;
  private fill = 0;
  /** how far the current incomplete head has been checked for bare CR/LF */
  private scanned = 0;
  /** when the current request's first byte arrived (0: none yet) */
  startedAt = 0;
  private looping = false;
  /** the client shut its write side: answer what is complete, then end */
  private readEnded = false;
  /** waiting for 'drain': the client has not taken our answers */
  private waitingDrain = false;
  private inputPaused = false;
  /** reads and answers so far: the sweep sees a connection idle when this stops moving */
  activity = 0;
  /** what the sweep last saw: `activity` and the socket's unsent bytes, and since when they have not moved */
  private seenActivity = -1;
  private seenUnsent = -1;
  private quietSince = 0;
  // the request being read
  private head: RequestHead | null = null;
  private decoder: ChunkedDecoder | null = null;
  /** the peer's address, read once (a getter on the socket) */
  private readonly remoteAddress: string;

  constructor(
    readonly socket: net.Socket,
    readonly sh: Shared,
  ) {
    this.remoteAddress = socket.remoteAddress ?? '';
    socket.setNoDelay(true);
    // no socket.setTimeout: node re-arms its timer on every read and write; the sweep
    // (checkDeadline) sees idleness from `activity` instead
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('end', () => this.onEnd());
    socket.on('error', () => this.socket.destroy());
    socket.on('close', () => this.onClose());
  }

  get buffered(): number {
    return this.buf === null ? 0 : this.buf.length;
  }

  /** appends `chunk` to the unparsed input */
  private append(chunk: Buffer): void {
    const buf = this.buf;
    if (buf === null || buf.length === 0) {
      this.buf = chunk;
      this.store = null;
      this.scanned = 0;
      return;
    }
    const need = buf.length + chunk.length;
    const store = this.store;
    if (store !== null && this.fill + chunk.length <= store.length) {
      chunk.copy(store, this.fill);
      this.fill += chunk.length;
      this.buf = store.subarray(this.fill - need, this.fill);
      return;
    }
    // a new store: earlier ones stay untouched (bodies handed out may be views of them)
    const next = Buffer.allocUnsafe(Math.max(4096, 2 * need));
    buf.copy(next, 0);
    chunk.copy(next, buf.length);
    this.store = next;
    this.fill = need;
    this.buf = next.subarray(0, need);
  }

  /** drops `n` bytes from the front of the input */
  private consume(n: number): void {
    this.buf = this.buf!.subarray(n);
    this.scanned = 0;
  }

  onData(chunk: Buffer): void {
    if (this.state === State.Closed) return;
    this.activity++;
    this.append(chunk);
    if (this.startedAt === 0) this.startedAt = Date.now();
    if (this.state === State.Busy || this.waitingDrain) {
      // later requests wait; do not buffer without bound
      if (this.buffered > this.sh.maxBuffered) this.pauseInput();
      return;
    }
    this.loop();
  }

  private pauseInput(): void {
    if (this.inputPaused) return;
    this.inputPaused = true;
    this.sh.paused++;
    this.socket.pause();
  }

  private resumeInput(): void {
    if (!this.inputPaused) return;
    this.inputPaused = false;
    this.sh.paused--;
    this.socket.resume();
  }

  /** the client will send nothing more: answer the complete requests it sent, then end */
  private onEnd(): void {
    this.readEnded = true;
    if (this.state === State.Head || this.state === State.Body) this.loop();
  }

  /** no byte either way for keepAliveTimeoutMs (seen by the sweep) */
  private onTimeout(): void {
    if (this.state === State.Busy) return; // the handler has its own deadlines
    // idle, ended, or waiting for drain (the client has taken none of its answers for that long): cut
    if (this.startedAt === 0 || this.state === State.Closed || this.waitingDrain) this.socket.destroy();
    else this.fail(timeoutError());
  }

  /**
   * Called by the sweep: a request begun but not complete within requestTimeoutMs is a 408; a
   * connection with no read, no answer and none of its unsent bytes taken by the client for
   * keepAliveTimeoutMs times out (onTimeout).
   */
  checkDeadline(now: number): void {
    if (this.startedAt !== 0 && (this.state === State.Head || this.state === State.Body) && !this.waitingDrain)
      if (now - this.startedAt > this.sh.requestTimeoutMs) {
        this.fail(timeoutError());
        return;
      }
    const unsent = this.socket.writableLength;
    if (this.activity !== this.seenActivity || unsent !== this.seenUnsent) {
      this.seenActivity = this.activity;
      this.seenUnsent = unsent;
      this.quietSince = now;
    } else if (now - this.quietSince >= this.sh.keepAliveTimeoutMs) {
      this.quietSince = now;
      this.onTimeout();
    }
  }

  private onClose(): void {
    this.state = State.Closed;
    this.buf = this.store = null;
    if (this.inputPaused) this.sh.paused--;
    this.inputPaused = false;
    const sh = this.sh;
    sh.connections.delete(this);
    if (sh.closing && sh.connections.size === 0) sh.onDrained?.();
  }

  /** parses and dispatches what the input holds, while the connection may go on */
  loop(): void {
    if (this.looping) return;
    this.looping = true;
    try {
      while ((this.state === State.Head || this.state === State.Body) && !this.waitingDrain)
        if (this.state === State.Head ? !this.readHead() : !this.readBody()) break;
    } catch (err) {
      this.fail(err);
    } finally {
      this.looping = false;
    }
    if (this.state === State.Head || this.state === State.Body) {
      if (this.waitingDrain) return;
      // everything complete is answered or being answered; nothing more will come
      if (this.readEnded) this.end();
      else if (this.buffered <= this.sh.maxBuffered) this.resumeInput();
    }
  }

  /** true when a head was consumed (or an error answered) and the loop should go on */
  private readHead(): boolean {
    let buf = this.buf;
    if (buf === null || buf.length === 0) return false;
    // RFC 9112 §2.2: ignore empty lines before a request line
    let start = 0;
    while (start + 1 < buf.length && buf[start] === 13 && buf[start + 1] === 10) start += 2;
    if (start > 0) {
      this.consume(start);
      buf = this.buf!;
    }
    const end = headEnd(buf);
    const maxHead = this.sh.maxHead;
    if (end === -1 || end > maxHead) {
      if (end > maxHead || buf.length > maxHead)
        throw new WireError(431, 'HEADERS_TOO_LARGE', `request head larger than ${maxHead} bytes`);
      if (bareLineEnd(buf, this.scanned) !== -1)
        throw new WireError(400, 'INVALID_REQUEST', 'bare CR or LF in the message head (lines end with CRLF)');
      this.scanned = Math.max(0, buf.length - 1);
      if (Date.now() - this.startedAt > this.sh.requestTimeoutMs) throw timeoutError();
      return false;
    }
    const head = readRequestHead(buf.toString('latin1', 0, end), this.sh);
    this.consume(end + 4);
    this.head = head;
    const expect = head.headers.expect;
    if (expect !== undefined && expect.toLowerCase() !== '100-continue')
      throw new WireError(417, 'EXPECTATION_FAILED', `unsupported Expect: ${expect.slice(0, 40)}`);
    if (head.framing.kind === 'none') {
      this.dispatch(null);
      return true;
    }
    if (expect !== undefined && this.buffered === 0) this.socket.write('HTTP/1.1 100 Continue\r\n\r\n');
    this.decoder = head.framing.kind === 'chunked' ? new ChunkedDecoder(this.sh.maxBody) : null;
    this.state = State.Body;
    return true;
  }

  private readBody(): boolean {
    const buf = this.buf;
    if (buf === null || buf.length === 0) return false;
    const framing = this.head!.framing;
    if (framing.kind === 'length') {
      const n = framing.length;
      if (buf.length < n) return false;
      this.consume(n);
      this.dispatch(buf.subarray(0, n));
      return true;
    }
    const decoder = this.decoder!;
    this.consume(decoder.feed(buf));
    if (!decoder.done) return false;
    this.decoder = null;
    this.dispatch(decoder.body);
    return true;
  }

  private dispatch(body: Buffer | null): void {
    const sh = this.sh;
    const { method, target, headers, keepAlive } = this.head!;
    this.head = null;
    this.state = State.Busy;
    this.startedAt = 0;
    sh.inFlight++;
    const q = target.indexOf('?');
    const req: HttpRequest = {
      method,
      target,
      path: q === -1 ? target : target.slice(0, q),
      headers,
      body,
      requestId: sh.requestId(headers['x-request-id']),
      remoteAddress: this.remoteAddress,
    };
    const responder = new Responder(this, method === 'HEAD', keepAlive);
    try {
      sh.handler(req, responder);
    } catch (err) {
      sh.onHandlerError?.(err, req);
      if (!responder.sent) {
        const requestId = req.requestId;
        const e = sh.errorBody({ status: 500, code: 'INTERNAL', message: 'internal error', requestId });
        responder.send(500, `content-type: ${e.contentType}\r\nx-request-id: ${requestId}\r\n`, e.body);
      }
    }
  }

  /** called by the responder once its answer is written */
  answered(keepAlive: boolean): void {
    const sh = this.sh;
    sh.inFlight--;
    if (this.state === State.Closed) return;
    if (!keepAlive || (sh.closing && this.buffered === 0)) {
      this.end();
      return;
    }
    this.state = State.Head;
    if (this.buffered > 0) this.startedAt = Date.now();
    if (this.socket.writableLength > sh.maxUnsent) {
      // the client is not reading its answers: parse nothing more until it has taken them
      this.waitingDrain = true;
      this.pauseInput();
      this.socket.once('drain', () => {
        this.waitingDrain = false;
        if (this.buffered > 0) this.startedAt = Date.now();
        this.loop();
      });
      return;
    }
    this.loop();
  }

  /** ends the connection after what was written */
  private end(): void {
    this.state = State.Closed;
    this.socket.end();
  }

  /** answers a framing error and closes the connection */
  fail(err: unknown): void {
    if (this.state === State.Closed) return;
    const e = err instanceof WireError ? err : new WireError(400, 'INVALID_REQUEST', 'the request could not be read');
    const wasBusy = this.state === State.Busy;
    this.state = State.Closed;
    this.buf = this.store = null;
    if (wasBusy) {
      this.socket.destroy();
      return;
    }
    const requestId = randomUUID();
    const out = this.sh.errorBody({ status: e.status, code: e.code, message: e.message, requestId });
    this.socket.end(
      `${statusLine(e.status)}date: ${httpDate()}\r\ncontent-type: ${out.contentType}\r\n` +
        `content-length: ${Buffer.byteLength(out.body)}\r\nx-request-id: ${requestId}\r\nconnection: close\r\n\r\n${out.body}`,
    );
  }

  /** at shutdown: an idle connection ends now */
  endIfIdle(): void {
    if (this.state === State.Head && this.buffered === 0 && !this.waitingDrain) this.end();
  }
}

class Responder implements HttpResponder {
  sent = false;
  constructor(
    private readonly conn: Connection,
    private readonly head: boolean,
    private readonly keepAlive: boolean,
  ) {}

  get closed(): boolean {
    return this.conn.state === State.Closed;
  }

  send(status: number, headers: HeaderBlock, body: Buffer | string | null): void {
    if (this.sent) return;
    this.sent = true;
    const conn = this.conn;
    conn.activity++;
    const keepAlive = this.keepAlive && !conn.sh.closing;
    if (conn.state !== State.Closed) {
      const length = body === null ? 0 : typeof body === 'string' ? Buffer.byteLength(body) : body.length;
      const head =
        `${statusLine(status)}date: ${httpDate()}\r\n${headers}content-length: ${length}\r\n` +
        (keepAlive ? '\r\n' : 'connection: close\r\n\r\n');
      const socket = conn.socket;
      if (this.head || body === null || length === 0) socket.write(head, 'latin1');
      else if (typeof body === 'string') socket.write(head + body);
      else {
        // one buffer, one write syscall (cheaper than a corked writev of two)
        const out = Buffer.allocUnsafe(head.length + length);
        out.write(head, 0, 'latin1');
        body.copy(out, head.length);
        socket.write(out);
      }
    }
    conn.answered(keepAlive);
  }

  stream(status: number, headers: HeaderBlock, options: ResponseStreamOptions): ResponseStream {
    if (this.sent) throw new Error('the answer was already sent');
    this.sent = true;
    const conn = this.conn;
    const out = new ChunkedStream(conn, options);
    if (conn.state !== State.Closed)
      conn.socket.write(
        `${statusLine(status)}date: ${httpDate()}\r\n${headers}transfer-encoding: chunked\r\nconnection: close\r\n\r\n`,
        'latin1',
      );
    else out.finish();
    return out;
  }
}

/** a chunked answer written as it is produced; the connection ends with it */
class ChunkedStream implements ResponseStream {
  private over = false;

  constructor(
    private readonly conn: Connection,
    private readonly options: ResponseStreamOptions,
  ) {
    conn.socket.once('close', () => this.finish());
  }

  get closed(): boolean {
    return this.over;
  }

  get unsentBytes(): number {
    return this.over ? 0 : this.conn.socket.writableLength;
  }

  write(data: string): boolean {
    if (this.over) return false;
    this.conn.activity++;
    const socket = this.conn.socket;
    socket.write(`${Buffer.byteLength(data).toString(16)}\r\n${data}\r\n`);
    if (socket.writableLength > this.options.maxUnsentBytes) {
      socket.destroy();
      this.finish();
      return false;
    }
    return true;
  }

  drained(): Promise<void> {
    if (this.over || this.conn.socket.writableLength === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const socket = this.conn.socket;
      const done = () => {
        socket.off('drain', done);
        socket.off('close', done);
        resolve();
      };
      socket.on('drain', done);
      socket.on('close', done);
    });
  }

  end(): void {
    if (this.over) return;
    this.conn.socket.write('0\r\n\r\n');
    this.finish();
  }

  /** once: the request is done (the connection ends after what was written) */
  finish(): void {
    if (this.over) return;
    this.over = true;
    this.conn.answered(false);
    this.options.onClose();
  }
}

function sharedState(options: HttpServerOptions): Shared {
  const maxHead = options.maxHeadBytes ?? 16 * 1024;
  const maxBody = options.maxBodyBytes ?? 64 * 1024;
  return {
    handler: options.handler,
    onHandlerError: options.onHandlerError,
    requestId: options.requestId ?? newRequestId,
    errorBody: options.errorBody ?? plainErrorBody,
    maxHead,
    maxBody,
    maxTarget: Math.min(options.maxTargetBytes ?? 8 * 1024, maxHead),
    maxUnsent: options.maxUnsentBytes ?? 64 * 1024,
    maxBuffered: maxHead + maxBody,
    requestTimeoutMs: options.requestTimeoutMs ?? 30_000,
    keepAliveTimeoutMs: options.keepAliveTimeoutMs ?? 65_000,
    keepHeaders: options.keepHeaders
      ? new Set([
          ...options.keepHeaders,
          'host',
          'content-length',
          'transfer-encoding',
          'connection',
          'expect',
          'upgrade',
          'x-request-id',
        ])
      : undefined,
    connections: new Set(),
    closing: false,
    inFlight: 0,
    paused: 0,
    onDrained: undefined,
  };
}

export function createHttpServer(options: HttpServerOptions): HttpServer {
  const sh = sharedState(options);

  // one timer for every connection's request deadline and idle timeout (cheaper than a timer per
  // request, and than a socket timeout that node re-arms on every read and write)
  const sweeper = setInterval(
    () => {
      const now = Date.now();
      for (const c of sh.connections) c.checkDeadline(now);
    },
    Math.max(10, Math.min(1000, Math.min(sh.requestTimeoutMs, sh.keepAliveTimeoutMs) / 4)),
  );
  sweeper.unref();

  // allowHalfOpen: a client that shuts its write side still gets its answers (then we end)
  const server = net.createServer({ allowHalfOpen: true }, (socket) => {
    if (sh.closing) {
      socket.destroy();
      return;
    }
    sh.connections.add(new Connection(socket, sh));
  });

  return {
    server,
    get inFlight() {
      return sh.inFlight;
    },
    get pausedConnections() {
      return sh.paused;
    },
    listen: (port, host) => listenOn(server, port, host),
    async close(graceMs) {
      sh.closing = true;
      clearInterval(sweeper);
      server.close();
      for (const c of sh.connections) c.endIfIdle();
      if (sh.connections.size === 0) return;
      await new Promise<void>((resolve) => {
        const cut = setTimeout(() => {
          for (const c of sh.connections) c.socket.destroy();
        }, graceMs);
        sh.onDrained = () => {
          clearTimeout(cut);
          resolve();
        };
      });
    },
  };
}
