/**
 * The head of one request, read and checked against RFC 9112 and llhttp's reading of it: the
 * request line, the methods, the target, Host, the framing fields; and the checks on a head not
 * complete yet. Pure: no socket, no state.
 */
import { bodyFraming, parseHead, WireError, type Framing } from './wire';

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

export const timeoutError = () => new WireError(408, 'REQUEST_TIMEOUT', 'the request did not arrive in time');

/** the server's limits a head is checked against */
export interface HeadLimits {
  /** the header fields kept (lower-case); undefined: all */
  readonly keepHeaders: ReadonlySet<string> | undefined;
  readonly maxTarget: number;
  readonly maxBody: number;
}

/** the request line and head of one request, checked */
export interface RequestHead {
  method: string;
  target: string;
  headers: Record<string, string>;
  keepAlive: boolean;
  framing: Framing;
}

/** Parses and checks the head of a request (`text`: up to, not including, the blank line). */
export function readRequestHead(text: string, sh: HeadLimits): RequestHead {
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
export function bareLineEnd(buf: Buffer, from: number): number {
  for (let i = buf.indexOf(10, from); i !== -1; i = buf.indexOf(10, i + 1)) if (i === 0 || buf[i - 1] !== 13) return i;
  for (let i = buf.indexOf(13, from); i !== -1 && i + 1 < buf.length; i = buf.indexOf(13, i + 1))
    if (buf[i + 1] !== 10) return i;
  return -1;
}
