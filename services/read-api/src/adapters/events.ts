/**
 * A monitor's events by sequence (GET /api/v1/monitors/:id/events, docs/api.md "Events by
 * sequence"), read from where they are kept: `hits` (monitor.hit, partitioned by the post's time)
 * and `monitor_events` (profile changes, target status changes), each through its
 * (monitor_id, sequence) index, merged in sequence order. Each is answered as its webhook delivers
 * it: the native body's payload (@sts/messaging), with the monitor reference as the monitor is now,
 * as a redelivery sends it.
 */
import { monitorRefFields, type Db, type HitSqlRow, type MonitorRefSqlRow } from '@sts/db';
import { contracts, monitorHitPayload, monitorRef, webhookPayload, type WebhookPayload } from '@sts/messaging';

interface EventPage {
  items: WebhookPayload[];
  /** another event follows the last one */
  more: boolean;
}

export interface EventLog {
  /**
   * Up to `limit` events of the account's monitor with a sequence above `after`, oldest first, of
   * posts (hits) and events (the others) from `since` on; null when the account has no such monitor.
   */
  list(
    accountId: string,
    monitorId: string,
    page: { after: number; limit: number; since: Date },
  ): Promise<EventPage | null>;
}

/** the monitor, and one of its events: a hit's columns (null for a stored event) or a stored payload */
type EventRow = MonitorRefSqlRow & {
  [K in keyof Omit<HitSqlRow, 'id' | 'monitor_id'>]: HitSqlRow[K] | null;
} & {
  sequence: string | null;
  kind: string | null;
  payload: unknown;
};

function payloadOf(r: EventRow): WebhookPayload {
  const monitor = monitorRef(monitorRefFields(r));
  const sequence = Number(r.sequence);
  if (r.kind === 'monitor.hit') {
    const tweet = {
      id: r.tweet_id!,
      text: r.tweet_text!,
      authorUsername: r.tweet_author_username!,
      createdAt: r.tweet_created_at!.toISOString(),
    };
    return webhookPayload(monitorHitPayload(monitor, tweet, r.detected_at!.toISOString(), sequence));
  }
  const stored =
    r.kind === 'monitor.profile_changed'
      ? contracts['monitor.profile_changed'].payload.parse(r.payload)
      : contracts['monitor.target_unavailable'].payload.parse(r.payload);
  return webhookPayload({ ...stored, monitor, sequence });
}

export function createEventLog(db: Db): EventLog {
  return {
    async list(accountId, monitorId, { after, limit, since }) {
      // one row with null event columns when the monitor has no event in the page
      const rows = await db.$queryRaw<EventRow[]>`
        WITH m AS (
          SELECT id, target_username, query, keywords FROM monitors
          WHERE id = ${monitorId}::uuid AND account_id = ${accountId}::uuid
        )
        SELECT m.id::text AS monitor_id, m.target_username, m.query, m.keywords, e.* FROM m LEFT JOIN LATERAL (
          SELECT * FROM (
            (SELECT h.sequence::text AS sequence, 'monitor.hit' AS kind, h.tweet_id, h.tweet_text, h.tweet_author_username,
                    h.tweet_created_at, h.detected_at, NULL::jsonb AS payload
               FROM hits h
              WHERE h.monitor_id = m.id AND h.sequence > ${after} AND h.tweet_created_at >= ${since}
              ORDER BY h.sequence LIMIT ${limit + 1})
            UNION ALL
            (SELECT v.sequence::text, v.kind, NULL, NULL, NULL, NULL, NULL, v.payload
               FROM monitor_events v
              WHERE v.monitor_id = m.id AND v.sequence > ${after} AND v.created_at >= ${since}
              ORDER BY v.sequence LIMIT ${limit + 1})
          ) u ORDER BY u.sequence::bigint LIMIT ${limit + 1}
        ) e ON true`;
      if (rows.length === 0) return null;
      const events = rows.filter((r) => r.sequence !== null);
      return { items: events.slice(0, limit).map(payloadOf), more: events.length > limit };
    },
  };
}
