/**
 * Identifiers of the local social store: snowflake-style numeric strings (milliseconds since the
 * X epoch shifted left 22 bits, plus a sequence and random bits), so ids sort by creation time
 * like the real ones. Validation of usernames and tweet ids as the public API accepts them.
 */
import { randomInt } from 'node:crypto';

const X_EPOCH = 1288834974657n;
let lastMs = 0n;
let seq = 0n;

export function snowflakeId(at: Date = new Date()): string {
  let ms = BigInt(at.getTime());
  if (ms < X_EPOCH) ms = X_EPOCH;
  if (ms === lastMs) seq = (seq + 1n) & 0xfffn;
  else {
    lastMs = ms;
    seq = BigInt(randomInt(0x800));
  }
  const worker = BigInt(randomInt(0x400));
  return (((ms - X_EPOCH) << 22n) | (worker << 12n) | seq).toString();
}

/**
 * The largest snowflake id created before `at`: as a since-id it selects everything created at
 * or after that moment (for local ids and X's alike).
 */
export function snowflakeBefore(at: Date): string {
  const ms = BigInt(at.getTime());
  if (ms <= X_EPOCH) return '0';
  return (((ms - X_EPOCH) << 22n) - 1n).toString();
}

/** The creation time encoded in a snowflake id. */
export function snowflakeTime(id: string): Date {
  return new Date(Number((BigInt(id) >> 22n) + X_EPOCH));
}

/** Usernames: 1 to 15 letters, digits or underscores (the X rules). */
export const USERNAME_RE = /^[A-Za-z0-9_]{1,15}$/;
/** Tweet ids: 1 to 19 digits, no leading zero. */
export const TWEET_ID_RE = /^[1-9][0-9]{0,18}$/;

/** UUIDs as the database writes them (any version), either case: the one pattern every service checks ids with. */
export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(value: string): boolean {
  return UUID_RE.test(value);
}

export function isValidUsername(value: string): boolean {
  return USERNAME_RE.test(value);
}

export function isValidTweetId(value: string): boolean {
  return TWEET_ID_RE.test(value) && BigInt(value) <= 9223372036854775807n;
}

/** Compares two numeric-string ids as numbers. */
export function compareIds(a: string, b: string): number {
  return a.length !== b.length ? a.length - b.length : a < b ? -1 : a > b ? 1 : 0;
}
