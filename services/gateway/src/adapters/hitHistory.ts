/**
 * Reads of the stream from PostgreSQL: which of the asked monitors belong to the account, and the
 * account's hits after a position, in hit order, as webhook payloads (the same builder the poller
 * publishes with: monitorHitPayload / monitorRef).
 */
import type { Db } from '@sts/db';
import { monitorHitPayload, monitorRef, type MonitorHitEvent } from '@sts/messaging';
import type { StreamPosition } from '../domain/streamCursor';

interface StoredHit {
  pos: StreamPosition;
  monitorId: string;
  payload: MonitorHitEvent;
}

export interface HitHistory {
  /** the ids among `monitorIds` that are not the account's monitors */
  foreignMonitors(accountId: string, monitorIds: readonly string[]): Promise<string[]>;
  /** up to `limit` hits of the account (of `monitorIds` when given) after `after`, oldest first */
  hitsAfter(
    accountId: string,
    monitorIds: readonly string[] | null,
    after: StreamPosition,
    limit: number,
  ): Promise<StoredHit[]>;
}

interface HitRow {
  id: string;
  monitor_id: string;
  tweet_id: string;
  tweet_text: string;
  tweet_author_username: string;
  tweet_created_at: Date;
  detected_at: Date;
  target_username: string;
  keywords: string[];
}

export function createHitHistory(db: Db): HitHistory {
  return {
    async foreignMonitors(accountId, monitorIds) {
      const rows = await db.$queryRaw<{ id: string }[]>`
        SELECT id::text FROM monitors WHERE account_id = ${accountId}::uuid AND id = ANY(${monitorIds}::uuid[])`;
      const own = new Set(rows.map((r) => r.id));
      return monitorIds.filter((id) => !own.has(id));
    },
    async hitsAfter(accountId, monitorIds, after, limit) {
      const at = new Date(after.at);
      const rows = await db.$queryRaw<HitRow[]>`
        SELECT h.id::text, h.monitor_id::text, h.tweet_id, h.tweet_text, h.tweet_author_username,
               h.tweet_created_at, h.detected_at, m.target_username, m.keywords
          FROM hits h JOIN monitors m ON m.id = h.monitor_id
         WHERE m.account_id = ${accountId}::uuid
           AND (${monitorIds}::uuid[] IS NULL OR h.monitor_id = ANY(${monitorIds}::uuid[]))
           AND (h.detected_at, h.id) > (${at}::timestamptz, ${after.hitId}::uuid)
         ORDER BY h.detected_at, h.id
         LIMIT ${limit}`;
      return rows.map((r) => ({
        pos: { at: r.detected_at.getTime(), hitId: r.id },
        monitorId: r.monitor_id,
        payload: monitorHitPayload(
          monitorRef({ id: r.monitor_id, targetUsername: r.target_username, keywords: r.keywords }),
          {
            id: r.tweet_id,
            text: r.tweet_text,
            authorUsername: r.tweet_author_username,
            createdAt: r.tweet_created_at.toISOString(),
          },
          r.detected_at.toISOString(),
        ),
      }));
    },
  };
}
