/**
 * What an X Activity API event does here. `profile.update.*`: the target's last profile seen,
 * with the event's field changed, is recorded like a lookup's answer (ProfileRepository.record:
 * the comparison, `monitor.profile_changed` to the monitors asking for profile events, a rename
 * followed), so an event and a lookup tell a change once between them, and a replayed event
 * (the same change again) tells nothing. A target never looked at has no profile to patch: the
 * lookup's first look records it. `post.create` (X_INTAKE_ACTIVITY=all): the post is recorded like
 * a streamed one (src/record/posts.ts `recordPosts`: the monitors' rules, hits unique per monitor
 * and post, so a post the filtered stream or a poll also brings is one hit). `post.delete`:
 * `monitor.post_deleted` to the monitors asking for deletions (adapters/postDeletes.ts, once per
 * monitor and post). Other types are counted only.
 */
import { mapXTweet, type SocialTweet } from '@sts/social';
import type { RecordedBatch } from '@sts/x-stream';
import { isXaaProfileType, type XaaEvent } from '@sts/x-activity';
import type { PostDeletes } from '../../adapters/postDeletes';
import type { ProfileRepository } from '../../adapters/profiles';
import { applyProfileEvent } from '../../domain/activity';
import type { AccountState } from '../../domain/profiles';
import type { ActivityRepository } from './repository';

export function createActivityEvents(deps: {
  repository: Pick<ActivityRepository, 'lastProfile'>;
  profiles: Pick<ProfileRepository, 'record'>;
  /** records posts like streamed ones */
  posts: (posts: readonly SocialTweet[]) => Promise<RecordedBatch>;
  deletes: PostDeletes;
  now: () => Date;
}): (event: XaaEvent, targetKeys: readonly string[]) => Promise<void> {
  return async (event, targetKeys) => {
    const type = event.eventType;
    if (type === 'post.create') {
      const users = (event.includes?.users ?? []) as Parameters<typeof mapXTweet>[1];
      const post = mapXTweet(event.payload as unknown as Parameters<typeof mapXTweet>[0], users);
      const recorded = await deps.posts([post]);
      const [failed] = recorded.failed.values();
      if (failed !== undefined) throw new Error(failed);
      return;
    }
    if (type === 'post.delete') {
      const postId = event.payload.id;
      if (typeof postId !== 'string' || postId === '') return;
      for (const targetKey of targetKeys) await deps.deletes.record(targetKey, postId, deps.now());
      return;
    }
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
