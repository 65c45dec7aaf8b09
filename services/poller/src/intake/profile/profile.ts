/**
 * The local store's profile push: the users trigger notifies "p <target key>"
 * on the tweets' channel after a watched account's profile or status changed or the account was
 * deleted; this looks at the target at once (src/adapters/profiles.ts tells what changed). Looks
 * coalesce per target: one in flight and at most one follow-up, whatever the notifications. The
 * poller also asks for a look after a poll of a target never looked at, one that is unavailable,
 * or one whose poll failed (a notification lost while the listener reconnected is caught there).
 */
import type { Logger } from '@sts/common';
import { errorMessage } from '@sts/core';
import type { ProfileRepository } from '../../adapters/profiles';

export interface ProfileWatch {
  /** a notification payload of the users trigger ("p <target key>"); false when it is not one */
  notify(payload: string): boolean;
  /** looks at a target (coalesced) */
  look(targetKey: string): void;
  /** waits for the looks in flight */
  stop(): Promise<void>;
  /** nothing running or waiting (tests) */
  idle(): boolean;
}

const NOTIFICATION = /^p (\S{1,100})$/;

export function createProfileWatch(deps: {
  repository: ProfileRepository;
  logger: Logger;
  now: () => Date;
}): ProfileWatch {
  const running = new Map<string, Promise<void>>();
  const again = new Set<string>();
  let stopped = false;

  async function run(key: string): Promise<void> {
    try {
      const seen = await deps.repository.look(key, deps.now());
      if (seen.events > 0 || seen.status !== seen.previousStatus)
        deps.logger.info('target profile or status changed', {
          target: key,
          status: seen.status,
          previousStatus: seen.previousStatus,
          changed: seen.changed,
          events: seen.events,
        });
    } catch (err) {
      deps.logger.warn('profile look failed', { target: key, err: errorMessage(err) });
    }
  }

  function look(key: string): void {
    if (stopped) return;
    if (running.has(key)) return void again.add(key);
    const p = run(key).finally(() => {
      running.delete(key);
      if (again.delete(key)) look(key);
    });
    running.set(key, p);
  }

  return {
    notify(payload) {
      const m = NOTIFICATION.exec(payload);
      if (!m) return false;
      look(m[1]!);
      return true;
    },
    look,
    async stop() {
      stopped = true;
      again.clear();
      while (running.size > 0) await Promise.allSettled([...running.values()]);
    },
    idle: () => running.size === 0,
  };
}
