/**
 * One request and its answer on an undici connection, as an undici dispatch handler: the status,
 * the headers (parsed, and raw as received for the attempt detail) and the body up to a byte limit.
 * It settles exactly once: with the answer when the body ends or passes the limit (then `truncated`;
 * the caller drops the connection), or with the error that ended it first. `cancel` settles it
 * with an error of the caller's (deadline, shutdown) before undici does.
 */
import type { Dispatcher } from 'undici';

type Headers = Record<string, string | string[] | undefined>;

export type ExchangeResult = { ok: true } | { ok: false; err: unknown };

export class Exchange implements Dispatcher.DispatchHandler {
  statusCode = 0;
  headers: Headers = {};
  /** name, value, name, value, … as received (latin1, as Node's rawHeaders) */
  rawHeaders: Buffer[] = [];
  /** a status line came: the request reached the receiver */
  responded = false;
  truncated = false;
  private chunks: Buffer[] = [];
  private size = 0;
  private settled = false;

  constructor(
    private readonly maxBytes: number,
    private readonly onSettled: (result: ExchangeResult) => void,
  ) {}

  /** the body read (at most maxBytes + one chunk) */
  body(): Buffer {
    return this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
  }

  /** settles with `err` unless it has settled already; true when it did */
  cancel(err: unknown): boolean {
    if (this.settled) return false;
    this.settle({ ok: false, err });
    return true;
  }

  onRequestStart(): void {}

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: Headers): void {
    this.responded = true;
    this.statusCode = statusCode;
    this.headers = headers;
    const raw = controller.rawHeaders;
    if (Array.isArray(raw)) this.rawHeaders = raw as Buffer[];
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.settled) return;
    this.size += chunk.length;
    this.chunks.push(chunk);
    // the status and headers are here: a cut at the read limit is still an answer
    if (this.size > this.maxBytes) {
      this.truncated = true;
      this.settle({ ok: true });
    }
  }

  onResponseEnd(): void {
    if (!this.settled) this.settle({ ok: true });
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    if (!this.settled) this.settle({ ok: false, err });
  }

  private settle(result: ExchangeResult): void {
    this.settled = true;
    this.onSettled(result);
  }
}
