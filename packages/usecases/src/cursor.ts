/**
 * Opaque page cursors over (time, id), newest first. The cursor is base64url of `<ms>.<uuid>`:
 * the last row of a page; the next page holds the rows strictly older in (time desc, id desc).
 */
import { isUuid } from '@sts/core';
import { ValidationError } from './errors';
import type { Page, PageRequest } from './types';

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

export const PAGE_DEFAULT = 25;
export const PAGE_MAX = 500;

function pageLimit(limit: number | undefined): number {
  if (limit === undefined) return PAGE_DEFAULT;
  if (!Number.isInteger(limit) || limit < 1 || limit > PAGE_MAX) {
    throw new ValidationError('limit', `must be a whole number from 1 to ${PAGE_MAX}`);
  }
  return limit;
}

/**
 * One page newest first: checks the request (limit, then cursor), reads one row more than the
 * page holds through `read` (rows strictly older than the cursor) to know whether another page
 * follows, and hands out the cursor of the page's last item.
 */
export async function readPage<R, V extends { id: string }>(
  page: PageRequest,
  read: (after: CursorPosition | undefined, take: number) => Promise<R[]>,
  view: (row: R) => V,
  at: (item: V) => Date,
): Promise<Page<V>> {
  const take = pageLimit(page.limit);
  const after = page.cursor ? decodeCursor(page.cursor) : undefined;
  const rows = await read(after, take + 1);
  const items = rows.slice(0, take).map(view);
  const last = items.at(-1);
  return { items, nextCursor: rows.length > take && last ? encodeCursor(at(last), last.id) : null };
}
