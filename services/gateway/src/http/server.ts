/**
 * The gateway's HTTP/1.1 server, straight on node:net.
 *
 * Why not node:http: the gateway's whole job is a hop in front of read-api, and on a small machine
 * the hop's CPU per call is what decides how much of read-api's throughput survives it. node:http
 * builds an IncomingMessage, a ServerResponse, stream machinery and header objects for every call;
 * here a request is one buffer scan, a few string slices and one write for the answer (see
 * the gateway README for the measurements).
 *
 * Scope, deliberately small and strict (RFC 9112):
 * - origin-form request targets of printable ASCII; HTTP/1.1 and HTTP/1.0 (1.0 closes after the
 *   answer); a Host header is required on 1.1;
 * - the request body is read whole before the handler runs: Content-Length or chunked, at most
 *   `maxBodyBytes` (413); `Expect: 100-continue` is honoured; any other expectation is a 417;
 * - pipelined requests are answered in order, one at a time;
 * - a head larger than `maxHeadBytes` is a 431; a head or body not complete within
 *   `requestTimeoutMs` is a 408; idle keep-alive connections close after `keepAliveTimeoutMs`;
 * - every malformed message is a JSON 4xx (or 501/505) naming the problem, then the connection
 *   closes, since after a framing error nobody can tell where the next request would begin.
 */
import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import net from 'node:net';
import { listenOn } from '@sts/common';
import { acceptRequestId } from '../domain/limits';
import { bodyFraming, ChunkedDecoder, headEnd, httpDate, NO_BODY, parseHead, WireError, type Framing } from './wire';

export interface HttpRequest {
  method: string;
  /** the request target as sent (path and query) */
  target: string;
  /** the target without its query */
  path: string;
  /** lower-cased header names; repeated headers joined with ", " */
  headers: Record<string, string>;
  body: Buffer | null;
  /** the client's X-Request-Id when it is acceptable, else a new UUID */
  requestId: string;
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
}

export type RequestHandler = (req: HttpRequest, res: HttpResponder) => void;

export interface HttpServerOptions {
  handler: RequestHandler;
  /** default 16 KiB, like node:http */
  maxHeadBytes?: number;
  /** default 64 KiB */
  maxBodyBytes?: number;
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
}

const JSON_TYPE = 'application/json; charset=utf-8';
const REQUEST_LINE = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+) (\S+) HTTP\/(\d)\.(\d)$/;
const ORIGIN_FORM = /^\/[\x21-\x7e]*$/;
const STATUS_LINES: string[] = [];
function statusLine(status: number): string {
  return (STATUS_LINES[status] ??= `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Unknown'}\r\n`);
}

const enum State {
  Head,
  Body,
  Busy,
  Closed,
}

export function createHttpServer(options: HttpServerOptions): HttpServer {
  const { handler } = options;
  const maxHead = options.maxHeadBytes ?? 16 * 1024;
  const maxBody = options.maxBodyBytes ?? 64 * 1024;
  const requestTimeoutMs = options.requestTimeoutMs ?? 30_000;
  const keepAliveTimeoutMs = options.keepAliveTimeoutMs ?? 65_000;
  const keepHeaders = options.keepHeaders
    ? new Set([
        ...options.keepHeaders,
        'host',
        'content-length',
        'transfer-encoding',
        'connection',
        'expect',
        'x-request-id',
      ])
    : undefined;
  const connections = new Set<Connection>();
  let closing = false;
  let inFlight = 0;
  let onDrained: (() => void) | undefined;

  class Connection {
    state = State.Head;
    buf: Buffer | null = null;
    /** when the current request's first byte arrived (0: none yet) */
    startedAt = 0;
    looping = false;
    // request being read
    method = '';
    target = '';
    headers: Record<string, string> = {};
    framing: Framing = NO_BODY;
    decoder: ChunkedDecoder | null = null;
    keepAlive = true;

    constructor(readonly socket: net.Socket) {
      socket.setNoDelay(true);
      socket.setTimeout(keepAliveTimeoutMs);
      socket.on('data', (chunk: Buffer) => this.onData(chunk));
      socket.on('timeout', () => this.onTimeout());
      socket.on('error', () => this.socket.destroy());
      socket.on('close', () => this.onClose());
    }

    onData(chunk: Buffer): void {
      if (this.state === State.Closed) return;
      this.buf = this.buf === null || this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
      if (this.startedAt === 0) this.startedAt = Date.now();
      if (this.state === State.Busy) {
        // pipelined requests wait for the current answer; do not buffer without bound
        if (this.buf.length > maxHead + maxBody) this.socket.pause();
        return;
      }
      this.loop();
    }

    /** no byte either way for keepAliveTimeoutMs */
    onTimeout(): void {
      if (this.state === State.Busy) return; // the handler has its own deadlines
      if (this.startedAt !== 0 && this.state !== State.Closed)
        this.fail(new WireError(408, 'REQUEST_TIMEOUT', 'the request did not arrive in time'));
      else this.socket.destroy();
    }

    /** called by the sweep: a request begun but not complete within requestTimeoutMs is a 408 */
    checkDeadline(now: number): void {
      if (this.startedAt !== 0 && (this.state === State.Head || this.state === State.Body))
        if (now - this.startedAt > requestTimeoutMs)
          this.fail(new WireError(408, 'REQUEST_TIMEOUT', 'the request did not arrive in time'));
    }

    onClose(): void {
      this.state = State.Closed;
      this.buf = null;
      connections.delete(this);
      if (closing && connections.size === 0) onDrained?.();
    }

    loop(): void {
      if (this.looping) return;
      this.looping = true;
      try {
        while (this.state === State.Head || this.state === State.Body) {
          if (this.state === State.Head ? !this.readHead() : !this.readBody()) break;
        }
      } catch (err) {
        this.fail(err);
      } finally {
        this.looping = false;
      }
    }

    /** true when a head was consumed (or an error answered) and the loop should go on */
    readHead(): boolean {
      let buf = this.buf;
      if (buf === null || buf.length === 0) return false;
      // RFC 9112 §2.2: ignore empty lines before a request line
      let start = 0;
      while (start + 1 < buf.length && buf[start] === 13 && buf[start + 1] === 10) start += 2;
      if (start > 0) buf = this.buf = buf.subarray(start);
      const end = headEnd(buf);
      if (end === -1 || end > maxHead) {
        if (end > maxHead || buf.length > maxHead)
          throw new WireError(431, 'HEADERS_TOO_LARGE', `request head larger than ${maxHead} bytes`);
        if (Date.now() - this.startedAt > requestTimeoutMs)
          throw new WireError(408, 'REQUEST_TIMEOUT', 'the request did not arrive in time');
        return false;
      }
      const head = parseHead(buf.toString('latin1', 0, end), keepHeaders);
      this.buf = buf.subarray(end + 4);
      const m = REQUEST_LINE.exec(head.start);
      if (!m) throw new WireError(400, 'INVALID_REQUEST', 'malformed request line');
      const [, method, target, major, minor] = m as unknown as [string, string, string, string, string];
      if (major !== '1' || (minor !== '1' && minor !== '0'))
        throw new WireError(505, 'HTTP_VERSION_NOT_SUPPORTED', `HTTP/${major}.${minor} is not supported; use HTTP/1.1`);
      const headers = head.headers;
      this.method = method;
      this.target = target;
      this.headers = headers;
      const connection = headers.connection?.toLowerCase();
      this.keepAlive = minor === '1' && !(connection !== undefined && /(?:^|,)\s*close\s*(?:,|$)/.test(connection));
      if (!ORIGIN_FORM.test(target))
        throw new WireError(
          400,
          'INVALID_REQUEST',
          'the request target must be a path of printable ASCII starting with "/" (percent-encode other characters)',
        );
      if (minor === '1' && headers.host === undefined)
        throw new WireError(400, 'INVALID_REQUEST', 'missing Host header');
      this.framing = bodyFraming(headers);
      if (this.framing.kind === 'none') {
        this.dispatch(null);
        return true;
      }
      if (this.framing.kind === 'length' && this.framing.length > maxBody)
        throw new WireError(413, 'PAYLOAD_TOO_LARGE', `request body larger than ${maxBody} bytes`);
      const expect = headers.expect;
      if (expect !== undefined) {
        if (expect.toLowerCase() !== '100-continue')
          throw new WireError(417, 'EXPECTATION_FAILED', `unsupported Expect: ${expect.slice(0, 40)}`);
        if (this.buf.length === 0) this.socket.write('HTTP/1.1 100 Continue\r\n\r\n');
      }
      this.decoder = this.framing.kind === 'chunked' ? new ChunkedDecoder(maxBody) : null;
      this.state = State.Body;
      return true;
    }

    readBody(): boolean {
      const buf = this.buf;
      if (buf === null || buf.length === 0) return false;
      if (this.framing.kind === 'length') {
        const n = this.framing.length;
        if (buf.length < n) return false;
        this.buf = buf.subarray(n);
        this.dispatch(buf.subarray(0, n));
        return true;
      }
      const decoder = this.decoder!;
      const used = decoder.feed(buf);
      this.buf = buf.subarray(used);
      if (!decoder.done) return false;
      this.decoder = null;
      this.dispatch(decoder.body);
      return true;
    }

    dispatch(body: Buffer | null): void {
      this.state = State.Busy;
      this.startedAt = 0;
      inFlight++;
      const headers = this.headers;
      const target = this.target;
      const q = target.indexOf('?');
      const req: HttpRequest = {
        method: this.method,
        target,
        path: q === -1 ? target : target.slice(0, q),
        headers,
        body,
        requestId: acceptRequestId(headers['x-request-id']) ?? randomUUID(),
      };
      const responder = new Responder(this, req.method === 'HEAD', this.keepAlive);
      try {
        handler(req, responder);
      } catch (err) {
        options.onHandlerError?.(err, req);
        if (!responder.sent) {
          const text = JSON.stringify({ error: 'internal error', code: 'INTERNAL', request_id: req.requestId });
          responder.send(500, `content-type: ${JSON_TYPE}\r\nx-request-id: ${req.requestId}\r\n`, text);
        }
      }
    }

    /** called by the responder once its answer is written */
    answered(keepAlive: boolean): void {
      inFlight--;
      if (this.state === State.Closed) return;
      if (!keepAlive) {
        this.state = State.Closed;
        this.socket.end();
        return;
      }
      this.state = State.Head;
      if (this.buf !== null && this.buf.length > 0) this.startedAt = Date.now();
      if (this.socket.isPaused()) this.socket.resume();
      if (closing && (this.buf === null || this.buf.length === 0)) {
        this.state = State.Closed;
        this.socket.end();
        return;
      }
      this.loop();
    }

    /** answers a framing error and closes the connection */
    fail(err: unknown): void {
      if (this.state === State.Closed) return;
      const e = err instanceof WireError ? err : new WireError(400, 'INVALID_REQUEST', 'the request could not be read');
      const wasBusy = this.state === State.Busy;
      this.state = State.Closed;
      this.buf = null;
      if (wasBusy) {
        this.socket.destroy();
        return;
      }
      const requestId = randomUUID();
      const text = JSON.stringify({ error: e.message, code: e.code, request_id: requestId });
      this.socket.end(
        `${statusLine(e.status)}date: ${httpDate()}\r\ncontent-type: ${JSON_TYPE}\r\n` +
          `content-length: ${Buffer.byteLength(text)}\r\nx-request-id: ${requestId}\r\nconnection: close\r\n\r\n${text}`,
      );
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
      const keepAlive = this.keepAlive && !closing;
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
  }

  // one timer for every connection's request deadline (cheaper than re-arming a timer per request)
  const sweeper = setInterval(
    () => {
      const now = Date.now();
      for (const c of connections) c.checkDeadline(now);
    },
    Math.max(10, Math.min(1000, requestTimeoutMs / 4)),
  );
  sweeper.unref();

  const server = net.createServer((socket) => {
    if (closing) {
      socket.destroy();
      return;
    }
    connections.add(new Connection(socket));
  });

  return {
    server,
    get inFlight() {
      return inFlight;
    },
    listen: (port, host) => listenOn(server, port, host),
    async close(graceMs) {
      closing = true;
      clearInterval(sweeper);
      server.close();
      for (const c of connections)
        if (c.state === State.Head && (c.buf === null || c.buf.length === 0)) {
          c.state = State.Closed;
          c.socket.end();
        }
      if (connections.size === 0) return;
      await new Promise<void>((resolve) => {
        const cut = setTimeout(() => {
          for (const c of connections) c.socket.destroy();
        }, graceMs);
        onDrained = () => {
          clearTimeout(cut);
          resolve();
        };
      });
    },
  };
}
