/**
 * The stream holder's query monitors (domain/queryRules.ts): one filtered-stream rule per query
 * monitor of a Starter or trial account, kept in step with the monitors (read whole every sync:
 * query monitors have no target key, so no `x_stream_changes` row), and the posts X delivers for
 * those rules (`matching_rules`) recorded for their monitors by the holder itself
 * (the poller's StreamPort `recordQueryPosts`). Windows a query monitor may have missed are owed under its key
 * `?query:<id>` (x_stream_owed) and read by recent search with the query: a rule new to X (from
 * the monitor's creation, at most `lookbackMs` back), a gap of the stream, a post not recorded,
 * and every `overflowIntervalMs` the monitors that have no rule (no room under X_MAX_RULES, a rule
 * longer than X_RULE_MAX_LENGTH, or a rule X refused).
 */
import type { Logger } from '@sts/common';
import { errorMessage } from '@sts/core';
import type { SocialTweet } from '@sts/social';
import type { QueryWatcher } from '@sts/db';
import { isQueryRule, planQueryRules, queryRuleMonitor, wantedQueryRules, type QueryRule } from './domain/queryRules';
import type { StreamRule } from './domain/streamRules';
import { queryOwedKey } from './domain/streamOwed';
import type { RecordedHit, StreamPort, WriteLane } from './port';
import type { StreamRepository } from './repository';
import { XHttpError, type XStreamApi } from './xStreamApi';

export interface StreamQueriesOptions {
  repository: Pick<StreamRepository, 'owe'>;
  port: Pick<StreamPort, 'queryWatchers' | 'recordQueryPosts'>;
  api: Pick<XStreamApi, 'addRules' | 'deleteRules'>;
  logger: Logger;
  limiter: WriteLane;
  ruleMaxLength: number;
  lookbackMs: number;
  overlapMs: number;
  settleMs: number;
  overflowIntervalMs: number;
  /** new hits recorded here */
  recorded(hits: RecordedHit[]): void;
}

/** the rules of a holder, all of them (username and query rules) */
interface RuleState {
  rules: StreamRule[] | null;
}

export class StreamQueries {
  private monitors = new Map<string, QueryWatcher>();
  private signature = '';
  /** monitors whose rule X refused (until their query changes) */
  private readonly refused = new Map<string, string>();
  private overflow: string[] = [];
  private lastOverflowRun = 0;
  private overflowSince: Date | null = null;
  /** streamed posts being recorded here, with when they came: the saved position stays behind them */
  private readonly recording = new Map<number, Date>();
  private seq = 0;

  constructor(private readonly options: StreamQueriesOptions) {}

  /** reads the active query monitors; true when the rules they want changed */
  async refresh(now = new Date()): Promise<boolean> {
    const list = await this.options.port.queryWatchers();
    this.monitors = new Map(list.map((m) => [m.id, m]));
    const { rules, tooLong } = wantedQueryRules(list, now, this.options.ruleMaxLength);
    const signature = JSON.stringify([rules.map((r) => r.tag), tooLong]);
    const changed = signature !== this.signature;
    this.signature = signature;
    return changed;
  }

  /** brings X's query rules to the monitors within `room` rules; `state.rules` follows */
  async sync(state: RuleState, room: number, now = new Date()): Promise<void> {
    const { rules: wanted, tooLong } = wantedQueryRules([...this.monitors.values()], now, this.options.ruleMaxLength);
    const allowed = wanted.filter((r) => this.refused.get(r.monitorId) !== r.tag);
    const plan = planQueryRules((state.rules ?? []).filter(isQueryRule), allowed, room);
    const fresh = plan.add.map((r) => r.monitorId);
    await this.owe(fresh, this.lookbackFor(fresh), new Date(now.getTime() + this.options.settleMs), 'rules');
    const added = await this.add(plan.add);
    state.rules = [...(state.rules ?? []), ...added];
    if (plan.delete.length > 0) {
      await this.options.api.deleteRules(plan.delete);
      const gone = new Set(plan.delete);
      state.rules = state.rules.filter((r) => !gone.has(r.id));
    }
    if (plan.add.length > 0 || plan.delete.length > 0)
      this.options.logger.info('X stream query rules changed', { added: added.length, deleted: plan.delete.length });
    const refusedNow = wanted.filter((r) => this.refused.get(r.monitorId) === r.tag).map((r) => r.monitorId);
    await this.syncOverflow([...plan.overflow, ...tooLong, ...refusedNow], room);
  }

  /** adds the rules in one call; when X refuses the batch, one at a time (a refused one is overflow) */
  private async add(rules: QueryRule[]): Promise<StreamRule[]> {
    if (rules.length === 0) return [];
    try {
      return await this.options.api.addRules(rules.map(({ value, tag }) => ({ value, tag })));
    } catch (err) {
      if (!(err instanceof XHttpError) || err.status !== 400 || rules.length === 1) return this.refuse(rules, err);
    }
    const out: StreamRule[] = [];
    for (const r of rules) out.push(...(await this.add([r])));
    return out;
  }

  private refuse(rules: QueryRule[], err: unknown): StreamRule[] {
    if (!(err instanceof XHttpError) || err.status !== 400) throw err;
    for (const r of rules) this.refused.set(r.monitorId, r.tag);
    this.options.logger.warn('X refused a query monitor rule: the monitor is read by search instead', {
      monitorId: rules[0]!.monitorId,
      err: errorMessage(err),
    });
    return [];
  }

  /** monitors without a rule: owed at once when new, then every overflow interval */
  private async syncOverflow(overflow: string[], room: number): Promise<void> {
    if (overflow.length !== this.overflow.length && overflow.length > 0)
      this.options.logger.warn('X stream query monitors without a rule: read by search instead', {
        monitors: overflow.length,
        roomForQueryRules: room,
      });
    const known = new Set(this.overflow);
    this.overflow = overflow;
    if (overflow.length === 0) return;
    const fresh = overflow.filter((id) => !known.has(id));
    const now = Date.now();
    await this.owe(fresh, this.lookbackFor(fresh), new Date(now), 'overflow');
    if (now - this.lastOverflowRun < this.options.overflowIntervalMs) return;
    const old = overflow.filter((id) => known.has(id));
    await this.owe(old, this.overflowSince ?? this.lookbackFor(old), new Date(now), 'overflow');
    this.lastOverflowRun = now;
    this.overflowSince = new Date(now - this.options.overlapMs);
  }

  private owe(monitorIds: readonly string[], since: Date, dueAt: Date, reason: string): Promise<void> {
    return this.options.repository.owe(monitorIds.map(queryOwedKey), since, dueAt, reason);
  }

  /** the earliest a query monitor new to the stream must be read from */
  private lookbackFor(monitorIds: readonly string[]): Date {
    const floor = Date.now() - this.options.lookbackMs;
    let min = Date.now();
    for (const id of monitorIds)
      min = Math.min(min, Math.max(this.monitors.get(id)?.createdAt.getTime() ?? floor, floor));
    return new Date(min - this.options.overlapMs);
  }

  /** the owed keys of the query rules in force (a gap of the stream is owed for them) */
  ruleKeys(rules: readonly StreamRule[] | null): string[] {
    return (rules ?? []).flatMap((r) => queryRuleMonitor(r) ?? []).map(queryOwedKey);
  }

  /** the query a monitor's owed window is searched with, or null when it is no longer the stream's */
  queryOf = (monitorId: string): string | null => {
    const m = this.monitors.get(monitorId);
    if (!m) return null;
    const { rules } = wantedQueryRules([m], new Date(), Number.MAX_SAFE_INTEGER);
    return rules[0]?.value ?? null;
  };

  /**
   * A streamed post: recorded for the query monitors of its matching rules. True when it also
   * matched a username rule (or X named none): the username recording takes it then.
   */
  onTweet(tweet: SocialTweet, ruleIds: readonly string[], rules: readonly StreamRule[] | null): boolean {
    const byId = new Map((rules ?? []).map((r) => [r.id, r]));
    let other = ruleIds.length === 0;
    for (const id of ruleIds) {
      const rule = byId.get(id);
      const monitorId = rule ? queryRuleMonitor(rule) : null;
      if (monitorId === null) other = true;
      else this.recordStreamed(monitorId, tweet);
    }
    return other;
  }

  private recordStreamed(monitorId: string, tweet: SocialTweet): void {
    const n = ++this.seq;
    this.recording.set(n, new Date());
    void this.record(monitorId, [tweet])
      .catch((err: unknown) => this.lost(monitorId, tweet, err))
      .finally(() => this.recording.delete(n));
  }

  /** when the oldest streamed post still being recorded here came (null: none) */
  oldestRecording(): Date | null {
    // insertion order: the first entry is the oldest
    return this.recording.values().next().value ?? null;
  }

  /** records posts for one query monitor (stream, backfill); rejects when they are not recorded */
  async record(monitorId: string, tweets: SocialTweet[]): Promise<void> {
    const m = this.monitors.get(monitorId);
    if (!m || tweets.length === 0) return;
    const hits = await this.options.limiter.run(() => this.options.port.recordQueryPosts(m, tweets, new Date()));
    this.options.recorded(hits);
  }

  /** owes the window of a post not recorded (resolves once owed, or once that failed and was logged) */
  private lost(monitorId: string, tweet: SocialTweet, err: unknown): Promise<void> {
    this.options.logger.warn('X stream query post not recorded: owed to the backfill', { err: errorMessage(err) });
    const since = new Date(tweet.createdAt.getTime() - this.options.overlapMs);
    return this.owe([monitorId], since, new Date(), 'lost').catch((e: unknown) => {
      this.options.logger.error('X stream query window could not be owed', { monitorId, err: errorMessage(e) });
    });
  }
}
