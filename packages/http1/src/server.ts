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
 * - pipelined requests are answered in order; safe ones (GET, HEAD, OPTIONS) are handed to
 *   the handler together, up to `maxPipelinedRequests` a connection, and the answers of one tick
 *   leave in one write; any other request runs alone (RFC 9112 §9.3.2); a long-lived answer
 *   (`stream`) must be the first one owed, else the connection ends before it;
 * - a head larger than `maxHeadBytes` is a 431; a head or body not complete within
 *   `requestTimeoutMs` is a 408; idle keep-alive connections close after `keepAliveTimeoutMs`;
 *   a bare CR or LF is a 400 as soon as it arrives (not only once the head is complete);
 * - every malformed message is a 4xx (or 501/505) naming the problem (its body made by the
 *   `errorBody` option), then the connection closes, since after a framing error nobody can tell where the next request would begin.
 *
 * Against clients that do not play along:
 * - backpressure: while a connection's answers not yet taken by the client exceed
 *   `maxUnsentBytes` (socket.writableLength, and at least the socket's high-water mark), nothing
 *   more is parsed or read on it until 'drain'; answers given and waiting behind an earlier one
 *   count toward the same bound; while requests are being handled (or output waits), at most
 *   `maxHeadBytes + maxBodyBytes` of later input is buffered before the socket stops reading — so
 *   a client that pipelines and never reads holds a bounded amount of memory, whatever it sends;
 * - half-close: a client that shuts its write side after its requests (`shutdown(SHUT_WR)`) gets
 *   the answers to every complete request it sent, then the connection ends;
 * - input arriving in many small reads is appended to a growing buffer (capacity doubled), never
 *   re-copied whole on every read.
 */
import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { listenOn } from '@sts/common';
import { Connection, type Shared } from './connection';
import type { HttpServer, HttpServerOptions, ServerError } from './types';

export type {
  HeaderBlock,
  HttpRequest,
  HttpResponder,
  HttpServer,
  HttpServerOptions,
  RequestHandler,
  ResponseStream,
  ResponseStreamOptions,
  ServerError,
} from './types';

const plainErrorBody = (e: ServerError) => ({ contentType: 'text/plain; charset=utf-8', body: `${e.message}\n` });
const newRequestId = () => randomUUID();

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
    maxPipelined: Math.max(1, options.maxPipelinedRequests ?? 16),
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
