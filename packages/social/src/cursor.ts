/**
 * Opaque cursors. A cursor is base64url text of `<kind>.<field>.<field>...`; decoding checks the
 * kind, the shape of every field, and that re-encoding gives back exactly the same text, so a
 * cursor that this code did not issue (edited, truncated, from another list) is refused.
 */
import { InvalidCursorError } from './types';

const MAX_CURSOR_LENGTH = 1024;
const BASE64URL = /^[A-Za-z0-9_-]+$/;

export function encodeCursor(kind: string, fields: readonly string[]): string {
  return Buffer.from([kind, ...fields].join('.'), 'utf8').toString('base64url');
}

/** The fields of a cursor of `kind` with `count` fields; throws InvalidCursorError otherwise. */
export function decodeCursor(cursor: string, kind: string, count: number): string[] {
  if (cursor.length === 0 || cursor.length > MAX_CURSOR_LENGTH || !BASE64URL.test(cursor)) {
    throw new InvalidCursorError('cursor is not valid');
  }
  const text = Buffer.from(cursor, 'base64url').toString('utf8');
  const parts = text.split('.');
  if (parts.length !== count + 1 || parts[0] !== kind) throw new InvalidCursorError('cursor is not valid');
  const fields = parts.slice(1);
  if (encodeCursor(kind, fields) !== cursor) throw new InvalidCursorError('cursor is not valid');
  return fields;
}

const MS_RE = /^(0|[1-9][0-9]{0,15})$/;

/** A (timestamp, id) keyset position; `idRe` checks the id's shape. */
export function encodeKeyset(kind: string, at: Date, id: string): string {
  return encodeCursor(kind, [String(at.getTime()), id]);
}

export function decodeKeyset(cursor: string, kind: string, idRe: RegExp): { at: Date; id: string } {
  const [ms, id] = decodeCursor(cursor, kind, 2) as [string, string];
  if (!MS_RE.test(ms) || !idRe.test(id)) throw new InvalidCursorError('cursor is not valid');
  const at = new Date(Number(ms));
  if (Number.isNaN(at.getTime())) throw new InvalidCursorError('cursor is not valid');
  return { at, id };
}
