/**
 * The `stream` mode's PostgreSQL side: the active targets with the plans watching them (which
 * ones the stream covers), the targets changed since a time (`x_stream_changes`, stamped by
 * triggers), the stream's shared position (`x_stream_state`) and the backfill windows still owed
 * (`x_stream_owed`). Hits are recorded through the poller's repository (recordBatch), not here.
 */
import { Prisma, type Db } from '@sts/db';
import type { PlanName } from '@sts/core';
import type { MonitorRuleColumns } from '@sts/social';
import type { WatchingAccount } from '@sts/db';
import type { OwedWindow } from './domain/streamOwed';

export interface StreamTarget {
  targetKey: string;
  username: string;
  accounts: WatchingAccount[];
  /** creation of the target's oldest active monitor: nothing older can be a hit */
  oldestMonitorAt: Date;
  /** the rule columns of its active monitors: the parts its stream rule may carry */
  monitors: MonitorRuleColumns[];
}

interface StreamPosition {
  lastTweetId: string | null;
  /** the last time the holder saw the stream alive (a tweet or a keep-alive) */
  aliveAt: Date | null;
}

export interface StreamRepository {
  /** the active targets, or only those of `keys` (a key without active monitors is left out) */
  targets(keys?: readonly string[]): Promise<StreamTarget[]>;
  /** the targets whose monitors or watchers changed after `since`, and PostgreSQL's time of the read */
  changedSince(since: Date): Promise<{ keys: string[]; at: Date }>;
  /** PostgreSQL's clock now (the change times are on it) */
  clock(): Promise<Date>;
  /** owes the posts of `usernames` after `since`, to be searched from `dueAt` */
  owe(usernames: readonly string[], since: Date, dueAt: Date, reason: string): Promise<void>;
  /** the owed windows due now, oldest `since` first */
  dueOwed(limit: number): Promise<OwedWindow[]>;
  /** a search read these windows */
  paid(ids: readonly bigint[]): Promise<void>;
  /** these windows wait until `dueAt` (a budget refusal: X's reset; a failure: a back-off) */
  postpone(ids: readonly bigint[], dueAt: Date, error: string, failed: boolean): Promise<void>;
  /** owed windows left, and the oldest one's `since` */
  owedSummary(): Promise<{ rows: number; oldest: Date | null }>;
  position(): Promise<StreamPosition>;
  /** moves the position forward only (another holder's later write wins) */
  savePosition(position: StreamPosition): Promise<void>;
  /**
   * the target's account cannot be read (renamed, suspended, unknown): `last_error` on its active
   * monitors and cursor; no poll happened, so nothing else moves (the tick's fallback schedule stays)
   */
  markError(targetKey: string, error: string): Promise<void>;
  /** the target's account can be read again: `last_error` off its active monitors and cursor */
  clearError(targetKey: string): Promise<void>;
}

const NAME = 'x';

export function createStreamRepository(db: Db): StreamRepository {
  return {
    async targets(keys) {
      const only = keys === undefined ? Prisma.empty : Prisma.sql`AND m.target_key = ANY(${[...keys]}::text[])`;
      const rows = await db.$queryRaw<
        {
          target_key: string;
          username: string;
          plans: PlanName[];
          free_trial_ends_at: Date | null;
          oldest: Date;
          monitors: MonitorRuleColumns[];
        }[]
      >`
        SELECT m.target_key, min(m.target_username) AS username,
               array_agg(DISTINCT a.plan::text) AS plans,
               max(a.trial_ends_at) FILTER (WHERE a.plan = 'free') AS free_trial_ends_at,
               min(m.created_at) AS oldest,
               json_agg(json_build_object('excludeTypes', m.exclude_types, 'langs', m.langs)) AS monitors
        FROM monitors m JOIN accounts a ON a.id = m.account_id
        WHERE m.is_active AND m.target_key IS NOT NULL ${only}
        GROUP BY m.target_key`;
      return rows.map((r) => ({
        targetKey: r.target_key,
        username: r.username,
        accounts: r.plans.map((plan) => ({ plan, trialEndsAt: plan === 'free' ? r.free_trial_ends_at : null })),
        oldestMonitorAt: r.oldest,
        monitors: r.monitors,
      }));
    },
    async changedSince(since) {
      const rows = await db.$queryRaw<{ keys: string[]; at: Date }[]>`
        SELECT coalesce(array_agg(target_key), '{}') AS keys, clock_timestamp() AS at
        FROM x_stream_changes WHERE changed_at > ${since}`;
      return { keys: rows[0]?.keys ?? [], at: rows[0]?.at ?? since };
    },
    async clock() {
      const rows = await db.$queryRaw<{ at: Date }[]>`SELECT clock_timestamp() AS at`;
      return rows[0]!.at;
    },
    async owe(usernames, since, dueAt, reason) {
      if (usernames.length === 0) return;
      await db.$executeRaw`
        INSERT INTO x_stream_owed (username, since, due_at, reason)
        SELECT u, ${since}, ${dueAt}, ${reason} FROM unnest(${[...usernames]}::text[]) AS u`;
    },
    async dueOwed(limit) {
      return db.$queryRaw<OwedWindow[]>`
        SELECT id, username, since, reason, due_at AS "dueAt", attempts, created_at AS "createdAt" FROM x_stream_owed
        WHERE due_at <= now() ORDER BY since, id LIMIT ${limit}`;
    },
    async paid(ids) {
      if (ids.length === 0) return;
      await db.$executeRaw`DELETE FROM x_stream_owed WHERE id = ANY(${[...ids]}::bigint[])`;
    },
    async postpone(ids, dueAt, error, failed) {
      if (ids.length === 0) return;
      await db.$executeRaw`
        UPDATE x_stream_owed SET due_at = ${dueAt}, last_error = ${error},
               attempts = attempts + ${failed ? 1 : 0}
        WHERE id = ANY(${[...ids]}::bigint[])`;
    },
    async owedSummary() {
      const rows = await db.$queryRaw<{ rows: bigint; oldest: Date | null }[]>`
        SELECT count(*) AS rows, min(since) AS oldest FROM x_stream_owed`;
      return { rows: Number(rows[0]?.rows ?? 0), oldest: rows[0]?.oldest ?? null };
    },
    async position() {
      const rows = await db.$queryRaw<{ last_tweet_id: string | null; alive_at: Date | null }[]>`
        SELECT last_tweet_id, alive_at FROM x_stream_state WHERE name = ${NAME}`;
      return { lastTweetId: rows[0]?.last_tweet_id ?? null, aliveAt: rows[0]?.alive_at ?? null };
    },
    async savePosition(p) {
      await db.$executeRaw`
        INSERT INTO x_stream_state (name, last_tweet_id, alive_at, updated_at)
        VALUES (${NAME}, ${p.lastTweetId}, ${p.aliveAt}, now())
        ON CONFLICT (name) DO UPDATE SET
          last_tweet_id = CASE WHEN x_stream_state.last_tweet_id IS NULL
                                 OR EXCLUDED.last_tweet_id::numeric > x_stream_state.last_tweet_id::numeric
                               THEN coalesce(EXCLUDED.last_tweet_id, x_stream_state.last_tweet_id)
                               ELSE x_stream_state.last_tweet_id END,
          alive_at = greatest(x_stream_state.alive_at, EXCLUDED.alive_at),
          updated_at = now()`;
    },
    async markError(targetKey, error) {
      // on the target's cursor, which its active monitors show (one row however many watch it)
      await db.pollCursor.upsert({
        where: { targetKey },
        create: { targetKey, lastError: error },
        update: { lastError: error },
      });
    },
    async clearError(targetKey) {
      await db.$transaction([
        db.monitor.updateMany({ where: { targetKey, isActive: true }, data: { lastError: null } }),
        db.pollCursor.updateMany({ where: { targetKey }, data: { lastError: null } }),
      ]);
    },
  };
}
