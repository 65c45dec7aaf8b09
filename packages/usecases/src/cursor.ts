/**
 * Opaque page cursors over (time, id), newest first. The cursor is base64url of `<ms>.<uuid>`:
 * the last row of a page; the next page holds the rows strictly older in (time desc, id desc).
 */
import { isUuid } from '@sts/core';
import { ValidationError } from './errors';

export interface CursorPosition {
  at: Date;
  id: string;
}

export function encodeCursor(at: Date, id: string): string {
  return Buffer.from(`${at.getTime()}.${id}`, 'utf8').toString('base64url');
}

export function decodeCursor(cursor: string): CursorPosition {
  const bad = () => new ValidationError('cursor', 'is not a cursor this list handed out');
  if (typeof cursor !== 'string' || cursor.length > 200 || !/^[A-Za-z0-9_-]+$/.test(cursor)) throw bad();
  const text = Buffer.from(cursor, 'base64url').toString('utf8');
  const m = /^(\d{1,15})\.(.+)$/.exec(text);
  if (!m || !isUuid(m[2]!)) throw bad();
  return { at: new Date(Number(m[1])), id: m[2]! };
}

/** Prisma `where` for rows after the cursor in (field desc, id desc) order. */
export function olderThan<F extends string>(field: F, c: CursorPosition) {
  return {
    OR: [{ [field]: { lt: c.at } }, { [field]: c.at, id: { lt: c.id } }],
  } as { OR: Record<string, unknown>[] };
}

export const PAGE_DEFAULT = 25;
export const PAGE_MAX = 500;

export function pageLimit(limit: number | undefined): number {
  if (limit === undefined) return PAGE_DEFAULT;
  if (!Number.isInteger(limit) || limit < 1 || limit > PAGE_MAX) {
    throw new ValidationError('limit', `must be a whole number from 1 to ${PAGE_MAX}`);
  }
  return limit;
}
