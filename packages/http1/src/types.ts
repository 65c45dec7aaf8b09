/** The server's contract with its users: what a handler gets and gives, and the server's options. */
import type net from 'node:net';

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
  /**
   * answers not yet taken by the client (or given and waiting behind an earlier one) above which
   * a connection is not read; default 64 KiB (below the socket's high-water mark, 16 KiB, unsent
   * bytes are bounded by that mark)
   */
  maxUnsentBytes?: number;
  /** pipelined safe requests of one connection handled at once; default 16 (1: one at a time) */
  maxPipelinedRequests?: number;
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
