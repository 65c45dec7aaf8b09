/**
 * The stream holder's backfill: pays the windows owed in `x_stream_owed` (a gap of the stream, a
 * username new to the rules, the overflow's turn, a search refused or failed) by batched search
 * (domain/streamOwed.ts), oldest window first, one search at a time through the fleet's governor.
 *
 * Each search's posts are recorded as it returns, and only then are its rows deleted, so a
 * failure loses nothing: a budget refusal (the governor, fed by X's `x-rate-limit-*` headers,
 * says no before X would answer 429) postpones this and every later search of the pass to the
 * window's reset; any other failure postpones that search's rows with a back-off. A partial
 * rule-change search (the last query of its group, filled by no gap or retry) waits while more
 * rule changes are coming and up to `holdMs` from its rows' due time, so monitors added in a row
 * share searches.
 *
 * With a lookup pre-check (recentCheck.ts, X_BACKFILL_LOOKUP=auto), the pass first looks up
 * the usernames it picks and pays the windows of those that posted nothing since without a search;
 * the answers are recorded as the targets' account looks once the pass's searches are done. When
 * the search budget refuses, the accounts the lookup showed posting in the refused searches are
 * read through their user timelines instead (accountReads.ts, another budget) and their windows
 * paid; the rest of the refused searches' windows wait for the search budget, and an account the
 * timeline budget refused too waits for whichever budget comes back first. Nothing is skipped.
 */
import { errorMessage, snowflakeBefore } from '@sts/core';
import type { Logger } from '@sts/common';
import { SourceBusyError, type SocialTweet, type XSource } from '@sts/social';
import {
  owedRetryMs,
  planOwedSearches,
  planQueryOwedSearches,
  queryOwedMonitor,
  type OwedSearch,
} from './domain/streamOwed';
import { readPostedAccounts, type BackfillReadResult } from './accountReads';
import type { PostedAccount, RecentCheck } from './recentCheck';
import type { StreamRepository } from './repository';

export interface OwedBackfillOptions {
  repository: Pick<StreamRepository, 'dueOwed' | 'paid' | 'postpone'>;
  searchGroup: XSource['searchGroup'];
  /** records a search's posts (resolves once they are in the database) */
  record(tweets: SocialTweet[]): Promise<void>;
  /** records a query monitor's search (resolves once they are in the database) */
  recordQuery(monitorId: string, tweets: SocialTweet[]): Promise<void>;
  /** the query a query monitor's window is searched with, or null when the stream no longer wants it */
  queryOf(monitorId: string): string | null;
  logger: Logger;
  queryMaxLength: number;
  /** how long a partial rule-change search may wait for company; default 10 s */
  holdMs?: number;
  /** rows read per pass; default 20,000 */
  batch?: number;
  /** a pass running longer is taken as stuck; default 2 minutes */
  stuckMs?: number;
  /** the lookup pre-check (X_BACKFILL_LOOKUP=auto); absent: every window is searched */
  recent?: RecentCheck;
  /** reads an account known to have posted through its user timeline when search has no budget; absent: it waits */
  readAccountSince?: XSource['readAccountSince'];
  /** each read's family and outcome, for the metrics */
  read?: (family: BackfillReadFamily, result: BackfillReadResult) => void;
}

/** the budget a backfill read spends: a batched search, or one account's user timeline */
export type BackfillReadFamily = 'search' | 'timeline';

export interface OwedPass {
  searches: number;
  /** windows (usernames) paid by the lookup pre-check without a search */
  quiet: number;
  /** accounts read through their timelines because the search budget refused */
  timelines: number;
  posts: number;
  /** the budget refused a search: the rest waits until then */
  refusedUntil: Date | null;
  failed: number;
}

export class OwedBackfill {
  private running: Promise<OwedPass> | null = null;
  private notBefore = 0;
  private startedAt = 0;
  /** the lookup answers being recorded as account looks, in order */
  private looks: Promise<void> = Promise.resolve();

  constructor(private readonly options: OwedBackfillOptions) {}

  /**
   * Starts a pass unless one runs or the budget said to wait; `partsOf` as planOwedSearches;
   * `changesPending`: more rule changes are coming (their usernames may fill a partial search)
   */
  maybeRun(partsOf: (username: string) => readonly string[] | null, changesPending = false): void {
    if (Date.now() < this.notBefore) return;
    if (this.running) {
      // a pass stuck on a call that never answers (a hung database connection) must not stop
      // the backfill for good: after `stuckMs` the next pass starts (a row paid twice costs a search)
      if (Date.now() - this.startedAt < (this.options.stuckMs ?? 120_000)) return;
      this.options.logger.warn('X stream backfill pass stuck: starting another', {
        runningMs: Date.now() - this.startedAt,
      });
    }
    this.startedAt = Date.now();
    const pass: Promise<OwedPass> = this.pass(partsOf, changesPending)
      .catch((err: unknown) => {
        this.options.logger.warn('X stream backfill pass failed (retried next sync)', { err: errorMessage(err) });
        return { searches: 0, quiet: 0, timelines: 0, posts: 0, refusedUntil: null, failed: 1 };
      })
      .finally(() => {
        if (this.running === pass) this.running = null;
      });
    this.running = pass;
  }

  /** waits for the pass in flight and the account looks it records */
  async idle(): Promise<void> {
    await this.running;
    await this.looks;
  }

  private async pass(
    partsOf: (username: string) => readonly string[] | null,
    changesPending: boolean,
  ): Promise<OwedPass> {
    const { logger } = this.options;
    const due = await this.dueSearches(partsOf, changesPending);
    const out: OwedPass = { searches: 0, quiet: due.quiet, timelines: 0, posts: 0, refusedUntil: null, failed: 0 };
    if (due.searches.length > 0) await this.searchAll(due.searches, out, due.posted);
    // the account looks do not hold the next pass back (their rows are paid or searched already)
    this.looks = this.looks.then(() =>
      due.record().catch((err: unknown) => {
        logger.warn('X stream backfill lookup answers not recorded as account looks', { err: errorMessage(err) });
      }),
    );
    return out;
  }

  /**
   * The pass's searches: the due rows, less those dropped (no target watches them), those the
   * lookup pre-check paid or keeps waiting, and the partial rule-change searches held back
   */
  private async dueSearches(
    partsOf: (username: string) => readonly string[] | null,
    changesPending: boolean,
  ): Promise<{ searches: OwedSearch[]; quiet: number; posted: PostedAccount[]; record: () => Promise<void> }> {
    const { repository } = this.options;
    const none = { searches: [], quiet: 0, posted: [], record: () => Promise.resolve() };
    const rows = await repository.dueOwed(this.options.batch ?? 20_000);
    if (rows.length === 0) return none;
    const first = this.plan(rows, partsOf);
    await repository.paid(first.dropped);
    let searches = first.searches;
    const holdMs = this.options.holdMs ?? 10_000;
    const now = Date.now();
    const held = (s: OwedSearch) => s.partial && s.rulesOnly && (changesPending || now - s.dueSince.getTime() < holdMs);
    let quiet = 0;
    let posted: PostedAccount[] = [];
    let record = none.record;
    const recent = this.options.recent;
    if (recent) {
      const users = rows.filter((r) => queryOwedMonitor(r.username) === null);
      const pre = await recent.check(users, {
        searches: searches.filter((s) => !held(s)).length,
        changesPending,
        watched: (u) => partsOf(u) !== null,
      });
      await repository.paid(pre.quiet);
      const paid = new Set(pre.quiet);
      const skip = new Set([...pre.quiet, ...pre.waiting]);
      quiet = new Set(users.filter((r) => paid.has(r.id)).map((r) => r.username.toLowerCase())).size;
      record = () => pre.record();
      posted = pre.posted;
      if (skip.size > 0)
        searches = this.plan(
          rows.filter((r) => !skip.has(r.id)),
          partsOf,
        ).searches;
    }
    return { searches: searches.filter((s) => !held(s)), quiet, posted, record };
  }

  /** the searches in order; a budget refusal reads the known posters otherwise and postpones the rest */
  private async searchAll(due: OwedSearch[], out: OwedPass, posted: readonly PostedAccount[]): Promise<void> {
    const { repository, logger } = this.options;
    for (let i = 0; i < due.length; i++) {
      const s = due[i]!;
      try {
        out.posts += await this.search(s);
        out.searches++;
        this.options.read?.('search', 'ok');
      } catch (err) {
        if (err instanceof SourceBusyError) {
          this.options.read?.('search', 'refused');
          await this.refused(due.slice(i), err, out, posted);
          break;
        }
        this.options.read?.('search', 'failed');
        out.failed++;
        await repository.postpone(s.ids, new Date(Date.now() + owedRetryMs(s.attempts)), errorMessage(err), true);
        logger.warn('X stream backfill search failed (retried later)', {
          usernames: s.usernames.length,
          err: errorMessage(err),
        });
      }
    }
    if (out.searches > 0)
      logger.info('X stream backfill', { searches: out.searches, posts: out.posts, left: due.length - out.searches });
  }

  /**
   * The search budget refused `rest`: the accounts of it known to have posted are read through
   * their timelines (their rows paid), the other rows wait for the search budget's reset, and the
   * known posters the timeline budget refused wait for whichever reset comes first
   */
  private async refused(
    rest: OwedSearch[],
    err: SourceBusyError,
    out: OwedPass,
    posted: readonly PostedAccount[],
  ): Promise<void> {
    const { repository, logger, readAccountSince } = this.options;
    const searchUntil = new Date(Date.now() + Math.max(1000, err.retryAfterMs));
    const names = new Set(rest.filter((s) => s.queryKey === undefined).flatMap((s) => s.usernames));
    const readable = readAccountSince ? posted.filter((p) => names.has(p.username)) : [];
    const read =
      readable.length > 0
        ? await readPostedAccounts(readable, {
            readAccountSince: readAccountSince!,
            repository,
            record: (tweets) => this.options.record(tweets),
            logger,
            ...(this.options.read && { read: (result: BackfillReadResult) => this.options.read!('timeline', result) }),
          })
        : null;
    const paid = read?.paid ?? new Set<bigint>();
    out.timelines += read?.accounts ?? 0;
    out.posts += read?.posts ?? 0;
    out.failed += read?.failed ?? 0;
    const unread = new Set(readable.flatMap((p) => p.ids).filter((id) => !paid.has(id)));
    const soonest = read?.refusedUntil && read.refusedUntil < searchUntil ? read.refusedUntil : searchUntil;
    const left = rest.flatMap((x) => x.ids).filter((id) => !paid.has(id));
    const waitSearch = left.filter((id) => !unread.has(id));
    if (waitSearch.length > 0) await repository.postpone(waitSearch, searchUntil, err.message, false);
    if (unread.size > 0) await repository.postpone([...unread], soonest, err.message, false);
    out.refusedUntil = searchUntil;
    // with another budget to read known posters, later windows (a new gap) are still looked at by
    // the next passes: the rows wait by their own due times; without, every search waits
    if (!(readAccountSince && this.options.recent)) this.notBefore = searchUntil.getTime();
    if (left.length > 0)
      logger.info('X stream backfill waits for the search budget', {
        owedSearches: rest.filter((x) => x.ids.some((id) => !paid.has(id))).length,
        until: searchUntil.toISOString(),
        readThroughTimelines: read?.accounts ?? 0,
        ...(unread.size > 0 && { knownPostersUntil: soonest.toISOString() }),
      });
  }

  /** username windows packed into `from:` searches, query monitors' windows one search each */
  private plan(
    rows: Parameters<typeof planOwedSearches>[0],
    partsOf: (username: string) => readonly string[] | null,
  ): { searches: OwedSearch[]; dropped: bigint[] } {
    const isQuery = (key: string) => queryOwedMonitor(key) !== null;
    const users = planOwedSearches(
      rows.filter((r) => !isQuery(r.username)),
      partsOf,
      this.options.queryMaxLength,
    );
    const queries = planQueryOwedSearches(
      rows.filter((r) => isQuery(r.username)),
      (key) => this.options.queryOf(queryOwedMonitor(key)!),
    );
    const searches = [...users.searches, ...queries.searches].sort((a, b) => a.since.getTime() - b.since.getTime());
    return { searches, dropped: [...users.dropped, ...queries.dropped] };
  }

  /** one search: its posts recorded, then its rows paid */
  private async search(s: OwedSearch): Promise<number> {
    const floor = Date.now() - 7 * 86_400_000 + 60_000; // search/recent reaches 7 days back
    const since = new Date(Math.max(s.since.getTime(), floor));
    const r = await this.options.searchGroup(
      { query: s.query, usernames: s.usernames },
      {
        sinceId: snowflakeBefore(since),
        notBefore: since,
        // the owed window already reaches behind the gap
        firstPage: false,
        priority: 'high',
        resolveUsers: false,
      },
    );
    if (r.truncated)
      this.options.logger.warn('X stream backfill read its page limit: the oldest posts of the window were not read', {
        usernames: s.usernames.length,
        since: since.toISOString(),
      });
    const monitorId = s.queryKey === undefined ? null : queryOwedMonitor(s.queryKey);
    await (monitorId === null ? this.options.record(r.tweets) : this.options.recordQuery(monitorId, r.tweets));
    await this.options.repository.paid(s.ids);
    return r.tweets.length;
  }
}
