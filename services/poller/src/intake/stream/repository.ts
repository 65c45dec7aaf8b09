/**
 * The `stream` mode's PostgreSQL side: the active targets with the plans watching them (which
 * ones the stream covers) and the stream's shared position (`x_stream_state`). Hits are recorded
 * through the poller's repository (recordBatch), not here.
 */
import type { Db } from '@sts/db';
import type { PlanName } from '@sts/core';
import type { MonitorRuleColumns } from '@sts/social';
import type { WatchingAccount } from '../../domain/schedule';
import { writeLastError } from '../../adapters/repository';

export interface StreamTarget {
  targetKey: string;
  username: string;
  accounts: WatchingAccount[];
  /** creation of the target's oldest active monitor: nothing older can be a hit */
  oldestMonitorAt: Date;
  /** the rule columns of its active monitors: the parts its stream rule may carry (issue 22) */
  monitors: MonitorRuleColumns[];
}

interface StreamPosition {
  lastTweetId: string | null;
  /** the last time the holder saw the stream alive (a tweet or a keep-alive) */
  aliveAt: Date | null;
}

export interface StreamRepository {
  targets(): Promise<StreamTarget[]>;
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
    async targets() {
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
        WHERE m.is_active
        GROUP BY m.target_key`;
      return rows.map((r) => ({
        targetKey: r.target_key,
        username: r.username,
        accounts: r.plans.map((plan) => ({ plan, trialEndsAt: plan === 'free' ? r.free_trial_ends_at : null })),
        oldestMonitorAt: r.oldest,
        monitors: r.monitors,
      }));
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
      await db.$transaction((tx) => writeLastError(tx, targetKey, error));
    },
    async clearError(targetKey) {
      await db.$transaction([
        db.monitor.updateMany({ where: { targetKey, isActive: true }, data: { lastError: null } }),
        db.pollCursor.updateMany({ where: { targetKey }, data: { lastError: null } }),
      ]);
    },
  };
}
