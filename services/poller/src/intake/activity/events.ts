/**
 * What an X Activity API event does here. `profile.update.*`: the target's last profile seen,
 * with the event's field changed, is recorded like a lookup's answer (ProfileRepository.record:
 * the comparison, `monitor.profile_changed` to the monitors asking for profile events, a rename
 * followed), so an event and a lookup tell a change once between them, and a replayed event
 * (the same change again) tells nothing. A target never looked at has no profile to patch: the
 * lookup's first look records it. Other event types are counted only.
 */
import { isXaaProfileType, type XaaEvent } from '@sts/x-activity';
import type { ProfileRepository } from '../../adapters/profiles';
import { applyProfileEvent } from '../../domain/activity';
import type { AccountState } from '../../domain/profiles';
import type { ActivityRepository } from './repository';

export function createActivityEvents(deps: {
  repository: Pick<ActivityRepository, 'lastProfile'>;
  profiles: Pick<ProfileRepository, 'record'>;
  now: () => Date;
}): (event: XaaEvent, targetKeys: readonly string[]) => Promise<void> {
  return async (event, targetKeys) => {
    const type = event.eventType;
    if (!isXaaProfileType(type)) return;
    for (const targetKey of targetKeys) {
      const last = await deps.repository.lastProfile(targetKey);
      if (!last || last.profile.userId !== event.userId) continue;
      const profile = applyProfileEvent(last.profile, type, event.payload);
      if (!profile) continue;
      // X pushes public accounts' events: the account is readable (a protected one stays so)
      const state: AccountState = last.status === 'protected' ? 'protected' : 'active';
      await deps.profiles.record(targetKey, { profile, state }, deps.now());
    }
  };
}
