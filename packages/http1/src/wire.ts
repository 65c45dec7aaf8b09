/**
 * HTTP/1.1 wire format (RFC 9112), strict: the pieces the server (requests from clients)
 * and the upstream client (answers from the upstream) share. Anything outside the grammar is
 * an error, never "repaired": bare CR or LF, obsolete line folding, control characters in values,
 * a header name that is not a token, a malformed chunk. Being strict is what keeps a proxy safe
 * from request smuggling (the two ends of a hop must agree where a message ends).
 */

const CRLF = '\r\n';
const CRLFCRLF = Buffer.from('\r\n\r\n');
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/**
 * a chunk-size line: hex digits, then chunk extensions `;name` or `;name=value` (token or quoted
 * string), no whitespace anywhere (RFC 9112 allows BWS; llhttp does not, and neither do we)
 */
const CHUNK_LINE =
  /^([0-9A-Fa-f]{1,8})(?:;[!#$%&'*+.^_`|~0-9A-Za-z-]+(?:=(?:[!#$%&'*+.^_`|~0-9A-Za-z-]+|"(?:[\t\x20\x21\x23-\x5b\x5d-\x7e\x80-\xff]|\\[\t\x20-\x7e\x80-\xff])*"))?)*$/;
/** trailer fields that would change framing or routing if anyone merged them: refused */
const FRAMING_TRAILER = /^(?:content-length|transfer-encoding|host|trailer|connection|expect|upgrade)[ \t]*:/i;
/** a trailer field line: token ":" then visible characters, SP, HTAB (and obs-text) only */
const TRAILER_LINE = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+:[\t\x20-\x7e\x80-\xff]*$/;

/**
 * The safe methods (RFC 9110 §9.2.1) both ends treat alike: pipelined requests of these may be
 * handled in parallel (RFC 9112 §9.3.2), and calls of these may share an upstream socket and be
 * sent again. TRACE is safe too, but nothing here forwards it, so it runs alone.
 */
export const SAFE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);

export class WireError extends Error {
  override name = 'WireError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** Index of the blank line ending a message head in `buf` (from `from`), or -1. */
export function headEnd(buf: Buffer, from = 0): number {
  return buf.indexOf(CRLFCRLF, from);
}

// anywhere in a head: a control character other than HTAB, CR and LF; a CR or LF not in a CRLF pair
// eslint-disable-next-line no-control-regex -- finding control characters is the point
const BAD_CHAR = /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]/;
const BARE_CR_LF = /\r(?!\n)|(?<!\r)\n/;

export interface Head {
  /** the request line or the status line */
  start: string;
  /** lower-cased names; repeated fields joined with ", " (RFC 9110 §5.3) */
  headers: Record<string, string>;
}

/**
 * Parses a message head (latin1 text up to, not including, the blank line) in one pass. Throws
 * WireError(400) on a control character, a bare CR or LF, or a field line that is not
 * `token ":" OWS value OWS` (so obsolete line folding is refused too). With `keep`, only those
 * fields are stored; every line is still checked. A field of `single` sent twice is a 400 too.
 */
export function parseHead(text: string, keep?: ReadonlySet<string>, single?: ReadonlySet<string>): Head {
  if (BAD_CHAR.test(text)) throw new WireError(400, 'INVALID_REQUEST', 'control character in the message head');
  if (BARE_CR_LF.test(text)) throw new WireError(400, 'INVALID_REQUEST', 'bare CR or LF in the message head');
  let eol = text.indexOf(CRLF);
  if (eol === -1) eol = text.length;
  const headers: Record<string, string> = Object.create(null) as Record<string, string>;
  let pos = eol + 2;
  while (pos < text.length) {
    let end = text.indexOf(CRLF, pos);
    if (end === -1) end = text.length;
    const colon = text.indexOf(':', pos);
    if (colon <= pos || colon >= end) throw new WireError(400, 'INVALID_REQUEST', 'malformed header line');
    const name = text.slice(pos, colon);
    if (!TOKEN.test(name)) throw new WireError(400, 'INVALID_REQUEST', 'invalid header name');
    const key = name.toLowerCase();
    if (keep === undefined || keep.has(key)) {
      // optional whitespace around the value is SP / HTAB only
      let s = colon + 1;
      let e = end;
      while (s < e && (text.charCodeAt(s) === 32 || text.charCodeAt(s) === 9)) s++;
      while (e > s && (text.charCodeAt(e - 1) === 32 || text.charCodeAt(e - 1) === 9)) e--;
      const value = text.slice(s, e);
      const prev = headers[key];
      if (prev === undefined) headers[key] = value;
      else if (single?.has(key)) throw new WireError(400, 'INVALID_REQUEST', `more than one ${name} header`);
      else headers[key] = `${prev}, ${value}`;
    }
    pos = end + 2;
  }
  return { start: text.slice(0, eol), headers };
}

/** the framing of a message without a body (one shared object) */
export const NO_BODY: Framing = Object.freeze({ kind: 'none' });
const CHUNKED: Framing = Object.freeze({ kind: 'chunked' });

export type Framing = { kind: 'none' } | { kind: 'length'; length: number } | { kind: 'chunked' };

/**
 * How a message body is delimited, from Content-Length / Transfer-Encoding. Both at once, a
 * Content-Length that is not one number (a list, a repeated field), or a transfer coding other
 * than "chunked" are refused.
 */
export function bodyFraming(headers: Record<string, string>): Framing {
  const te = headers['transfer-encoding'];
  const cl = headers['content-length'];
  if (te !== undefined) {
    if (cl !== undefined)
      throw new WireError(400, 'INVALID_REQUEST', 'Content-Length and Transfer-Encoding must not both be sent');
    if (te.toLowerCase() !== 'chunked')
      throw new WireError(501, 'NOT_IMPLEMENTED', `unsupported Transfer-Encoding: ${te.slice(0, 40)}`);
    return CHUNKED;
  }
  if (cl === undefined) return NO_BODY;
  // one value of digits only: a list (even of equal values) or a repeated field is refused, as
  // llhttp (node:http) refuses it, so the two ends of a hop never frame a body differently
  if (!/^\d{1,15}$/.test(cl))
    throw new WireError(
      400,
      'INVALID_REQUEST',
      cl.includes(',') ? 'conflicting Content-Length values' : 'invalid Content-Length',
    );
  const length = Number(cl);
  return length === 0 ? NO_BODY : { kind: 'length', length };
}

/**
 * Incremental decoder of a chunked body (RFC 9112 §7.1): chunk extensions are ignored, trailer
 * fields are read and dropped. `feed` returns how many bytes of `buf` it used; `done` turns true
 * after the last chunk and the trailer section.
 */
export class ChunkedDecoder {
  private readonly parts: Buffer[] = [];
  private size = 0;
  /** bytes left in the current chunk's data; -1 while reading a size line; -2 in the trailer */
  private left = -1;
  /** the CRLF after a chunk's data is still due */
  private crlfDue = false;
  private trailerBytes = 0;
  done = false;

  constructor(private readonly maxBytes: number) {}

  get body(): Buffer {
    return this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts, this.size);
  }

  feed(buf: Buffer): number {
    let pos = 0;
    while (!this.done && pos < buf.length) {
      if (this.crlfDue) {
        if (buf.length - pos < 2) return pos;
        if (buf[pos] !== 13 || buf[pos + 1] !== 10) throw new WireError(400, 'INVALID_REQUEST', 'malformed chunk');
        pos += 2;
        this.crlfDue = false;
        continue;
      }
      if (this.left > 0) {
        const n = Math.min(this.left, buf.length - pos);
        this.parts.push(buf.subarray(pos, pos + n));
        this.size += n;
        this.left -= n;
        pos += n;
        if (this.left === 0) {
          this.crlfDue = true;
          this.left = -1;
        }
        continue;
      }
      const eol = buf.indexOf(CRLF, pos, 'latin1');
      if (eol === -1) {
        if (buf.length - pos > 1024) throw new WireError(400, 'INVALID_REQUEST', 'chunk line too long');
        return pos;
      }
      const line = buf.toString('latin1', pos, eol);
      pos = eol + 2;
      if (this.left === -2) {
        // trailer section: field lines until an empty line
        this.trailerBytes += line.length + 2;
        if (this.trailerBytes > 8192) throw new WireError(431, 'HEADERS_TOO_LARGE', 'chunked trailer too large');
        if (line === '') this.done = true;
        else if (!TRAILER_LINE.test(line) || FRAMING_TRAILER.test(line))
          throw new WireError(400, 'INVALID_REQUEST', 'malformed chunked trailer');
        continue;
      }
      const m = CHUNK_LINE.exec(line);
      if (!m) throw new WireError(400, 'INVALID_REQUEST', 'malformed chunk size');
      const n = parseInt(m[1]!, 16);
      if (n === 0) {
        this.left = -2;
        continue;
      }
      if (this.size + n > this.maxBytes) throw new WireError(413, 'PAYLOAD_TOO_LARGE', 'request body is too large');
      this.left = n;
    }
    return pos;
  }
}

let dateValue = '';
let dateSecond = -1;
/** The IMF-fixdate of the current second (computed once a second). */
export function httpDate(): string {
  const now = Date.now();
  const s = Math.floor(now / 1000);
  if (s !== dateSecond) {
    dateSecond = s;
    dateValue = new Date(now).toUTCString();
  }
  return dateValue;
}
