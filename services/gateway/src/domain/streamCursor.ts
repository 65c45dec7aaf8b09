/**
 * The `id:` of a stream event and the Last-Event-ID a client resumes with: the position of a hit
 * in the account's hit order, (detected_at, hit id), sealed with an HMAC over the account id so a
 * client can neither forge a position nor resume with another account's cursor.
 *
 * Shape: `h1.<detected_at in ms>.<hit uuid>.<mac>` (mac: 16 bytes of HMAC-SHA256, base64url).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export interface StreamPosition {
  /** detected_at in ms since the epoch */
  at: number;
  hitId: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const CURSOR = /^h1\.(\d{1,15})\.([0-9a-f-]{36})\.([A-Za-z0-9_-]{22})$/;

/** -1, 0, 1 as a is before, at, after b in the hit order */
export function comparePositions(a: StreamPosition, b: StreamPosition): number {
  if (a.at !== b.at) return a.at < b.at ? -1 : 1;
  return a.hitId < b.hitId ? -1 : a.hitId > b.hitId ? 1 : 0;
}

export interface CursorCodec {
  encode(accountId: string, pos: StreamPosition): string;
  /** the position, or null when the value is not a cursor this service made for this account */
  decode(accountId: string, value: string): StreamPosition | null;
}

export function createCursorCodec(secret: string): CursorCodec {
  const key = createHmac('sha256', secret).update('sts stream cursor v1').digest();
  const mac = (accountId: string, at: number, hitId: string) =>
    createHmac('sha256', key).update(`${accountId}.${at}.${hitId}`).digest().subarray(0, 16);
  return {
    encode: (accountId, { at, hitId }) => `h1.${at}.${hitId}.${mac(accountId, at, hitId).toString('base64url')}`,
    decode(accountId, value) {
      const m = CURSOR.exec(value);
      if (!m) return null;
      const at = Number(m[1]);
      const hitId = m[2]!;
      if (!Number.isSafeInteger(at) || !UUID.test(hitId)) return null;
      const given = Buffer.from(m[3]!, 'base64url');
      const want = mac(accountId, at, hitId);
      return given.length === want.length && timingSafeEqual(given, want) ? { at, hitId } : null;
    },
  };
}
