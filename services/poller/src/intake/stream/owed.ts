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
 */
import { snowflakeBefore } from '@sts/core';
import type { Logger } from '@sts/common';
import { SourceBusyError, type SocialTweet, type XSource } from '@sts/social';
import { owedRetryMs, planOwedSearches, planQueryOwedSearches, type OwedSearch } from '../../domain/streamOwed';
import { queryOwedMonitor } from '../../record/queryRecord';
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
}

export interface OwedPass {
  searches: number;
  posts: number;
  /** the budget refused a search: the rest waits until then */
  refusedUntil: Date | null;
  failed: number;
}

const errorMessage = (err: unknown): string => (err instanceof Error ? err.message : String(err));

export class OwedBackfill {
  private running: Promise<OwedPass> | null = null;
  private notBefore = 0;
  private startedAt = 0;

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
        return { searches: 0, posts: 0, refusedUntil: null, failed: 1 };
      })
      .finally(() => {
        if (this.running === pass) this.running = null;
      });
    this.running = pass;
  }

  /** waits for the pass in flight */
  async idle(): Promise<void> {
    await this.running;
  }

  private async pass(
    partsOf: (username: string) => readonly string[] | null,
    changesPending: boolean,
  ): Promise<OwedPass> {
    const { repository, logger } = this.options;
    const rows = await repository.dueOwed(this.options.batch ?? 20_000);
    const out: OwedPass = { searches: 0, posts: 0, refusedUntil: null, failed: 0 };
    if (rows.length === 0) return out;
    const { searches, dropped } = this.plan(rows, partsOf);
    await repository.paid(dropped);
    const holdMs = this.options.holdMs ?? 10_000;
    const now = Date.now();
    const held = (s: OwedSearch) => s.partial && s.rulesOnly && (changesPending || now - s.dueSince.getTime() < holdMs);
    const due = searches.filter((s) => !held(s));
    for (let i = 0; i < due.length; i++) {
      const s = due[i]!;
      try {
        out.posts += await this.search(s);
        out.searches++;
      } catch (err) {
        if (err instanceof SourceBusyError) {
          const until = new Date(Date.now() + Math.max(1000, err.retryAfterMs));
          await repository.postpone(
            due.slice(i).flatMap((x) => x.ids),
            until,
            err.message,
            false,
          );
          out.refusedUntil = until;
          this.notBefore = until.getTime();
          logger.info('X stream backfill waits for the search budget', {
            owedSearches: due.length - i,
            until: until.toISOString(),
          });
          break;
        }
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
    return out;
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
