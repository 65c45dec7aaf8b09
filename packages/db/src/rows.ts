/**
 * Row shapes more than one service reads, with their Prisma select, written once: the type is
 * what Prisma returns for the select, so the two cannot drift apart.
 */
import type { PlanName } from '@sts/core';
import { Prisma, type PrismaClient } from './generated/prisma/client';

/** A recorded hit as read-api lists it and the dispatcher delivers it. */
export const hitSelect = {
  id: true,
  monitorId: true,
  tweetId: true,
  tweetText: true,
  tweetAuthorUsername: true,
  tweetCreatedAt: true,
  detectedAt: true,
} as const satisfies Prisma.HitSelect;

export type HitRow = Prisma.HitGetPayload<{ select: typeof hitSelect }>;

/** The same hit as raw SQL reads it: hitSelect's columns by their SQL names, ids as text. */
export interface HitSqlRow {
  id: string;
  monitor_id: string;
  tweet_id: string;
  tweet_text: string;
  tweet_author_username: string;
  tweet_created_at: Date;
  detected_at: Date;
}

/** HitSqlRow's columns of the hits table aliased `h`, for a raw SELECT (`${HIT_SQL_COLUMNS}`). */
export const HIT_SQL_COLUMNS = Prisma.raw(
  'h.id::text AS id, h.monitor_id::text AS monitor_id, h.tweet_id, h.tweet_text, h.tweet_author_username, ' +
    'h.tweet_created_at, h.detected_at',
);

/** A monitor as an event's payload names it, as raw SQL reads it (the monitor's id as text). */
export interface MonitorRefSqlRow {
  monitor_id: string;
  target_username: string | null;
  query: string | null;
  keywords: string[];
}

/** A MonitorRefSqlRow by its fields' TypeScript names (what @sts/messaging's monitorRef takes). */
export function monitorRefFields(r: MonitorRefSqlRow) {
  return { id: r.monitor_id, targetUsername: r.target_username, query: r.query, keywords: r.keywords };
}

/** A HitSqlRow as hitSelect's HitRow. */
export function hitOfSqlRow(r: HitSqlRow): HitRow {
  return {
    id: r.id,
    monitorId: r.monitor_id,
    tweetId: r.tweet_id,
    tweetText: r.tweet_text,
    tweetAuthorUsername: r.tweet_author_username,
    tweetCreatedAt: r.tweet_created_at,
    detectedAt: r.detected_at,
  };
}

/**
 * A monitor's own settings and state (filters, interval, last check), as the dashboard's use-cases
 * and read-api's monitor records read them; each adds the relations it needs.
 */
export const monitorSettingsSelect = {
  id: true,
  targetUsername: true,
  query: true,
  keywords: true,
  excludeTypes: true,
  langs: true,
  events: true,
  targetStatus: true,
  targetStatusAt: true,
  isActive: true,
  checkIntervalSec: true,
  lastCheckAt: true,
  lastError: true,
  createdAt: true,
  updatedAt: true,
} as const satisfies Prisma.MonitorSelect;

export type MonitorSettings = Prisma.MonitorGetPayload<{ select: typeof monitorSettingsSelect }>;

/**
 * An active monitor as the poller matches posts against it (the poller's and the X stream's
 * reads select exactly these columns).
 */
export interface WatchingMonitor {
  id: string;
  accountId: string;
  /** exactly one of the two: a username monitor's target, a query monitor's query */
  targetUsername: string | null;
  query: string | null;
  /** empty = no keyword filter; exclusions written `-word` */
  keywords: string[];
  /** post types left out (replies, reposts, quotes); empty = all */
  excludeTypes: string[];
  /** languages that fire; empty = any */
  langs: string[];
  createdAt: Date;
}

/** WatchingMonitor's columns of the monitors table aliased `m`, for a raw SELECT. */
export const WATCHING_MONITOR_COLUMNS = Prisma.raw(
  'm.id::text AS id, m.account_id::text AS "accountId", m.target_username AS "targetUsername", m.query, ' +
    'm.keywords, m.exclude_types AS "excludeTypes", m.langs, m.created_at AS "createdAt"',
);

/** The plan of an account watching a target, as its poll interval and the stream's rules read it. */
export interface WatchingAccount {
  plan: PlanName;
  trialEndsAt: Date | null;
}

/** An active query monitor and the plan of the account that owns it. */
export interface QueryWatcher extends WatchingMonitor {
  query: string;
  account: WatchingAccount;
}

/**
 * The poll_cursors row of the query intake, which matches committed posts against every active
 * query monitor: their last check. "?" is never in a username, so it is no target's key.
 */
export const QUERY_CURSOR_KEY = '?query';

/**
 * The poll_cursors row (and x_stream_owed key) of one query monitor read on X (its own recent
 * search or stream rule): `?query:<monitor id>`, no target's key either.
 */
export function queryCursorKeyOf(monitorId: string): string {
  return `${QUERY_CURSOR_KEY}:${monitorId}`;
}

/** What a monitor's last check is derived from: its target and state, and its stored (paused) values. */
interface LastCheckInput {
  id?: string;
  /** null: a query monitor, whose checks are the query intake's (QUERY_CURSOR_KEY) or, on X, its own (queryCursorKeyOf) */
  targetKey: string | null;
  isActive: boolean;
  createdAt: Date;
  lastCheckAt: Date | null;
  lastError: string | null;
}

/**
 * A monitor's `last_check_at` and `last_error`, derived from its target's cursor: a poll writes
 * the target's row (poll_cursors), never each of the monitors watching it. An active monitor
 * shows its target's last poll (none before the monitor existed) and the target's error; a
 * paused one the values it had when it was paused (frozen into its own row by the
 * monitors_last_check_freeze trigger). One indexed read of the targets' cursors for the lot.
 */
interface CursorSeen {
  lastPolledAt: Date | null;
  lastError: string | null;
}

export async function withLastCheck<T extends LastCheckInput>(
  db: Pick<PrismaClient, 'pollCursor'>,
  monitors: T[],
): Promise<T[]> {
  const keysOf = (m: LastCheckInput): string[] =>
    m.targetKey !== null ? [m.targetKey] : [QUERY_CURSOR_KEY, ...(m.id ? [queryCursorKeyOf(m.id)] : [])];
  const keys = [...new Set(monitors.filter((m) => m.isActive).flatMap(keysOf))];
  if (keys.length === 0) return monitors;
  const cursors = new Map(
    (
      await db.pollCursor.findMany({
        where: { targetKey: { in: keys } },
        select: { targetKey: true, lastPolledAt: true, lastError: true },
      })
    ).map((c) => [c.targetKey, c]),
  );
  return monitors.map((m) => {
    if (!m.isActive) return m;
    // a query monitor: the later of the local store's query cursor and its own X cursor
    const c = keysOf(m)
      .flatMap((k) => cursors.get(k) ?? [])
      .reduce<CursorSeen | undefined>(
        (a, b) => (a && (a.lastPolledAt ?? 0) >= (b.lastPolledAt ?? 0) ? a : b),
        undefined,
      );
    const polled = c?.lastPolledAt && c.lastPolledAt >= m.createdAt ? c.lastPolledAt : null;
    return { ...m, lastCheckAt: polled, lastError: c?.lastError ?? null };
  });
}
