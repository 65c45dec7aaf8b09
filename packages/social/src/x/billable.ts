/**
 * What X bills, as its pay-per-use pricing describes it (docs.x.com, x-api/getting-started/pricing):
 * reads are charged per resource returned, and a resource read again within the same 24-hour UTC
 * day is charged once. The kinds counted here (the `resource` label of `x_billable_total`):
 *
 *   post_read       a post in `data` of search, user timeline, post lookup, the filtered stream
 *   user_read       a user in `data` of a users lookup (by ids, by usernames, by username)
 *   activity_event  an X Activity API event of a billed type (`post.create`, `profile.update.*`;
 *                   `post.delete` is not billed)
 *
 * The authors expanded with posts (`includes.users`) are not counted: X's page prices the
 * resources an endpoint returns, and the expansion is the post's author, not a user lookup.
 * Pure rules: what an answer bills and which UTC day it falls in.
 */
import type { XFamily } from './governor';
import type { XResponse } from './wire';

export const X_BILLABLE_RESOURCES = ['post_read', 'user_read', 'activity_event'] as const;
export type XBillableResource = (typeof X_BILLABLE_RESOURCES)[number];

/** One billable resource as received. */
export interface XBillableRead {
  resource: XBillableResource;
  /** X's id of the resource: the post's, the user's, the event's `event_uuid` */
  id: string;
  /** the watched X account the read was for (lower-case username); null when not known */
  account: string | null;
}

/** The UTC day of `t` as YYYY-MM-DD: X's deduplication window. */
export function utcDay(t: Date): string {
  return t.toISOString().slice(0, 10);
}

const POST_FAMILIES: ReadonlySet<XFamily> = new Set<XFamily>(['search', 'timeline', 'tweets']);

interface Identified {
  id?: unknown;
  username?: unknown;
  author_id?: unknown;
}

function items(data: unknown): Identified[] {
  if (Array.isArray(data)) return data.filter((d): d is Identified => typeof d === 'object' && d !== null);
  return typeof data === 'object' && data !== null ? [data] : [];
}

const lower = (v: unknown) => (typeof v === 'string' && v !== '' ? v.toLowerCase() : null);

/**
 * The resources one REST answer of X bills, by the call's family: posts for search, timeline and
 * post lookups (each post's account is its author, from `includes.users`), users for users
 * lookups. Other families (rules, the stream's connect) bill no read.
 */
export function billableReads(family: XFamily, body: XResponse<unknown>): XBillableRead[] {
  if (family === 'users') {
    return items(body.data).flatMap((u) =>
      typeof u.id === 'string' ? [{ resource: 'user_read' as const, id: u.id, account: lower(u.username) }] : [],
    );
  }
  if (!POST_FAMILIES.has(family)) return [];
  const authors = new Map((body.includes?.users ?? []).map((u) => [u.id, u.username]));
  return items(body.data).flatMap((t) =>
    typeof t.id === 'string'
      ? [
          {
            resource: 'post_read' as const,
            id: t.id,
            account: typeof t.author_id === 'string' ? lower(authors.get(t.author_id)) : null,
          },
        ]
      : [],
  );
}

/** X Activity API event types X bills (its pricing page's webhook events table). */
export function isBilledActivityEvent(eventType: string): boolean {
  return eventType === 'post.create' || eventType.startsWith('profile.update.');
}
