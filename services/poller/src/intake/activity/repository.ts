/**
 * The X Activity API intake's PostgreSQL reads and writes:
 * - `watched()`: every username target of active monitors whose account id is known (its last
 *   profile, `target_profiles.user_id`: XAA filters by id), whether a paying or trial account
 *   watches it, and what its monitors ask for (`events`);
 * - `savePushed()`: the accounts X pushes events for now (`x_activity_accounts`), replacing the
 *   last round's (the account lookup reads it: a pushed account is looked up for health only);
 * - `lastProfile()`: the target's last profile seen and status (a profile event patches it);
 * - `owe()`: targets whose pushed events may be lost (a gap longer than X replays) are due a look
 *   at the lookup's next round (their `checked_at` set back), which records any change missed;
 * - `recordedTo()` / `saveRecordedTo()`: the stream's last byte whose events are all recorded
 *   (`x_stream_state` row 'x-activity'), so the next holder after a restart or a failover replays
 *   from there instead of X's whole replay window. It only moves forward.
 */
import type { PlanName } from '@sts/core';
import type { Db } from '@sts/db';
import type { WatchedAccount } from '@sts/x-activity';
import { wantedTypes, type ActivityIntakeMode } from '../../domain/activity';
import type { Profile } from '../../domain/profiles';
import { inStream } from '@sts/x-stream';

interface WatchedRow {
  target_key: string;
  user_id: string;
  plans: PlanName[];
  free_trial_ends_at: Date | null;
  profile: boolean;
  deletes: boolean;
  posts: boolean;
}

interface ProfileRow {
  user_id: string | null;
  username: string | null;
  name: string | null;
  description: string | null;
  profile_image_url: string | null;
  verified: boolean | null;
  status: string;
}

export interface ActivityRepository {
  watched(mode: ActivityIntakeMode, now: Date): Promise<WatchedAccount[]>;
  savePushed(accounts: readonly WatchedAccount[]): Promise<void>;
  lastProfile(targetKey: string): Promise<{ profile: Profile; status: string } | null>;
  owe(targetKeys: readonly string[]): Promise<void>;
  recordedTo(): Promise<Date | null>;
  saveRecordedTo(at: Date): Promise<void>;
}

/** the activity stream's row in x_stream_state (the filtered stream's is 'x') */
const STATE_NAME = 'x-activity';

export function createActivityRepository(db: Db): ActivityRepository {
  return {
    async watched(mode, now) {
      const rows = await db.$queryRaw<WatchedRow[]>`
        SELECT m.target_key, tp.user_id,
               array_agg(DISTINCT a.plan::text) AS plans,
               max(a.trial_ends_at) FILTER (WHERE a.plan = 'free') AS free_trial_ends_at,
               bool_or('profile' = ANY(m.events)) AS profile,
               bool_or('deletes' = ANY(m.events)) AS deletes,
               bool_or('posts' = ANY(m.events)) AS posts
        FROM monitors m
        JOIN accounts a ON a.id = m.account_id
        JOIN target_profiles tp ON tp.target_key = m.target_key
        WHERE m.is_active AND m.target_key IS NOT NULL AND tp.user_id IS NOT NULL
        GROUP BY m.target_key, tp.user_id`;
      return rows
        .map((r) => ({
          userId: r.user_id,
          targetKey: r.target_key,
          paying: inStream(
            r.plans.map((plan) => ({ plan, trialEndsAt: plan === 'free' ? r.free_trial_ends_at : null })),
            now,
          ),
          types: wantedTypes(r, mode),
        }))
        .filter((a) => a.types.length > 0);
    },
    async savePushed(accounts) {
      const keys = accounts.map((a) => a.targetKey);
      await db.$transaction([
        db.$executeRaw`DELETE FROM x_activity_accounts WHERE NOT (target_key = ANY(${keys}::text[]))`,
        db.$executeRaw`
          INSERT INTO x_activity_accounts (target_key, user_id, event_types, updated_at)
          SELECT k, u, string_to_array(t, ','), now()
          FROM unnest(${keys}::text[], ${accounts.map((a) => a.userId)}::text[],
                      ${accounts.map((a) => a.types.join(','))}::text[]) AS x(k, u, t)
          ON CONFLICT (target_key) DO UPDATE SET user_id = EXCLUDED.user_id, event_types = EXCLUDED.event_types,
                                                 updated_at = EXCLUDED.updated_at`,
      ]);
    },
    async lastProfile(targetKey) {
      const [r] = await db.$queryRaw<ProfileRow[]>`
        SELECT user_id, username, name, description, profile_image_url, verified, status
        FROM target_profiles WHERE target_key = ${targetKey}`;
      if (!r?.user_id || r.username === null || r.name === null || r.verified === null) return null;
      return {
        profile: {
          userId: r.user_id,
          username: r.username,
          name: r.name,
          description: r.description,
          profileImageUrl: r.profile_image_url,
          verified: r.verified,
        },
        status: r.status,
      };
    },
    async owe(targetKeys) {
      if (targetKeys.length === 0) return;
      await db.$executeRaw`
        UPDATE target_profiles SET checked_at = 'epoch' WHERE target_key = ANY(${[...targetKeys]}::text[])`;
    },
    async recordedTo() {
      const [r] = await db.$queryRaw<{ alive_at: Date | null }[]>`
        SELECT alive_at FROM x_stream_state WHERE name = ${STATE_NAME}`;
      return r?.alive_at ?? null;
    },
    async saveRecordedTo(at) {
      await db.$executeRaw`
        INSERT INTO x_stream_state (name, alive_at, updated_at) VALUES (${STATE_NAME}, ${at}, now())
        ON CONFLICT (name) DO UPDATE
        SET alive_at = GREATEST(x_stream_state.alive_at, EXCLUDED.alive_at), updated_at = now()`;
    },
  };
}
