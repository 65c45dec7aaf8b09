/**
 * A watched account's profile and health. No I/O.
 *
 * - A profile change is a difference in the fields docs/webhooks.md names (username, display
 *   name, bio, avatar, verified) between the last profile seen and the one read now.
 * - The target's status: `ok`; `suspended` / `protected` (the source says so); `not_found` (no
 *   such account any more); `renamed` (the account, by id, now has another username: the monitor
 *   follows it). The first three are unavailable: their polls back off.
 */
import { PROFILE_FIELDS, type TargetStatus } from '@sts/messaging';
import type { SocialUser } from '@sts/social';

type ProfileField = (typeof PROFILE_FIELDS)[number];

export interface Profile {
  userId: string;
  username: string;
  name: string;
  description: string | null;
  profileImageUrl: string | null;
  verified: boolean;
}

/** the source's account state: the local store's flag, or what X answered */
export type AccountState = 'active' | 'suspended' | 'protected';

/**
 * The account as the source shows it now: its profile and state, or null (no such account). X
 * tells a suspended account without its profile (`profile` null).
 */
export type Sighting = { profile: Profile; state: AccountState } | { profile: null; state: 'suspended' } | null;

/** The compared fields of a source's user record. */
export function profileOf(user: SocialUser): Profile {
  return {
    userId: user.id,
    username: user.username,
    name: user.name,
    description: user.description,
    profileImageUrl: user.profileImageUrl,
    verified: user.verified,
  };
}

/** An unavailable target cannot be read as watched: its polls back off until it is back. */
export function isUnavailable(status: TargetStatus | null | undefined): boolean {
  return status === 'suspended' || status === 'protected' || status === 'not_found';
}

/** Polls of an unavailable target come this many intervals apart, at most an hour (never less than one interval). */
const UNAVAILABLE_BACKOFF_FACTOR = 10;
const UNAVAILABLE_BACKOFF_MAX_SEC = 3600;

export function backedOffInterval(intervalSec: number): number {
  return Math.max(intervalSec, Math.min(intervalSec * UNAVAILABLE_BACKOFF_FACTOR, UNAVAILABLE_BACKOFF_MAX_SEC));
}

/** The fields that differ, in the payload's order. */
function changedFields(before: Profile, after: Profile): ProfileField[] {
  return PROFILE_FIELDS.filter((f) => before[f] !== after[f]);
}

/** What one look at a target tells, against the last profile seen. */
export interface Observation {
  status: TargetStatus;
  /** the account now (null: not found) */
  profile: Profile | null;
  /** the profile fields that changed (none on a first look or when the account is gone) */
  changed: ProfileField[];
  /** the account's new username when it was renamed (the monitor follows it) */
  renamedTo: string | null;
}

/**
 * The target's status and changes, from the last profile seen (null: first look) and the account
 * found now (by the last profile's id when there is one, else by the watched name).
 */
export function observe(targetKey: string, last: Profile | null, now: Sighting): Observation {
  if (!now) return { status: 'not_found', profile: null, changed: [], renamedTo: null };
  if (!now.profile) return { status: now.state, profile: null, changed: [], renamedTo: null };
  const renamed = now.profile.username.toLowerCase() !== targetKey;
  const status: TargetStatus = now.state !== 'active' ? now.state : renamed ? 'renamed' : 'ok';
  const changed = last && last.userId === now.profile.userId ? changedFields(last, now.profile) : [];
  return { status, profile: now.profile, changed, renamedTo: renamed ? now.profile.username : null };
}
