/** One client connection of the server: its input, its requests in flight, its answers in order. */
import { randomUUID } from 'node:crypto';
import type net from 'node:net';
import { AnswerWriter, heldSize, Responder, type AnswerOwner } from './answers';
import { InputBuffer } from './input';
import { bareLineEnd, readRequestHead, timeoutError, type HeadLimits, type RequestHead } from './requestHead';
import type { HttpRequest, RequestHandler, ServerError } from './types';
import { ChunkedDecoder, headEnd, SAFE_METHODS, WireError } from './wire';

const enum State {
  Head,
  Body,
  Closed,
}

/** the server-wide settings and counters every connection shares */
export interface Shared extends HeadLimits {
  readonly handler: RequestHandler;
  readonly onHandlerError: ((err: unknown, req: HttpRequest) => void) | undefined;
  readonly requestId: (clientValue: string | undefined) => string;
  readonly errorBody: (error: ServerError) => { contentType: string; body: string };
  readonly maxHead: number;
  readonly maxUnsent: number;
  readonly maxPipelined: number;
  /** input buffered while a connection waits (for its answer or for the client to read) */
  readonly maxBuffered: number;
  readonly requestTimeoutMs: number;
  readonly keepAliveTimeoutMs: number;
  readonly connections: Set<Connection>;
  closing: boolean;
  inFlight: number;
  paused: number;
  onDrained: (() => void) | undefined;
}

/**
 * One client connection: reads and parses requests and hands them to the handler, several at once
 * when they are pipelined and safe (RFC 9112 §9.3.2); answers go out in request order.
 *
 * Invariants:
 * - `owed` holds the requests handed to the handler and not yet written, in request order; only
 *   `owed[0]`'s answer is ever written, the others' wait (their bytes counted in `held`);
 * - a request that is not safe runs alone: it waits (`parked`) until nothing is owed, and nothing
 *   after it is read until it is answered; so is one after which the connection ends;
 * - nothing is read while `owed` is full, while answers held or unsent exceed `maxUnsent`, or after
 *   a framing error (answered after what is owed, then the connection closes).
 */
export class Connection implements AnswerOwner {
  private state = State.Head;
  private readonly input = new InputBuffer();
  /** when the current request's first byte arrived, or reading it resumed (0: none yet) */
  private startedAt = 0;
  private looping = false;
  /** the client shut its write side: answer what is complete, then end */
  private readEnded = false;
  /** waiting for 'drain': the client has not taken our answers */
  private waitingDrain = false;
  private inputPaused = false;
  /** reads and answers so far: the sweep sees a connection idle when this stops moving */
  private activity = 0;
  /** what the sweep last saw: `activity` and the socket's unsent bytes, and since when they have not moved */
  private seenActivity = -1;
  private seenUnsent = -1;
  private quietSince = 0;
  // the request being read
  private head: RequestHead | null = null;
  private decoder: ChunkedDecoder | null = null;
  /** the answers owed, in request order */
  private readonly owed: Responder[] = [];
  /** bytes of answers given and waiting behind an earlier one */
  private held = 0;
  /** a complete request that is not safe, waiting for the owed ones to be answered */
  private parked: { head: RequestHead; body: Buffer | null } | null = null;
  /** an owed request runs alone (not safe, ends the connection, or streams): read nothing more */
  private alone = false;
  /** a framing error found while answers were owed: written after them */
  private failure: WireError | null = null;
  private readonly out: AnswerWriter;
  /** the peer's address, read once (a getter on the socket) */
  private readonly remoteAddress: string;

  constructor(
    readonly socket: net.Socket,
    readonly sh: Shared,
  ) {
    this.remoteAddress = socket.remoteAddress ?? '';
    this.out = new AnswerWriter(socket);
    socket.setNoDelay(true);
    // no socket.setTimeout: node re-arms its timer on every read and write; the sweep
    // (checkDeadline) sees idleness from `activity` instead
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('end', () => this.onEnd());
    socket.on('error', () => this.socket.destroy());
    socket.on('close', () => this.onClose());
  }

  get closed(): boolean {
    return this.state === State.Closed;
  }

  touch(): void {
    this.activity++;
  }

  private get buffered(): number {
    return this.input.length;
  }

  /** true while more requests may be parsed and dispatched */
  private get reading(): boolean {
    return (
      (this.state === State.Head || this.state === State.Body) &&
      !this.waitingDrain &&
      !this.alone &&
      this.parked === null &&
      this.failure === null &&
      this.owed.length < this.sh.maxPipelined &&
      this.held <= this.sh.maxUnsent
    );
  }

  private onData(chunk: Buffer): void {
    if (this.state === State.Closed || this.failure !== null) return;
    this.activity++;
    this.input.append(chunk);
    if (this.startedAt === 0) this.startedAt = Date.now();
    if (!this.reading) {
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
    // handlers have their own deadlines; a client that takes none of its answers does not
    if (this.owed.length > 0 && !this.waitingDrain) return;
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
    if (this.startedAt !== 0 && this.reading && now - this.startedAt > this.sh.requestTimeoutMs) {
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
    this.input.clear();
    this.parked = null;
    if (this.inputPaused) this.sh.paused--;
    this.inputPaused = false;
    const sh = this.sh;
    sh.connections.delete(this);
    if (sh.closing && sh.connections.size === 0) sh.onDrained?.();
  }

  /** parses and dispatches what the input holds, while the connection may go on */
  private loop(): void {
    if (this.looping) return;
    this.looping = true;
    try {
      while (this.reading) if (this.state === State.Head ? !this.readHead() : !this.readBody()) break;
    } catch (err) {
      this.fail(err);
    } finally {
      this.looping = false;
    }
    if (this.state === State.Closed || this.waitingDrain || this.failure !== null) return;
    // everything complete is answered: nothing more will come
    if (this.readEnded) {
      if (this.owed.length === 0) this.end();
    } else if (this.buffered <= this.sh.maxBuffered) this.resumeInput();
  }

  /** true when a head was consumed (or an error answered) and the loop should go on */
  private readHead(): boolean {
    const input = this.input;
    let buf = input.buf;
    if (buf === null || buf.length === 0) return false;
    // RFC 9112 §2.2: ignore empty lines before a request line
    let start = 0;
    while (start + 1 < buf.length && buf[start] === 13 && buf[start + 1] === 10) start += 2;
    if (start > 0) {
      input.consume(start);
      buf = input.buf!;
    }
    const end = headEnd(buf);
    const maxHead = this.sh.maxHead;
    if (end === -1 || end > maxHead) {
      if (end > maxHead || buf.length > maxHead)
        throw new WireError(431, 'HEADERS_TOO_LARGE', `request head larger than ${maxHead} bytes`);
      if (bareLineEnd(buf, input.scanned) !== -1)
        throw new WireError(400, 'INVALID_REQUEST', 'bare CR or LF in the message head (lines end with CRLF)');
      input.scanned = Math.max(0, buf.length - 1);
      if (Date.now() - this.startedAt > this.sh.requestTimeoutMs) throw timeoutError();
      return false;
    }
    const head = readRequestHead(buf.toString('latin1', 0, end), this.sh);
    input.consume(end + 4);
    this.head = head;
    const expect = head.headers.expect;
    if (expect !== undefined && expect.toLowerCase() !== '100-continue')
      throw new WireError(417, 'EXPECTATION_FAILED', `unsupported Expect: ${expect.slice(0, 40)}`);
    if (head.framing.kind === 'none') {
      this.ready(null);
      return true;
    }
    // an interim answer may not overtake answers owed (the client sends the body after its own wait)
    if (expect !== undefined && this.buffered === 0 && this.owed.length === 0)
      this.socket.write('HTTP/1.1 100 Continue\r\n\r\n');
    this.decoder = head.framing.kind === 'chunked' ? new ChunkedDecoder(this.sh.maxBody) : null;
    this.state = State.Body;
    return true;
  }

  private readBody(): boolean {
    const buf = this.input.buf;
    if (buf === null || buf.length === 0) return false;
    const framing = this.head!.framing;
    if (framing.kind === 'length') {
      const n = framing.length;
      if (buf.length < n) return false;
      this.input.consume(n);
      this.ready(buf.subarray(0, n));
      return true;
    }
    const decoder = this.decoder!;
    this.input.consume(decoder.feed(buf));
    if (!decoder.done) return false;
    this.decoder = null;
    this.ready(decoder.body);
    return true;
  }

  /** a request was read whole: it runs now, or (not safe, with answers owed) once they are written */
  private ready(body: Buffer | null): void {
    const head = this.head!;
    this.head = null;
    this.state = State.Head;
    this.startedAt = this.buffered > 0 ? Date.now() : 0;
    if (this.owed.length > 0 && !SAFE_METHODS.has(head.method)) this.parked = { head, body };
    else this.dispatch(head, body);
  }

  private dispatch(head: RequestHead, body: Buffer | null): void {
    const sh = this.sh;
    const { method, target, headers, keepAlive } = head;
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
    this.owed.push(responder);
    if (!keepAlive || !SAFE_METHODS.has(method)) this.alone = true;
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

  /** called by a responder once its answer is given (`answer` null: none, the connection ends there) */
  given(r: Responder): void {
    this.sh.inFlight--;
    if (this.state === State.Closed) return;
    if (this.owed[0] !== r) {
      r.heldSize = heldSize(r.answer);
      this.held += r.heldSize;
      return;
    }
    this.flush();
  }

  /** writes the given answers at the front of `owed`, then reads on (or waits, or ends) */
  private flush(): void {
    const owed = this.owed;
    const blocked = !this.reading;
    for (let r = owed[0]; r !== undefined && r.answer !== undefined; r = owed[0]) {
      owed.shift();
      this.held -= r.heldSize;
      const last = owed.length === 0 && this.parked === null;
      const answer = r.answer;
      const keepAlive = r.keepAlive && answer !== null && !(this.sh.closing && last);
      if (answer !== null) this.out.answer(answer, r.headOnly, keepAlive, owed.length > 0);
      if (!keepAlive) {
        this.end();
        return;
      }
    }
    if (owed.length === 0) {
      this.alone = false;
      if (this.failure !== null) {
        this.writeFailure(this.failure);
        return;
      }
      const parked = this.parked;
      if (parked !== null) {
        this.parked = null;
        this.dispatch(parked.head, parked.body);
        return;
      }
    }
    if (blocked && this.buffered > 0) this.startedAt = Date.now();
    const socket = this.socket;
    // writableNeedDrain: a 'drain' will come (under the socket's high-water mark, 16 KiB, none
    // would; corked bytes count in writableLength until the tick ends)
    if (socket.writableLength > this.sh.maxUnsent && socket.writableNeedDrain) {
      // the client is not reading its answers: parse nothing more until it has taken them
      if (this.waitingDrain) return;
      this.waitingDrain = true;
      this.pauseInput();
      socket.once('drain', () => {
        this.waitingDrain = false;
        if (this.buffered > 0) this.startedAt = Date.now();
        this.loop();
      });
      return;
    }
    this.loop();
  }

  /**
   * A long-lived answer takes the connection over: true when `r` is first in line (its answer may
   * be written now), else false, and the connection ends once the answers before it are written.
   */
  takeOver(r: Responder): boolean {
    this.alone = true;
    if (this.state !== State.Closed && this.owed[0] === r) return true;
    r.answer = null;
    this.given(r);
    return false;
  }

  /** a long-lived answer that had the connection is over: the connection ends */
  streamEnded(): void {
    this.sh.inFlight--;
    this.owed.length = 0;
    if (this.state !== State.Closed) this.end();
  }

  /** ends the connection after what was written */
  private end(): void {
    this.state = State.Closed;
    this.socket.end();
  }

  /** answers a framing error and closes the connection (after the answers owed) */
  private fail(err: unknown): void {
    if (this.state === State.Closed || this.failure !== null) return;
    const e = err instanceof WireError ? err : new WireError(400, 'INVALID_REQUEST', 'the request could not be read');
    this.input.clear();
    this.head = this.decoder = null;
    if (this.owed.length > 0) this.failure = e;
    else this.writeFailure(e);
  }

  /** the refusal fail() decided on (the input is already dropped, and none is read since) */
  private writeFailure(e: WireError): void {
    this.state = State.Closed;
    const requestId = randomUUID();
    const { contentType, body } = this.sh.errorBody({ status: e.status, code: e.code, message: e.message, requestId });
    this.out.refusal(e.status, `content-type: ${contentType}\r\nx-request-id: ${requestId}\r\n`, body);
  }

  /** at shutdown: an idle connection ends now */
  endIfIdle(): void {
    if (this.state === State.Head && this.buffered === 0 && !this.waitingDrain && this.owed.length === 0) this.end();
  }
}
