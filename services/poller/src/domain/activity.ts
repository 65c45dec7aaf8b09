/**
 * The X Activity API's events against this service's model (no I/O): which event types a watched
 * account's monitors want, and what a `profile.update.*` event changes in the last profile seen.
 */
import { XAA_PROFILE_TYPES, type XaaEventType, type XaaProfileType } from '@sts/x-activity';
import type { Profile } from './profiles';

export type ActivityIntakeMode = 'off' | 'profiles' | 'all';

/** what the monitors of one account ask for (their `events`, any of them) */
export interface MonitorWants {
  profile: boolean;
  deletes: boolean;
  posts: boolean;
}

export function wantedTypes(wants: MonitorWants, mode: ActivityIntakeMode): XaaEventType[] {
  if (mode === 'off') return [];
  return [
    ...(wants.profile ? XAA_PROFILE_TYPES : []),
    ...(wants.deletes ? (['post.delete'] as const) : []),
    ...(mode === 'all' && wants.posts ? (['post.create'] as const) : []),
  ];
}

type PatchField = 'description' | 'name' | 'username' | 'profileImageUrl' | 'verified';

const FIELD_OF: Record<XaaProfileType, PatchField> = {
  'profile.update.bio': 'description',
  'profile.update.screenname': 'name',
  'profile.update.handle': 'username',
  'profile.update.profile_picture': 'profileImageUrl',
  'profile.update.verified_badge': 'verified',
};

/** X's `after` of a verified badge: a flag, or the badge's name (none when it was removed) */
function badge(after: unknown): boolean {
  if (typeof after === 'boolean') return after;
  return typeof after === 'string' && after !== '' && after !== 'none' && after !== 'false';
}

/**
 * The profile after the event: the last one seen with the event's field set to `payload.after`
 * (null when the payload has no usable `after`: the event changes nothing we compare).
 */
export function applyProfileEvent(
  last: Profile,
  type: XaaProfileType,
  payload: Record<string, unknown>,
): Profile | null {
  const after = payload.after;
  const field = FIELD_OF[type];
  if (field === 'verified') return { ...last, verified: badge(after) };
  if (typeof after !== 'string') return null;
  if (field === 'username' || field === 'name') return after === '' ? null : { ...last, [field]: after };
  return { ...last, [field]: after === '' ? null : after };
}
