/**
 * The poller's PostgreSQL side. `recordBatch` writes the hits of one batch of tweets, their
 * monitor.hit events (outbox) and the advanced cursor in ONE transaction, and wakes the relay.
 */
import { randomUUID } from 'node:crypto';
import type { Db } from '@sts/db';
import type { MonitorHitEvent } from '@sts/messaging';
import type { TargetState, WatchingMonitor } from '../domain/hits';

export const OUTBOX_CHANNEL = 'sts_outbox';

export interface NewHit {
  monitorId: string;
  accountId: string;
  tweetId: string;
  tweetText: string;
  tweetAuthorId: string;
  tweetAuthorUsername: string;
  tweetCreatedAt: Date;
  detectedAt: Date;
  event: MonitorHitEvent;
}

export interface CursorState {
  lastTweetId: string | null;
  lastTweetAt: Date | null;
}

export interface PollerRepository {
  targets(): Promise<TargetState[]>;
  monitorsFor(targetKey: string): Promise<WatchingMonitor[]>;
  cursor(targetKey: string): Promise<CursorState | null>;
  /** Inserts the hits not yet recorded (unique on monitor + tweet) with their events and moves the cursor. Returns how many were new. */
  recordBatch(targetKey: string, hits: NewHit[], cursor: CursorState, polledAt: Date): Promise<number>;
  /** Records a failed poll: cursor untouched; the error goes on the target's monitors. */
  recordFailure(targetKey: string, error: string, polledAt: Date): Promise<void>;
}

export function createPollerRepository(db: Db): PollerRepository {
  return {
    async targets() {
      const rows = await db.$queryRaw<
        { target_key: string; username: string; starter: boolean; last_polled_at: Date | null }[]
      >`
        SELECT m.target_key, min(m.target_username) AS username,
               bool_or(a.plan = 'starter' OR a.trial_ends_at > now()) AS starter,
               c.last_polled_at
        FROM monitors m
        JOIN accounts a ON a.id = m.account_id
        LEFT JOIN poll_cursors c ON c.target_key = m.target_key
        WHERE m.is_active
        GROUP BY m.target_key, c.last_polled_at`;
      return rows.map((r) => ({
        targetKey: r.target_key,
        username: r.username,
        starter: r.starter,
        lastPolledAt: r.last_polled_at,
      }));
    },

    async monitorsFor(targetKey) {
      const rows = await db.monitor.findMany({
        where: { targetKey, isActive: true },
        select: { id: true, accountId: true, targetUsername: true, keywords: true, createdAt: true },
      });
      return rows;
    },

    async cursor(targetKey) {
      const row = await db.pollCursor.findUnique({
        where: { targetKey },
        select: { lastTweetId: true, lastTweetAt: true },
      });
      return row;
    },

    async recordBatch(targetKey, hits, cursor, polledAt) {
      return db.$transaction(async (tx) => {
        let inserted: { id: string; monitor_id: string; tweet_id: string }[] = [];
        if (hits.length > 0) {
          inserted = await tx.$queryRaw<{ id: string; monitor_id: string; tweet_id: string }[]>`
            INSERT INTO hits (monitor_id, tweet_id, tweet_text, tweet_author_id, tweet_author_username, tweet_created_at, detected_at)
            SELECT * FROM unnest(
              ${hits.map((h) => h.monitorId)}::uuid[], ${hits.map((h) => h.tweetId)}::text[], ${hits.map((h) => h.tweetText)}::text[],
              ${hits.map((h) => h.tweetAuthorId)}::text[], ${hits.map((h) => h.tweetAuthorUsername)}::text[],
              ${hits.map((h) => h.tweetCreatedAt)}::timestamptz[], ${hits.map((h) => h.detectedAt)}::timestamptz[])
            ON CONFLICT (monitor_id, tweet_id) DO NOTHING
            RETURNING id, monitor_id, tweet_id`;
        }
        if (inserted.length > 0) {
          const byKey = new Map(hits.map((h) => [`${h.monitorId}:${h.tweetId}`, h]));
          const rows = inserted.map((r) => {
            const h = byKey.get(`${r.monitor_id}:${r.tweet_id}`)!;
            return {
              routingKey: 'monitor.hit',
              messageId: randomUUID(),
              payload: h.event,
              headers: { accountId: h.accountId, hitId: r.id },
            };
          });
          await tx.outboxEvent.createMany({ data: rows });
          await tx.$executeRaw`SELECT pg_notify(${OUTBOX_CHANNEL}, '')`;
        }
        await tx.pollCursor.upsert({
          where: { targetKey },
          create: {
            targetKey,
            lastTweetId: cursor.lastTweetId,
            lastTweetAt: cursor.lastTweetAt,
            lastPolledAt: polledAt,
            lastError: null,
          },
          update: {
            lastTweetId: cursor.lastTweetId,
            lastTweetAt: cursor.lastTweetAt,
            lastPolledAt: polledAt,
            lastError: null,
          },
        });
        await tx.monitor.updateMany({
          where: { targetKey, isActive: true },
          data: { lastCheckAt: polledAt, lastError: null },
        });
        return inserted.length;
      });
    },

    async recordFailure(targetKey, error, polledAt) {
      await db.$transaction([
        db.pollCursor.upsert({
          where: { targetKey },
          create: { targetKey, lastPolledAt: polledAt, lastError: error },
          update: { lastPolledAt: polledAt, lastError: error },
        }),
        db.monitor.updateMany({
          where: { targetKey, isActive: true },
          data: { lastCheckAt: polledAt, lastError: error },
        }),
      ]);
    },
  };
}
