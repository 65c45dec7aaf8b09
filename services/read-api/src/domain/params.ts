/**
 * Parsing and validation of the API's query and path parameters. Pure functions: each takes the
 * raw text and returns the value or throws InvalidRequestError naming the parameter. Strict on
 * purpose: "1e2", "+5", " 5", "05", "5.0", "" and repeated parameters are all refused.
 */
import { InvalidRequestError } from '@sts/common';
import { isValidTweetId, isValidUsername } from '@sts/core';
import {
  CURSOR_MAX_LENGTH,
  HIT_LIMIT,
  LIMIT,
  Q_MAX_LENGTH,
  SEQUENCE_MAX,
  TWEET_TEXT_MAX_LENGTH,
} from '@sts/api-contract';

// The bounds are published in the OpenAPI document, so they live with the record shapes.

/** Query parameters by name, every occurrence kept (so repeats can be refused). */
export type Query = Map<string, string[]>;

function decodeComponent(raw: string, what: string): string {
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' '));
  } catch {
    throw new InvalidRequestError(`${what} contains malformed percent-encoding`, what);
  }
}

/** Parses `a=1&b=2` (without the `?`). Malformed percent-encoding is a 400 naming the parameter. */
export function parseQuery(search: string): Query {
  const query: Query = new Map();
  if (!search) return query;
  for (const part of search.split('&')) {
    if (!part) continue;
    const eq = part.indexOf('=');
    const rawName = eq === -1 ? part : part.slice(0, eq);
    const name = decodeComponent(rawName, 'query');
    const value = eq === -1 ? '' : decodeComponent(part.slice(eq + 1), name || 'query');
    const list = query.get(name);
    if (list) list.push(value);
    else query.set(name, [value]);
  }
  return query;
}

/** The single value of a parameter, undefined when absent; a repeated parameter is a 400. */
function single(query: Query, name: string): string | undefined {
  const values = query.get(name);
  if (!values) return undefined;
  if (values.length > 1) throw new InvalidRequestError(`${name} must be given at most once`, name);
  return values[0];
}

const POSITIVE_INT = /^[1-9][0-9]{0,5}$/;

function boundedInt(query: Query, name: string, bounds: { default: number; min: number; max: number }): number {
  const raw = single(query, name);
  if (raw === undefined) return bounds.default;
  const problem = `${name} must be an integer from ${bounds.min} to ${bounds.max}`;
  if (!POSITIVE_INT.test(raw)) throw new InvalidRequestError(`${problem}, got "${preview(raw)}"`, name);
  const n = Number(raw);
  if (n < bounds.min || n > bounds.max) throw new InvalidRequestError(`${problem}, got ${n}`, name);
  return n;
}

/** A short, printable echo of a bad value for error messages. */
function preview(raw: string): string {
  // eslint-disable-next-line no-control-regex
  const clean = raw.replace(/[\u0000-\u001f\u007f]/g, '?');
  return clean.length > 20 ? `${clean.slice(0, 20)}…` : clean;
}

export function parseLimit(query: Query): number {
  return boundedInt(query, 'limit', LIMIT);
}

export function parseHitLimit(query: Query): number {
  return boundedInt(query, 'hit_limit', HIT_LIMIT);
}

/** a 0/1 flag (absent: false) */
export function parseFlag(query: Query, name: string): boolean {
  const raw = single(query, name);
  if (raw === undefined || raw === '0') return false;
  if (raw === '1') return true;
  throw new InvalidRequestError(`${name} must be 1 (or 0), got "${preview(raw)}"`, name);
}

export function parseIncludeHits(query: Query): boolean {
  return parseFlag(query, 'include_hits');
}

function codePointLength(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

export function parseSearchQuery(query: Query): string {
  const raw = single(query, 'q');
  if (raw === undefined) throw new InvalidRequestError('q is required', 'q');
  const q = raw.trim();
  if (!q) throw new InvalidRequestError('q must not be empty', 'q');
  if (codePointLength(q) > Q_MAX_LENGTH) {
    throw new InvalidRequestError(`q must be at most ${Q_MAX_LENGTH} characters`, 'q');
  }
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(q)) {
    throw new InvalidRequestError('q must not contain control characters', 'q');
  }
  return q;
}

/** The opaque cursor as given; whether it is one the source issued is checked by the source. */
const SEQUENCE = /^(0|[1-9][0-9]{0,15})$/;

/**
 * `after` of the events endpoint: a sequence number (0 = from the first event; absent: 0). A
 * cursor of that endpoint stands for one too, so it is passed through this rule again.
 */
export function parseAfter(query: Query): number {
  const raw = single(query, 'after');
  if (raw === undefined) return 0;
  const n = SEQUENCE.test(raw) ? Number(raw) : NaN;
  if (!Number.isSafeInteger(n) || n > SEQUENCE_MAX) {
    throw new InvalidRequestError(
      `after must be a sequence number (a whole number from 0 to ${SEQUENCE_MAX}), got "${preview(raw)}"`,
      'after',
    );
  }
  return n;
}

export function parseCursor(query: Query): string | undefined {
  const raw = single(query, 'cursor');
  if (raw === undefined) return undefined;
  if (raw === '' || raw.length > CURSOR_MAX_LENGTH || !/^[A-Za-z0-9_-]+$/.test(raw)) {
    throw new InvalidRequestError('cursor is not valid (pass the next_cursor of a previous page)', 'cursor');
  }
  return raw;
}

export function parseUsername(raw: string): string {
  if (!isValidUsername(raw)) {
    throw new InvalidRequestError('username must be 1 to 15 letters, digits or underscores', 'username');
  }
  return raw;
}

export function parseTweetId(raw: string): string {
  if (!isValidTweetId(raw)) throw new InvalidRequestError('id must be a numeric tweet id (1 to 19 digits)', 'id');
  return raw;
}

export { isUuid } from '@sts/core';

/** The `text` of POST /tweets: a JSON object with a non-empty string of at most 280 characters. */
export function parseNewTweet(body: unknown): { text: string } {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new InvalidRequestError('request body must be a JSON object with a "text" field', 'body');
  }
  const text = (body as Record<string, unknown>).text;
  if (text === undefined || text === null) throw new InvalidRequestError('text is required', 'text');
  if (typeof text !== 'string') throw new InvalidRequestError('text must be a string', 'text');
  if (!text.trim()) throw new InvalidRequestError('text must not be empty', 'text');
  if (codePointLength(text) > TWEET_TEXT_MAX_LENGTH) {
    throw new InvalidRequestError(`text must be at most ${TWEET_TEXT_MAX_LENGTH} characters`, 'text');
  }
  return { text };
}
