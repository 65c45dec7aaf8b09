/**
 * A watched account deleted a post: `monitor.post_deleted` to every active monitor of the target
 * whose `events` name `deletes` (docs/webhooks.md), with the hit the monitor had sent for the post
 * (null: none), each a `monitor_events` row plus an outbox row numbered in the monitor's sequence
 * (./monitorEvents.ts; the relay publishes them), in one transaction under the target's lock.
 * Told once per monitor and post: a deletion seen again (X replays a gap, the local store's
 * notification and a redelivery) finds its event written and writes nothing.
 */
import type { Db, HitSqlRow } from '@sts/db';
import { monitorRef, type MonitorPostDeletedEvent } from '@sts/messaging';
import { writeMonitorEvents } from './monitorEvents';

interface WatcherRow {
  id: string;
  account_id: string;
  target_username: string;
  keywords: string[];
}

type HitRow = Pick<HitSqlRow, 'monitor_id' | 'id' | 'tweet_text' | 'tweet_created_at'>;

export interface PostDeletes {
  /** tells the target's monitors that asked for deletions; how many events were written */
  record(targetKey: string, postId: string, deletedAt: Date): Promise<number>;
}

export function createPostDeletes(db: Db): PostDeletes {
  return {
    record(targetKey, postId, deletedAt) {
      return db.$transaction(async (tx) => {
        await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtext('sts:deleted:' || ${targetKey}))`;
        const watchers = await tx.$queryRaw<WatcherRow[]>`
          SELECT m.id::text AS id, m.account_id::text AS account_id, m.target_username, m.keywords
          FROM monitors m
          WHERE m.target_key = ${targetKey} AND m.is_active AND 'deletes' = ANY(m.events)
            AND NOT EXISTS (SELECT 1 FROM monitor_events e
                            WHERE e.monitor_id = m.id AND e.kind = 'monitor.post_deleted'
                              AND e.payload->>'postId' = ${postId})`;
        if (watchers.length === 0) return 0;
        const hits = await tx.$queryRaw<HitRow[]>`
          SELECT monitor_id::text AS monitor_id, id::text AS id, tweet_text, tweet_created_at FROM hits
          WHERE tweet_id = ${postId} AND monitor_id = ANY(${watchers.map((w) => w.id)}::uuid[])`;
        const hitOf = new Map(hits.map((h) => [h.monitor_id, h]));
        const rows = watchers.map((m) => {
          const hit = hitOf.get(m.id);
          const payload: MonitorPostDeletedEvent = {
            event: 'monitor.post_deleted',
            monitor: monitorRef({ id: m.id, targetUsername: m.target_username, keywords: m.keywords }),
            postId,
            username: m.target_username,
            hit: hit ? { id: hit.id, text: hit.tweet_text, createdAt: hit.tweet_created_at.toISOString() } : null,
            deletedAt: deletedAt.toISOString(),
          };
          return { monitorId: m.id, accountId: m.account_id, payload };
        });
        await writeMonitorEvents(tx, rows);
        return rows.length;
      });
    },
  };
}
