/**
 * The targets of the X account lookup: every target of active monitors with the plans watching
 * it, the account id of its last profile (`target_profiles.user_id`: looked up by id, so a rename
 * is followed) and its last look (`checked_at`), with its oldest active monitor's creation, and
 * whether the X Activity API pushes its profile changes (`x_activity_accounts`). One read
 * per lookup round. `lastLooks`: which of some targets were looked at before, with their account id.
 */
import type { PlanName } from '@sts/core';
import type { Db } from '@sts/db';
import type { LookupTarget } from '../domain/schedule';

interface LookupRow {
  target_key: string;
  username: string;
  plans: PlanName[];
  free_trial_ends_at: Date | null;
  user_id: string | null;
  checked_at: Date | null;
  oldest: Date;
  profile_pushed: boolean;
}

export async function lookupTargets(db: Pick<Db, '$queryRaw'>): Promise<LookupTarget[]> {
  const rows = await db.$queryRaw<LookupRow[]>`
    SELECT m.target_key, min(m.target_username) AS username,
           array_agg(DISTINCT a.plan::text) AS plans,
           max(a.trial_ends_at) FILTER (WHERE a.plan = 'free') AS free_trial_ends_at,
           tp.user_id, tp.checked_at, min(m.created_at) AS oldest,
           coalesce('profile.update.bio' = ANY(xa.event_types) AND xa.user_id = tp.user_id, false) AS profile_pushed
    FROM monitors m
    JOIN accounts a ON a.id = m.account_id
    LEFT JOIN target_profiles tp ON tp.target_key = m.target_key
    LEFT JOIN x_activity_accounts xa ON xa.target_key = m.target_key
    WHERE m.is_active AND m.target_key IS NOT NULL
    GROUP BY m.target_key, tp.user_id, tp.checked_at, xa.event_types, xa.user_id`;
  return rows.map((r) => ({
    targetKey: r.target_key,
    username: r.username,
    accounts: r.plans.map((plan) => ({ plan, trialEndsAt: plan === 'free' ? r.free_trial_ends_at : null })),
    lastPolledAt: null,
    userId: r.user_id,
    checkedAt: r.checked_at,
    firstMonitorAt: r.oldest,
    profilePushed: r.profile_pushed,
  }));
}

export async function lastLooks(
  db: Pick<Db, '$queryRaw'>,
  targetKeys: readonly string[],
): Promise<Map<string, string | null>> {
  if (targetKeys.length === 0) return new Map();
  const rows = await db.$queryRaw<{ target_key: string; user_id: string | null }[]>`
    SELECT target_key, user_id FROM target_profiles WHERE target_key = ANY(${[...targetKeys]}::text[])`;
  return new Map(rows.map((r) => [r.target_key, r.user_id]));
}
