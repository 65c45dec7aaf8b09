/**
 * The `id:` of a stream event and the Last-Event-ID a client resumes with: the position of a hit
 * in the account's commit order, (xid, hit id), where xid is the id of the transaction that
 * recorded the hit (hits.xid). The stream sends hits in this order and only below the snapshot
 * horizon, so every hit at or before a cursor was committed and sent when the cursor was made.
 * Sealed with an HMAC over the account id so a client can neither forge a position nor resume
 * with another account's cursor.
 *
 * Shape: `h2.<xid>.<hit uuid>.<mac>` (mac: 16 bytes of HMAC-SHA256, base64url). The `h1.` cursors
 * of the (detected_at, id) order are no longer accepted.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export interface StreamPosition {
  /** the recording transaction's id (xid8) */
  xid: bigint;
  hitId: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const CURSOR = /^h2\.(\d{1,20})\.([0-9a-f-]{36})\.([A-Za-z0-9_-]{22})$/;
const XID8_MAX = 2n ** 64n - 1n;

export interface CursorCodec {
  encode(accountId: string, pos: StreamPosition): string;
  /** the position, or null when the value is not a cursor this service made for this account */
  decode(accountId: string, value: string): StreamPosition | null;
}

export function createCursorCodec(secret: string): CursorCodec {
  const key = createHmac('sha256', secret).update('sts stream cursor v2').digest();
  const mac = (accountId: string, xid: bigint, hitId: string) =>
    createHmac('sha256', key).update(`${accountId}.${xid}.${hitId}`).digest().subarray(0, 16);
  return {
    encode: (accountId, { xid, hitId }) => `h2.${xid}.${hitId}.${mac(accountId, xid, hitId).toString('base64url')}`,
    decode(accountId, value) {
      const m = CURSOR.exec(value);
      if (!m) return null;
      const xid = BigInt(m[1]!);
      const hitId = m[2]!;
      if (xid > XID8_MAX || !UUID.test(hitId)) return null;
      const given = Buffer.from(m[3]!, 'base64url');
      const want = mac(accountId, xid, hitId);
      return given.length === want.length && timingSafeEqual(given, want) ? { xid, hitId } : null;
    },
  };
}
