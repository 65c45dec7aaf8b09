/**
 * The answers of a connection: what a handler is given to answer with (Responder), a long-lived
 * chunked answer (ChunkedStream), what holding an answer costs, and their bytes on the socket
 * (AnswerWriter). The connection decides when an answer is written (AnswerOwner).
 */
import { STATUS_CODES } from 'node:http';
import type net from 'node:net';
import { TickCork } from '@sts/common';
import type { HeaderBlock, HttpResponder, ResponseStream, ResponseStreamOptions } from './types';
import { httpDate } from './wire';

const STATUS_LINES: string[] = [];
function statusLine(status: number): string {
  return (STATUS_LINES[status] ??= `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Unknown'}\r\n`);
}

/** the connection, as its answers see it */
export interface AnswerOwner {
  readonly socket: net.Socket;
  /** the connection is closed: an answer given now is dropped */
  readonly closed: boolean;
  /** an answer was given or a piece of one written (the idle sweep watches this) */
  touch(): void;
  /** `r` has its answer (`r.answer`; null: none, the connection ends at it) */
  given(r: Responder): void;
  /**
   * `r` starts a long-lived answer: true when it is first in line (it may write now), else false
   * (it never starts, and the connection ends once the answers before it are written)
   */
  takeOver(r: Responder): boolean;
  /** a long-lived answer that had the connection is over */
  streamEnded(): void;
}

/** an answer as given by the handler, written when every earlier one on its connection is */
export interface GivenAnswer {
  status: number;
  headers: HeaderBlock;
  body: Buffer | string | null;
}

/** what holding an answer costs, for the `maxUnsent` bound (its bytes, give or take the status line) */
export function heldSize(a: GivenAnswer | null | undefined): number {
  return a ? 128 + a.headers.length + (a.body === null ? 0 : a.body.length) : 0;
}

/**
 * Writes a connection's answers. While more answers are owed on the connection (a client that
 * pipelines), the socket is corked at the first write of a tick and uncorked when the tick ends,
 * so the answers of one tick (a group the upstream answered in one read) leave in one system call,
 * in order, with no added delay. A lone answer is written straight away, as without pipelining.
 */
export class AnswerWriter {
  private readonly tick: TickCork;

  constructor(private readonly socket: net.Socket) {
    this.tick = new TickCork(socket);
  }

  /**
   * status, headers and body (none for HEAD) of an answer, as one buffer or string; `more`: other
   * answers are owed on the connection (they may follow in this tick)
   */
  answer({ status, headers, body }: GivenAnswer, headOnly: boolean, keepAlive: boolean, more: boolean): void {
    if (more) this.tick.cork();
    const length = body === null ? 0 : typeof body === 'string' ? Buffer.byteLength(body) : body.length;
    const head =
      `${statusLine(status)}date: ${httpDate()}\r\n${headers}content-length: ${length}\r\n` +
      (keepAlive ? '\r\n' : 'connection: close\r\n\r\n');
    if (headOnly || body === null || length === 0) this.write(head, 'latin1');
    else if (typeof body === 'string') this.write(head + body, 'utf8');
    else {
      // one buffer, one write (cheaper than a writev of two)
      const out = Buffer.allocUnsafe(head.length + length);
      out.write(head, 0, 'latin1');
      body.copy(out, head.length);
      this.write(out, undefined);
    }
  }

  /** the server's own refusal of a request (`headers` as lines), then the end of the connection */
  refusal(status: number, headers: HeaderBlock, body: string): void {
    this.socket.end(
      `${statusLine(status)}date: ${httpDate()}\r\n${headers}content-length: ${Buffer.byteLength(body)}\r\n` +
        `connection: close\r\n\r\n${body}`,
    );
  }

  private write(data: Buffer | string, encoding: BufferEncoding | undefined): void {
    if (encoding === undefined) this.socket.write(data);
    else this.socket.write(data, encoding);
  }
}

export class Responder implements HttpResponder {
  sent = false;
  /** undefined: not given yet; null: none (the connection ends at it) */
  answer: GivenAnswer | null | undefined = undefined;
  /** bytes counted in the connection's `held` while this answer waits */
  heldSize = 0;

  constructor(
    private readonly conn: AnswerOwner,
    /** a HEAD request: the answer goes without its body */
    readonly headOnly: boolean,
    readonly keepAlive: boolean,
  ) {}

  get closed(): boolean {
    return this.conn.closed;
  }

  send(status: number, headers: HeaderBlock, body: Buffer | string | null): void {
    if (this.sent) return;
    this.sent = true;
    this.conn.touch();
    this.answer = { status, headers, body };
    this.conn.given(this);
  }

  stream(status: number, headers: HeaderBlock, options: ResponseStreamOptions): ResponseStream {
    if (this.sent) throw new Error('the answer was already sent');
    this.sent = true;
    const conn = this.conn;
    const first = conn.takeOver(this);
    const out = new ChunkedStream(conn, options, first);
    if (first)
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
    private readonly conn: AnswerOwner,
    private readonly options: ResponseStreamOptions,
    /** false: the stream never had the connection (it was closed, or answers were owed before it) */
    private readonly started: boolean,
  ) {
    if (started) conn.socket.once('close', () => this.finish());
  }

  get closed(): boolean {
    return this.over;
  }

  get unsentBytes(): number {
    return this.over ? 0 : this.conn.socket.writableLength;
  }

  write(data: string): boolean {
    if (this.over) return false;
    this.conn.touch();
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
    if (this.started) this.conn.streamEnded();
    this.options.onClose();
  }
}
