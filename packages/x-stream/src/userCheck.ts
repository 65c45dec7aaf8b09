/**
 * The stream mode's account check, off the set-up path. Rules and backfills use `from:username`
 * and posts arrive with their author (`includes.users`), so the stream needs no user id; the user
 * lookups only tell a renamed, suspended or missing account, which must show on its monitors as
 * `last_error`.
 *
 * - Authors the stream delivers are saved to the fleet's user cache (Redis, X_USER_CACHE_TTL_SECONDS)
 *   once per sync; the backfill's search does the same with its `includes.users`.
 * - Every `intervalMs` (default 60 s, the first one interval after the holder starts) the holder
 *   resolves its rules' usernames through the cache: only accounts not seen within the cache TTL
 *   are looked up (`GET /2/users/by`, 100 a call, at low governor priority so the stream's own
 *   calls come first). A problem sets `last_error` on the target's monitors; a flagged account
 *   found again clears it (a post recorded clears it too).
 *
 * Latency: a renamed or suspended account that stops posting shows as `last_error` at most one
 * cache TTL (its last sighting ages out) plus one interval later.
 */
import type { Logger } from '@sts/common';
import type { SocialUser, XUserDirectory } from '@sts/social';
import type { StreamRepository } from './repository';
import { errorMessage } from '@sts/core';

export interface UserCheck {
  /** authors the stream delivered (saved at the next flush) */
  seen(authors: readonly SocialUser[]): void;
  /** saves the authors seen since the last flush to the cache */
  flush(): Promise<void>;
  /** starts a background pass over `usernames` when one is due and none is running */
  maybeRun(usernames: readonly string[]): void;
  /** forgets what this holder flagged (another replica may hold the stream next) */
  reset(): void;
  /** waits for the pass in flight */
  stop(): Promise<void>;
}

export interface UserCheckOptions {
  users: Pick<XUserDirectory, 'resolve' | 'rememberMany'>;
  repository: Pick<StreamRepository, 'markError' | 'clearError'>;
  logger: Logger;
  /** default 60 s */
  intervalMs?: number;
}

export function createUserCheck(options: UserCheckOptions): UserCheck {
  const intervalMs = options.intervalMs ?? 60_000;
  let pending = new Map<string, SocialUser>();
  let lastRun: number | null = null;
  let running: Promise<void> | null = null;
  /** targets this holder set `last_error` on */
  const flagged = new Set<string>();

  async function pass(usernames: readonly string[]): Promise<void> {
    const resolved = await options.users.resolve(usernames, 'low');
    let problems = 0;
    for (const [name, r] of resolved) {
      if (r.status !== 'ok') {
        problems++;
        if (flagged.has(name)) continue;
        await options.repository.markError(name, r.message);
        flagged.add(name);
      } else if (flagged.delete(name)) {
        await options.repository.clearError(name);
      }
    }
    if (problems > 0) options.logger.info('X stream accounts that cannot be read', { problems });
  }

  return {
    seen(authors) {
      for (const a of authors) if (a.id !== '' && a.username !== '') pending.set(a.username.toLowerCase(), a);
    },
    async flush() {
      if (pending.size === 0) return;
      const batch = [...pending.values()];
      pending = new Map();
      // a failed save costs a lookup later, nothing else
      await options.users.rememberMany(batch).catch(() => undefined);
    },
    maybeRun(usernames) {
      const now = Date.now();
      lastRun ??= now;
      if (running || now - lastRun < intervalMs || usernames.length === 0) return;
      lastRun = now;
      running = pass(usernames)
        .catch((err: unknown) => {
          options.logger.warn('X stream account check failed (retried next interval)', {
            err: errorMessage(err),
          });
        })
        .finally(() => (running = null));
    },
    reset() {
      flagged.clear();
      lastRun = null;
    },
    async stop() {
      await running;
    },
  };
}
