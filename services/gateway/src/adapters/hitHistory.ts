/**
 * Reads of the stream from PostgreSQL: which of the asked monitors belong to the account, where a
 * new stream starts, and the account's hits after a position in commit order (xid, id), as webhook
 * payloads with their sequence (the same builder the poller publishes with: monitorHitPayload / monitorRef).
 *
 * Commit order is read only below the snapshot horizon: every transaction of this database with a
 * smaller xid has ended, so no hit can later appear at or before a position this read returned (a
 * hit's transaction still running has an xid at or past it).
 */
import { COMMIT_HORIZON, monitorRefFields, type Db, type HitSqlRow, type MonitorRefSqlRow } from '@sts/db';
import { monitorHitPayload, monitorRef, type MonitorHitEvent } from '@sts/messaging';
import type { StreamPosition } from '../domain/streamCursor';

const MAX_UUID = 'ffffffff-ffff-ffff-ffff-ffffffffffff';

export interface StoredHit {
  pos: StreamPosition;
  monitorId: string;
  payload: MonitorHitEvent;
}

/** a page of hits, and whether a stored hit waits past the horizon (read again once it moves) */
interface HitPage {
  hits: StoredHit[];
  waiting: boolean;
}

export interface HitHistory {
  /** the ids among `monitorIds` that are not the account's monitors */
  foreignMonitors(accountId: string, monitorIds: readonly string[]): Promise<string[]>;
  /** the position of a stream opened now: just before the oldest transaction still running */
  horizon(): Promise<StreamPosition>;
  /**
   * up to `limit` hits of the account (of `monitorIds` when given) after `after`, in commit order,
   * all of them below the horizon; `waiting` when one of these monitors has a committed hit at or
   * past the horizon (a transaction older than it is still running)
   */
  hitsAfter(
    accountId: string,
    monitorIds: readonly string[] | null,
    after: StreamPosition,
    limit: number,
  ): Promise<HitPage>;
}

/** a hit with its commit position and monitor (`id` null: the monitor's no-hit row) */
interface HitRow extends Omit<HitSqlRow, 'id'>, MonitorRefSqlRow {
  waiting: boolean;
  id: string | null;
  xid: string;
  /** the monitor's event number (null: recorded before events were numbered) */
  sequence: string | null;
}

export function createHitHistory(db: Db): HitHistory {
  return {
    async foreignMonitors(accountId, monitorIds) {
      const rows = await db.$queryRaw<{ id: string }[]>`
        SELECT id::text FROM monitors WHERE account_id = ${accountId}::uuid AND id = ANY(${monitorIds}::uuid[])`;
      const own = new Set(rows.map((r) => r.id));
      return monitorIds.filter((id) => !own.has(id));
    },
    async horizon() {
      const [row] = await db.$queryRaw<{ horizon: string }[]>`SELECT ${COMMIT_HORIZON}::text AS horizon`;
      return { xid: BigInt(row!.horizon) - 1n, hitId: MAX_UUID };
    },
    async hitsAfter(accountId, monitorIds, after, limit) {
      // per monitor: an index range of (monitor_id, xid, id) on each partition, merged in order;
      // one row with null hit columns when there is no hit
      const rows = await db.$queryRaw<HitRow[]>`
        WITH h AS MATERIALIZED (SELECT ${COMMIT_HORIZON} AS horizon),
        m AS MATERIALIZED (
          SELECT id, target_username, query, keywords FROM monitors
           WHERE account_id = ${accountId}::uuid AND (${monitorIds}::uuid[] IS NULL OR id = ANY(${monitorIds}::uuid[]))),
        w AS MATERIALIZED (
          SELECT EXISTS (
            SELECT 1 FROM h, m CROSS JOIN LATERAL (
              SELECT 1 FROM hits x WHERE x.monitor_id = m.id AND x.xid >= h.horizon LIMIT 1) p) AS waiting)
        SELECT w.waiting, r.* FROM w LEFT JOIN LATERAL (
          SELECT x.id::text, x.xid::text, x.monitor_id::text, x.tweet_id, x.tweet_text, x.tweet_author_username,
                 x.tweet_created_at, x.detected_at, x.sequence::text, m.target_username, m.query, m.keywords
            FROM h, m CROSS JOIN LATERAL (
                   SELECT y.id, y.xid, y.monitor_id, y.tweet_id, y.tweet_text, y.tweet_author_username,
                          y.tweet_created_at, y.detected_at, y.sequence
                     FROM hits y
                    WHERE y.monitor_id = m.id
                      AND (y.xid, y.id) > (${String(after.xid)}::xid8, ${after.hitId}::uuid)
                      AND y.xid < h.horizon
                    ORDER BY y.xid, y.id
                    LIMIT ${limit}) x
           ORDER BY x.xid, x.id
           LIMIT ${limit}) r ON true`;
      return { hits: rows.filter((r) => r.id !== null).map(storedHit), waiting: rows[0]?.waiting ?? false };
    },
  };
}

function storedHit(r: HitRow): StoredHit {
  return {
    pos: { xid: BigInt(r.xid), hitId: r.id! },
    monitorId: r.monitor_id,
    payload: monitorHitPayload(
      monitorRef(monitorRefFields(r)),
      {
        id: r.tweet_id,
        text: r.tweet_text,
        authorUsername: r.tweet_author_username,
        createdAt: r.tweet_created_at.toISOString(),
      },
      r.detected_at.toISOString(),
      r.sequence === null ? null : Number(r.sequence),
    ),
  };
}
