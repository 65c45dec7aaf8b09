/**
 * A small, strict HTTP/1.1 stack for a hop whose CPU per call matters: a server straight on
 * node:net, a pipelining keep-alive client to one upstream, the wire parser they share, and the
 * differential fuzz of the parser against llhttp. See README.md.
 */
export {
  createHttpServer,
  type HeaderBlock,
  type HttpRequest,
  type HttpResponder,
  type HttpServer,
  type HttpServerOptions,
  type RequestHandler,
  type ResponseStream,
  type ResponseStreamOptions,
  type ServerError,
} from './server';
export {
  createUpstreamClient,
  routeOf,
  UpstreamFailure,
  type UpstreamAnswer,
  type UpstreamCaller,
  type UpstreamClient,
  type UpstreamDone,
  type UpstreamFailureKind,
  type UpstreamOptions,
} from './upstream';
export { bodyFraming, ChunkedDecoder, headEnd, httpDate, parseHead, WireError, type Framing, type Head } from './wire';
