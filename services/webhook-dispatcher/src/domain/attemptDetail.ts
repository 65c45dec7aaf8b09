/**
 * Attempt detail: what an attempt row keeps of the request as sent and of the answer,
 * each part bounded so a hostile receiver cannot grow the log. Pure functions, no I/O.
 */

/** bytes of the response body kept (the first 4 KiB) */
export const DETAIL_RESPONSE_BODY_BYTES = 4096;
/** response headers kept at most (in the order received; the rest are dropped) */
export const DETAIL_MAX_HEADERS = 100;
/** characters of one header name or value kept at most */
const DETAIL_MAX_HEADER_CHARS = 2048;

export type HeaderPairs = [string, string][];

/** [name, value] pairs from Node's `rawHeaders` (name, value, name, value, …), bounded */
export function boundedHeaderPairs(raw: readonly string[]): HeaderPairs {
  const pairs: HeaderPairs = [];
  for (let i = 0; i + 1 < raw.length && pairs.length < DETAIL_MAX_HEADERS; i += 2) {
    pairs.push([raw[i]!.slice(0, DETAIL_MAX_HEADER_CHARS), raw[i + 1]!.slice(0, DETAIL_MAX_HEADER_CHARS)]);
  }
  return pairs;
}

/** the headers the dispatcher sends, as pairs, with the Content-Length the sender adds */
export function requestHeaderPairs(headers: Record<string, string>, body: string | Buffer): HeaderPairs {
  return [...Object.entries(headers), ['Content-Length', String(Buffer.byteLength(body))]];
}
