/**
 * The owed backfill's other budget: when the search budget refuses a pass's searches, the
 * accounts the lookup pre-check (recentCheck.ts) showed posting in their window are read one by
 * one through their user timelines (`GET /2/users/:id/tweets` since the window, by the account id
 * X answered; the `timeline` family of the fleet's governor), so a gap with known posters does
 * not wait for the next search window. The reads are low priority: they take what the timeline
 * window has beyond the governor's reserve, which stays with the family's own callers (read-api's
 * timeline reads, Starter polls), so a large gap cannot starve them.
 *
 * Each account's posts are recorded as its read returns, and only then are its rows paid: a window
 * is paid only once its account has been read. An account the read could not finish (a failure, an
 * account X no longer serves, the timeline budget spent) keeps its rows owed, for the next pass's
 * search or timeline read, whichever budget comes back first. The post lookup by id
 * (`GET /2/tweets?ids=`) is not used: the users lookup names only an account's newest post, so
 * reading ids could not prove a window read whole.
 */
import { snowflakeBefore, errorMessage } from '@sts/core';
import type { Logger } from '@sts/common';
import { SourceBusyError, type SocialTweet, type XSource } from '@sts/social';
import type { PostedAccount } from './recentCheck';
import type { StreamRepository } from './repository';

/**
 * how a backfill read ended: `ok` (its posts recorded, its windows paid), `refused` (the budget
 * said no; the windows wait), `failed` (retried later), `unreadable` (an account X no longer
 * serves; its window left to the search)
 */
export type BackfillReadResult = 'ok' | 'refused' | 'failed' | 'unreadable';

export interface AccountReadsOptions {
  readAccountSince: XSource['readAccountSince'];
  repository: Pick<StreamRepository, 'paid'>;
  /** records an account's posts (resolves once they are in the database) */
  record(tweets: SocialTweet[]): Promise<void>;
  logger: Logger;
  /** each read's outcome, for the metrics */
  read?: (result: BackfillReadResult) => void;
  /** timeline reads at once; default 4 */
  concurrency?: number;
}

export interface AccountReadsResult {
  /** the rows paid (their accounts read and recorded) */
  paid: Set<bigint>;
  accounts: number;
  posts: number;
  /** the timeline budget refused a read: the accounts left wait until then */
  refusedUntil: Date | null;
  failed: number;
}

const DEFAULT_CONCURRENCY = 4;

/** reads `accounts` through their timelines, pays each one's rows once its posts are recorded */
export async function readPostedAccounts(
  accounts: readonly PostedAccount[],
  options: AccountReadsOptions,
): Promise<AccountReadsResult> {
  const out: AccountReadsResult = { paid: new Set(), accounts: 0, posts: 0, refusedUntil: null, failed: 0 };
  const queue = [...accounts];
  const worker = async (): Promise<void> => {
    for (let a = queue.shift(); a && out.refusedUntil === null; a = queue.shift()) await readOne(a, options, out);
  };
  const n = Math.max(1, Math.min(options.concurrency ?? DEFAULT_CONCURRENCY, queue.length));
  await Promise.all(Array.from({ length: n }, worker));
  if (out.accounts > 0 || out.refusedUntil)
    options.logger.info('X stream backfill read accounts through their timelines (search budget spent)', {
      accounts: out.accounts,
      posts: out.posts,
      left: accounts.length - out.accounts,
      ...(out.refusedUntil && { timelineBudgetUntil: out.refusedUntil.toISOString() }),
    });
  return out;
}

async function readOne(a: PostedAccount, options: AccountReadsOptions, out: AccountReadsResult): Promise<void> {
  const { logger } = options;
  try {
    const r = await options.readAccountSince(a.userId, { sinceId: snowflakeBefore(a.since), priority: 'low' });
    if (r.unreadable) {
      // X serves the account no more: its window is left to the search (and the account check)
      out.failed++;
      options.read?.('unreadable');
      logger.warn('X stream backfill timeline read: account not readable (left to the search)', {
        username: a.username,
        err: r.unreadable.detail,
      });
      return;
    }
    if (r.truncated)
      logger.warn('X stream backfill read its page limit: the oldest posts of the window were not read', {
        username: a.username,
        since: a.since.toISOString(),
      });
    await options.record(r.tweets);
    await options.repository.paid(a.ids);
    for (const id of a.ids) out.paid.add(id);
    out.accounts++;
    out.posts += r.tweets.length;
    options.read?.('ok');
  } catch (err) {
    if (err instanceof SourceBusyError) {
      options.read?.('refused');
      const until = new Date(Date.now() + Math.max(1000, err.retryAfterMs));
      if (out.refusedUntil === null || until < out.refusedUntil) out.refusedUntil = until;
      return;
    }
    out.failed++;
    options.read?.('failed');
    logger.warn('X stream backfill timeline read failed (left owed)', { username: a.username, err: errorMessage(err) });
  }
}
