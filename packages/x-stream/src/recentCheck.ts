/**
 * The owed backfill's lookup pre-check (X_BACKFILL_LOOKUP=auto): before a pass spends searches,
 * the usernames domain/streamQuiet.ts picks are looked up 100 a call (`GET /2/users?ids=` by the
 * account id last seen, else `GET /2/users/by?usernames=`; `users` calls of the fleet's governor,
 * at high priority as the backfill's searches) with `most_recent_tweet_id`; the windows of those
 * whose newest post is older than the window are paid without a search, the rest are searched.
 *
 * The answers are the targets' account looks too (the same fields the X account lookup asks):
 * `record()` hands them to the poller's record path (StreamPort `recordLooks`), so a new
 * target's first look is this lookup and a looked-up target's next periodic look is an interval
 * later. A call the budget refuses or that fails costs nothing but its searches: its usernames are
 * searched as without the pre-check.
 *
 * The accounts whose newest post falls in their window (`posted`, with the account id X answered)
 * are known to have posted: when the search budget refuses their search, the backfill reads them
 * through their user timelines instead (accountReads.ts).
 */
import type { Logger } from '@sts/common';
import { errorMessage, chunks } from '@sts/core';
import { answerFor, SourceBusyError, type XAccounts, type XSource } from '@sts/social';
import { lookupCandidates, provesPosted, provesQuiet, type QuietCandidate } from './domain/streamQuiet';
import type { OwedWindow } from './domain/streamOwed';
import type { StreamPort } from './port';

export type BackfillLookupMode = 'auto' | 'off';

export interface RecentCheckOptions {
  lookupAccounts: XSource['lookupAccounts'];
  /** the watched accounts' looks (the poller's) */
  looks: Pick<StreamPort, 'lastLooks' | 'recordLooks'>;
  /** searches the budget has left in its current window */
  searchesLeft: () => Promise<number>;
  logger: Logger;
  /** how long after a window's end its lookup waits (X taking in the posts made before it); default 10 s */
  lagMs?: number;
  /** how long a rule change's lookup may wait for more rule changes; as the backfill's partial searches */
  holdMs: number;
}

/** an account X showed posting in its window: its rows may be paid by reading its timeline */
export interface PostedAccount {
  /** lowercase, as the owed rows */
  username: string;
  userId: string;
  /** the oldest window of the username */
  since: Date;
  ids: bigint[];
}

export interface RecentCheckResult {
  /** rows proved empty: paid without a search */
  quiet: bigint[];
  /** accounts known to have posted in their window */
  posted: PostedAccount[];
  /** rows whose lookup is not due yet: neither paid nor searched this pass */
  waiting: bigint[];
  /** users calls answered */
  calls: number;
  /** records the answers as the targets' account looks (after the pass's searches) */
  record(): Promise<void>;
}

const BATCH = 100;
const DEFAULT_LAG_MS = 10_000;

interface Target {
  targetKey: string;
  userId: string | null;
  candidate: QuietCandidate;
}

const NOTHING: RecentCheckResult = { quiet: [], posted: [], waiting: [], calls: 0, record: () => Promise.resolve() };

export class RecentCheck {
  /** how long after a window's end its lookup waits */
  readonly lagMs: number;

  constructor(private readonly options: RecentCheckOptions) {
    this.lagMs = options.lagMs ?? DEFAULT_LAG_MS;
  }

  /**
   * Looks up what is due of `rows` (usernames' windows) and says which rows are quiet; `searches`:
   * what the pass would search without it; `watched`: a stream target watches the username.
   */
  async check(
    rows: readonly OwedWindow[],
    pass: { searches: number; changesPending: boolean; watched: (username: string) => boolean },
  ): Promise<RecentCheckResult> {
    if (rows.length === 0) return NOTHING;
    const { looks, logger } = this.options;
    const names = [...new Set(rows.map((r) => r.username.toLowerCase()))].filter(pass.watched);
    const looked = await looks.lastLooks(names);
    const budgetShort = pass.searches > 0 && pass.searches > (await this.options.searchesLeft());
    const plan = lookupCandidates(rows, {
      now: new Date(),
      lagMs: this.lagMs,
      budgetShort,
      neverLooked: new Set(names.filter((n) => !looked.has(n))),
      watched: pass.watched,
      changesPending: pass.changesPending,
      holdMs: this.options.holdMs,
    });
    if (plan.check.length === 0) return { ...NOTHING, waiting: plan.waiting };
    const targets = plan.check.map((c) => ({
      targetKey: c.username,
      userId: looked.get(c.username) ?? null,
      candidate: c,
    }));
    const { found, calls } = await this.lookup(targets);
    const quiet = targets.filter((t) => provesQuiet(answerFor(t, found), t.candidate.since));
    const posted = targets.flatMap((t): PostedAccount[] => {
      const answer = answerFor(t, found);
      if (!answer?.user || !provesPosted(answer, t.candidate.since)) return [];
      const { username, since, ids } = t.candidate;
      return [{ username, userId: answer.user.id, since, ids }];
    });
    logger.info('X stream backfill lookup', {
      looked: targets.length,
      firstLooks: targets.filter((t) => !looked.has(t.targetKey)).length,
      waiting: plan.waiting.length,
      quiet: quiet.length,
      posted: posted.length,
      calls,
      budgetShort,
    });
    const answered = targets.filter((t) => answerFor(t, found) !== undefined);
    return {
      quiet: quiet.flatMap((t) => t.candidate.ids),
      posted,
      waiting: plan.waiting,
      calls,
      record: () => looks.recordLooks(answered, found, new Date()),
    };
  }

  /** 100 a call, by id where known; a refused call ends the lookups, a failed one skips its batch */
  private async lookup(targets: readonly Target[]): Promise<{ found: XAccounts; calls: number }> {
    const found: XAccounts = { byId: new Map(), byUsername: new Map() };
    const byId = targets.filter((t) => t.userId !== null);
    const byName = targets.filter((t) => t.userId === null);
    const batches = [...chunks(byId, BATCH), ...chunks(byName, BATCH)];
    let calls = 0;
    for (const batch of batches) {
      try {
        const r = await this.options.lookupAccounts({
          ids: batch.flatMap((t) => (t.userId ? [t.userId] : [])),
          usernames: batch.flatMap((t) => (t.userId ? [] : [t.targetKey])),
          priority: 'high',
          mostRecent: true,
        });
        calls++;
        for (const [k, v] of r.byId) found.byId.set(k, v);
        for (const [k, v] of r.byUsername) found.byUsername.set(k, v);
      } catch (err) {
        this.options.logger.warn('X stream backfill lookup failed: its usernames are searched', {
          usernames: batch.length,
          err: errorMessage(err),
        });
        if (err instanceof SourceBusyError) break;
      }
    }
    return { found, calls };
  }
}
