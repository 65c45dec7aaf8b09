/**
 * One streaming connection at a time, as X allows an app on each of its streams (the filtered
 * stream, the activity stream): a second connection is refused with X's 429 TooManyConnections,
 * an outage with 503; an open one gets `\r\n` keep-alives, and the test can stall it (it stays
 * open and sends nothing), end it with X's operational-disconnect notice, or cut it.
 */
import type { ServerResponse } from 'node:http';
import { send } from './format';

const PROBLEMS = 'https://api.twitter.com/2/problems';

interface OpenConnection {
  res: ServerResponse;
  stalled: boolean;
  close: () => void;
}

export class StreamSlot {
  private open: OpenConnection | null = null;
  private down = false;
  private opened = 0;

  constructor(private readonly keepAliveMs: number) {}

  /** answers 429 when a connection is open already: true when it answered */
  busy(res: ServerResponse): boolean {
    if (!this.open) return false;
    return send(res, 429, {
      title: 'ConnectionException',
      detail: 'This stream is currently at the maximum allowed connection limit.',
      connection_issue: 'TooManyConnections',
      type: `${PROBLEMS}/streaming-connection`,
    });
  }

  /** answers 503 during an outage: true when it answered */
  unavailable(res: ServerResponse): boolean {
    if (!this.down) return false;
    return send(res, 503, {
      title: 'Service Unavailable',
      detail: 'The stream is temporarily unavailable.',
      type: 'about:blank',
      status: 503,
    });
  }

  /** opens `res` as the stream (200, headers sent, keep-alives); `onClose` runs when it closes */
  accept(res: ServerResponse, onClose: () => void = () => undefined): void {
    res.statusCode = 200;
    res.setHeader('content-type', 'application/json; charset=utf-8');
    res.flushHeaders();
    const keepAlive = setInterval(() => {
      if (this.open && !this.open.stalled) res.write('\r\n');
    }, this.keepAliveMs);
    const conn: OpenConnection = {
      res,
      stalled: false,
      close: () => {
        clearInterval(keepAlive);
        onClose();
        if (this.open === conn) this.open = null;
      },
    };
    this.open = conn;
    this.opened++;
    res.on('close', conn.close);
  }

  /** a connection is open and not stalled: a line written now reaches the client */
  writable(): boolean {
    return this.open !== null && !this.open.stalled;
  }

  /** writes one line (an object as JSON) when writable; whether it did */
  write(line: unknown): boolean {
    if (!this.open || this.open.stalled) return false;
    this.open.res.write(`${JSON.stringify(line)}\r\n`);
    return true;
  }

  /** what a fake stream offers its test about its connection */
  controls() {
    return {
      /** connections open now (0 or 1) */
      connections: (): number => (this.open ? 1 : 0),
      /** connections opened so far */
      connects: (): number => this.opened,
      disconnect: () => this.disconnect(),
      stall: () => this.stall(),
      outage: (on: boolean) => this.outage(on),
    };
  }

  /** ends the open connection with X's operational-disconnect notice */
  disconnect(): void {
    const conn = this.open;
    if (!conn) return;
    conn.close();
    conn.res.end(
      `${JSON.stringify({
        errors: [
          {
            title: 'operational-disconnect',
            disconnect_type: 'OperationalDisconnect',
            detail: 'This stream has been disconnected for operational reasons.',
            type: `${PROBLEMS}/operational-disconnect`,
          },
        ],
      })}\r\n`,
    );
  }

  /** the open connection stays open and sends nothing more, not even keep-alives */
  stall(): void {
    if (this.open) this.open.stalled = true;
  }

  /** on: new connections get 503 and the open one is cut */
  outage(on: boolean): void {
    this.down = on;
    if (on) this.open?.res.destroy();
  }
}
