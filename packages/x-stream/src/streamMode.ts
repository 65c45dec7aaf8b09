/**
 * X_MONITOR_MODE=stream: one replica (the lease holder, election.ts) keeps X's
 * filtered-stream rules in step with the targets that have a Starter or trial watcher, holds the
 * single stream connection (connection.ts) and hands what it delivers to RabbitMQ
 * (handoff.ts), from where every replica records it (recording.ts). Every `syncMs` (2 s) each replica checks the lease; the holder then
 * reads the targets changed since its last look (targets.ts), applies the rule changes
 * (domain/streamRules.ts) once changes have been quiet for `coalesceMs`, pays owed
 * backfill windows (owed.ts) and saves the stream's position (`x_stream_state`).
 *
 * Nothing is lost across a gap, and every window searched is one that nothing else covers:
 * - a connection that comes up (start, reconnect, failover) owes every rule username's window
 *   from where the stream was last seen alive (minus `overlapMs`), or asks X to replay it
 *   (`backfill_minutes`, when `backfillMinutes` allows and the gap is short enough);
 * - a username new to the rules is owed from its monitors' creation (at most `lookbackMs` back),
 *   due `ruleSettleMs` after the change (X: rules take effect within ~20 s); usernames moved
 *   between rules are not (the new rule is added before the old one is deleted);
 * - overflow targets (beyond X_MAX_RULES) are owed every `overflowIntervalMs`;
 * - a post that could not be handed off or recorded is owed from its time.
 * Owed windows live in PostgreSQL (`x_stream_owed`) and survive the holder; the saved position
 * moves only once the current connection's gap is owed, so it never passes an unowed gap. Hits
 * are unique per monitor and tweet, so the stream and a backfill bringing one tweet make one hit.
 *
 * No user lookup on the way to the stream: rules and backfills use `from:username`, posts carry
 * their author. Renamed and suspended accounts are found by the background check
 * (userCheck.ts). The backfill may look usernames up before searching them
 * (X_BACKFILL_LOOKUP=auto, recentCheck.ts): a new target's rule-change window always (that
 * lookup is its first account look, which the X account lookup then leaves to it:
 * `leavesFirstLook`), other windows when their searches do not fit the search budget left;
 * when the search budget refuses, the accounts that lookup showed posting are read through
 * their user timelines (another budget) instead of waiting for the search window.
 */
import { errorMessage } from '@sts/core';
import type { Logger } from '@sts/common';
import type { AmqpClient } from '@sts/messaging';
import { upstreamRuleParts, type SocialTweet, type XSource } from '@sts/social';
import { inStream, parseRule, planRules, wantedRules, type StreamRule } from './domain/streamRules';
import type { WatchingAccount } from '@sts/db';
import { isQueryRule } from './domain/queryRules';
import type { DropKind } from './domain/streamBackoff';
import { runStreamConnection } from './connection';
import type { StreamElection } from './election';
import { StreamHandoff } from './handoff';
import { OwedBackfill, type BackfillReadFamily } from './owed';
import type { BackfillReadResult } from './accountReads';
import type { RecentCheck } from './recentCheck';
import { StreamQueries } from './queries';
import { Limiter } from './limiter';
import type { StreamPort } from './port';
import { StreamRecording } from './recording';
import type { StreamRepository } from './repository';
import { StreamTargets } from './targets';
import type { UserCheck } from './userCheck';
import type { XStreamApi } from './xStreamApi';

export interface StreamMetrics {
  connected(value: 0 | 1): void;
  reconnect(reason: DropKind | 'stall' | 'budget'): void;
  backfilled(posts: number): void;
  hits(count: number): void;
  /** new hits: detection latency (tweet created → hit recorded) */
  detected(hits: readonly { tweetCreatedAt: Date; detectedAt: Date }[]): void;
  rules(count: number, overflowTargets: number): void;
  /** owed backfill windows and the age of the oldest (seconds) */
  owed(rows: number, oldestAgeSeconds: number): void;
  /** one read of the owed backfill: a batched search or an account's timeline, and how it ended */
  backfillRead(family: BackfillReadFamily, result: BackfillReadResult): void;
}

export interface StreamModeOptions {
  repository: StreamRepository;
  /** the poller's side: its recording and query monitors */
  port: StreamPort;
  election: StreamElection;
  api: XStreamApi;
  searchGroup: XSource['searchGroup'];
  /** the accounts' background check (renamed, suspended → last_error), off the set-up path */
  userCheck?: UserCheck;
  /** the backfill's lookup pre-check (X_BACKFILL_LOOKUP=auto); absent: every owed window is searched */
  recent?: RecentCheck;
  /** with `recent`: reads an account known to have posted by its timeline when search has no budget */
  readAccountSince?: XSource['readAccountSince'];
  logger: Logger;
  metrics?: StreamMetrics;
  /** X_RULE_MAX_LENGTH, X_MAX_RULES, X_QUERY_MAX_LENGTH */
  ruleMaxLength: number;
  maxRules: number;
  queryMaxLength: number;
  /** POLL_OVERLAP_SECONDS: how far behind a gap's start the backfill re-reads */
  overlapMs: number;
  /** X_RULE_SETTLE_SECONDS: wait after a rule change before backfilling its usernames */
  ruleSettleMs: number;
  /** X_RULE_COALESCE_SECONDS: changes within this window make one rule change */
  coalesceMs: number;
  /** X_STREAM_BACKFILL_MINUTES: X's replay of a short disconnect (0: search only) */
  backfillMinutes: number;
  /** how far back a username new to the rules is backfilled at most (Free interval + overlap) */
  lookbackMs: number;
  /** the Starter plan interval: overflow targets are polled by search this often */
  overflowIntervalMs: number;
  /** default 2 s */
  syncMs?: number;
  /**
   * no byte this long is a stall; default 30 s: X sends a keep-alive every 20 s, and a timeout
   * of exactly 20 s races it (each lost race a reconnect and a gap to backfill)
   */
  stallMs?: number;
  /** RabbitMQ: posts go to the replicas' recording (handoff.ts); null: the holder records them */
  amqp?: AmqpClient | null;
  /** the record queues (recording.ts) and the holder's bound on posts waiting to be handed off */
  recordQueues?: RecordQueueOptions;
}

export interface RecordQueueOptions {
  /** queues (partitions); default 8 */
  partitions?: number;
  /** posts waiting per queue at most; default 2,500 */
  maxLength?: number;
  /** queue names `<prefix>.<k>`; default `poller.stream.record` */
  prefix?: string;
  rebalanceMs?: number;
  /** false: this replica does not record (tests: a holder whose queues fill up) */
  consume?: boolean;
  /** how long a post refused by a full queue is offered again before it is owed; default 30 s */
  retryMs?: number;
  /** posts the holder keeps waiting at most; default 20,000 */
  maxWaiting?: number;
}

export interface StreamMode {
  start(): void;
  stop(): Promise<void>;
  /** one election check + rules sync (what the timer runs; tests call it) */
  sync(): Promise<void>;
  isHolder(): boolean;
  /** a stream was alive in the fleet lately (the holder's saved position): the tick leaves streamed targets */
  covers(): boolean;
  /** resolves when every tweet received so far is handed off (or recorded, without RabbitMQ) */
  drain(): Promise<void>;
  /**
   * the X account lookup leaves a never-looked-at target's first look to the holder's backfill: a
   * lookup pre-check is on, a stream is alive, the stream carries the target and its first monitor
   * is younger than the time the rules and their backfill take (`firstLookMs`)
   */
  leavesFirstLook(target: { accounts: WatchingAccount[]; firstMonitorAt: Date }, now: Date): boolean;
}

const DEFAULT_STALL_MS = 30_000;
/** how often each replica checks the lease (and the holder syncs rules and owed windows) */
export const DEFAULT_SYNC_MS = 2000;

/** how long a partial rule-change search (or lookup) may wait for more rule changes */
export function backfillHoldMs(coalesceMs: number, syncMs: number): number {
  return Math.max(2 * coalesceMs, 2 * syncMs);
}

/** tweet ids remembered for the backfills' overlap (5/s for an hour is 18,000) */
const RECENT_IDS = 50_000;

interface HolderState {
  rules: StreamRule[] | null;
  abort: AbortController;
  connection: Promise<void>;
  connected: boolean;
  /** the current connection's gap is owed (or replayed by X): the position may move */
  gapOwed: boolean;
  /** where the stream was last seen alive when the current connection came up */
  gapFrom: Date | null;
  overflow: string[];
  overflowSince: Date | null;
  lastOverflowRun: number;
}

class StreamModeRunner implements StreamMode {
  private holder: HolderState | null = null;
  private timer: NodeJS.Timeout | undefined;
  private watchdog: NodeJS.Timeout | undefined;
  private running = false;
  private current: Promise<void> = Promise.resolve();
  private readonly recent = new Set<string>();
  private covering = false;
  private lastTweetId: string | null = null;
  private aliveAt: Date | null = null;
  private readonly targets: StreamTargets;
  /** the first target change the rules have not followed yet (ms), or null */
  private unappliedSince: number | null = null;
  /** the latest target change seen (ms) */
  private lastChangeAt = 0;
  /** authors of posts not handed off, with the oldest post's time: owed at the next sync */
  private lostSince = new Map<string, Date>();
  private readonly handoff: StreamHandoff;
  /** the holder's own recording (backfills, posts without RabbitMQ): transactions at a time */
  private readonly limiter = new Limiter(4);
  private readonly recording: StreamRecording | null;
  private readonly owed: OwedBackfill;
  /** query monitors' rules and posts (queries.ts) */
  private readonly queries: StreamQueries;
  private readonly logger: Logger;

  constructor(private readonly options: StreamModeOptions) {
    this.logger = options.logger;
    this.targets = new StreamTargets(options.repository);
    const q = options.recordQueues ?? {};
    const partitions = q.partitions ?? 8;
    this.handoff = new StreamHandoff({
      amqp: options.amqp ?? null,
      partitions,
      ...(q.maxWaiting !== undefined && { maxWaiting: q.maxWaiting }),
      ...(q.retryMs !== undefined && { retryMs: q.retryMs }),
      recordHere: (tweets) => this.recordHere(tweets),
      handedOff: (t, recorded) => this.handedOff(t, recorded),
      lost: (tweets, why) => this.lost(tweets, why),
      logger: this.logger,
    });
    this.recording =
      options.amqp && q.consume !== false
        ? new StreamRecording({
            amqp: options.amqp,
            port: options.port,
            ping: () => options.repository.position(),
            owe: (target, since) => options.repository.owe([target], since, new Date(), 'lost'),
            logger: this.logger,
            partitions,
            queuePrefix: q.prefix ?? 'poller.stream.record',
            maxLength: q.maxLength ?? 2500,
            ...(q.rebalanceMs !== undefined && { rebalanceMs: q.rebalanceMs }),
            overlapMs: options.overlapMs,
            recorded: (r) => this.counted(r),
          })
        : null;
    this.queries = new StreamQueries({
      repository: options.repository,
      port: options.port,
      api: options.api,
      logger: this.logger,
      limiter: this.limiter,
      ruleMaxLength: options.ruleMaxLength,
      lookbackMs: options.lookbackMs,
      overlapMs: options.overlapMs,
      settleMs: options.ruleSettleMs,
      overflowIntervalMs: options.overflowIntervalMs,
      recorded: (hits) => this.counted({ hits: hits.length, newHits: hits }),
    });
    this.owed = new OwedBackfill({
      repository: options.repository,
      searchGroup: options.searchGroup,
      record: (tweets) => this.record(tweets),
      recordQuery: (monitorId, tweets) => this.queries.record(monitorId, tweets),
      queryOf: this.queries.queryOf,
      logger: this.logger,
      queryMaxLength: options.queryMaxLength,
      holdMs: this.holdMs,
      ...(options.recent && { recent: options.recent }),
      ...(options.readAccountSince && { readAccountSince: options.readAccountSince }),
      read: (family, result) => this.metrics?.backfillRead(family, result),
    });
  }

  private get holdMs(): number {
    return backfillHoldMs(this.options.coalesceMs, this.options.syncMs ?? DEFAULT_SYNC_MS);
  }

  leavesFirstLook(target: { accounts: WatchingAccount[]; firstMonitorAt: Date }, now: Date): boolean {
    const { recent, coalesceMs, ruleSettleMs } = this.options;
    if (!recent || !this.covers() || !inStream(target.accounts, now)) return false;
    // the rules follow within 4 coalescing windows, the window is due a settle later, its lookup
    // a lag and a hold after that; two minutes more for the pass and the recording of its looks
    // (then the lookup round looks)
    const firstLookMs = 4 * coalesceMs + ruleSettleMs + recent.lagMs + this.holdMs + 120_000;
    return now.getTime() - target.firstMonitorAt.getTime() < firstLookMs;
  }

  private get metrics(): StreamMetrics | undefined {
    return this.options.metrics;
  }

  private counted(r: { hits: number; newHits: { tweetCreatedAt: Date; detectedAt: Date }[] }): void {
    if (r.hits > 0) this.metrics?.hits(r.hits);
    // mode `stream` covers the backfills too: what the mode adds to a post's latency
    if (r.newHits.length > 0) this.metrics?.detected(r.newHits);
  }

  /** a search's posts; rejects when one of them may not count as recorded (the window stays owed) */
  private async record(tweets: SocialTweet[]): Promise<void> {
    // a backfill re-reads its overlap window: what this holder recorded already is left out
    const fresh = tweets.filter((t) => !this.recent.has(t.id));
    const r = await this.options.port.recordPosts(fresh, this.limiter);
    this.counted(r);
    this.metrics?.backfilled(fresh.length);
    if (r.failed.size > 0) throw new Error(`recording failed: ${[...r.failed.values()][0]}`);
    for (const t of fresh) this.handedOff(t, true);
  }

  /** streamed posts this holder records itself (no RabbitMQ): resolves with those not recorded */
  private async recordHere(tweets: SocialTweet[]): Promise<SocialTweet[]> {
    const r = await this.options.port.recordPosts(tweets, this.limiter);
    this.counted(r);
    return tweets.filter((t) => r.failed.has(t.author.username.toLowerCase()));
  }

  /**
   * A post handed off (the broker has it) or recorded here. Only a recorded one is left out of
   * a backfill's overlap: a handed-off one may yet be owed by the replica that fails to record it.
   */
  private handedOff(t: SocialTweet, recorded: boolean): void {
    this.options.userCheck?.seen([t.author]);
    if (recorded) this.remember(t.id);
    if (this.lastTweetId === null || BigInt(t.id) > BigInt(this.lastTweetId)) this.lastTweetId = t.id;
  }

  private lost(tweets: readonly SocialTweet[], why: string): void {
    this.logger.warn('X stream posts not recorded: owed to the backfill', { posts: tweets.length, why });
    for (const t of tweets) {
      const u = t.author.username.toLowerCase();
      if (u === '') continue;
      const at = new Date(t.createdAt.getTime() - this.options.overlapMs);
      const was = this.lostSince.get(u);
      if (!was || at < was) this.lostSince.set(u, at);
    }
  }

  /** the ids recorded lately (bounded): a backfill's overlap is not recorded twice */
  private remember(id: string): void {
    this.recent.add(id);
    if (this.recent.size > RECENT_IDS) {
      const oldest = this.recent.values().next().value;
      if (oldest !== undefined) this.recent.delete(oldest);
    }
  }

  /** the earliest a username new to the stream must be read from */
  private lookbackFor(names: readonly string[]): Date {
    const floor = Date.now() - this.options.lookbackMs;
    let min = Date.now();
    for (const n of names) {
      const created = this.targets.get(n)?.oldestMonitorAt.getTime() ?? floor;
      min = Math.min(min, Math.max(created, floor));
    }
    return new Date(min - this.options.overlapMs);
  }

  /** the parts a username's backfill search may carry, or null when no stream target watches it */
  private readonly partsOf = (username: string): readonly string[] | null => {
    const t = this.targets.get(username);
    return t ? upstreamRuleParts(t.monitors) : null;
  };

  private newHolder(): HolderState {
    return {
      rules: null,
      abort: new AbortController(),
      connection: Promise.resolve(),
      connected: false,
      gapOwed: false,
      gapFrom: null,
      overflow: [],
      overflowSince: null,
      lastOverflowRun: 0,
    };
  }

  /** X's replay for the gap since the stream was last seen alive, when it is short enough */
  private replayMinutes(): number {
    if (this.options.backfillMinutes <= 0 || this.aliveAt === null) return 0;
    const gapMs = Date.now() - this.aliveAt.getTime() + this.options.overlapMs;
    const minutes = Math.max(1, Math.ceil(gapMs / 60_000));
    return minutes <= this.options.backfillMinutes ? minutes : 0;
  }

  private connect(state: HolderState): void {
    state.connection = runStreamConnection(
      {
        api: this.options.api,
        logger: this.logger,
        stallMs: this.options.stallMs ?? DEFAULT_STALL_MS,
        backfillMinutes: () => this.replayMinutes(),
        onTweet: (t, ruleIds) => {
          if (this.queries.onTweet(t, ruleIds, state.rules)) this.handoff.push(t);
          else this.handedOff(t, false);
        },
        onActivity: () => (this.aliveAt = new Date()),
        onConnected: (replayMinutes) => {
          state.connected = true;
          state.gapFrom = this.aliveAt;
          // a connection that comes up is the stream alive (the first keep-alive is 20 s away):
          // the position saved from now on tells the other replicas a stream covers them
          this.aliveAt = new Date();
          // X replays the gap in the stream itself: nothing to owe
          state.gapOwed = replayMinutes > 0;
          this.metrics?.connected(1);
          this.logger.info('X stream connected', replayMinutes > 0 ? { replayMinutes } : {});
          if (!state.gapOwed) void this.oweGap(state);
        },
        onDropped: (kind) => {
          state.connected = false;
          state.gapOwed = false;
          this.metrics?.connected(0);
          this.metrics?.reconnect(kind);
        },
      },
      state.abort.signal,
    );
  }

  /** owes every rule username's window from where the stream was last seen alive (once per connection) */
  private async oweGap(state: HolderState): Promise<void> {
    if (state.gapOwed || !state.connected) return;
    try {
      const saved = await this.options.repository.position();
      const alive = [saved.aliveAt, state.gapFrom].filter((d): d is Date => d !== null);
      state.rules ??= await this.options.api.listRules();
      const names = [...ruleUsernames(state), ...this.queries.ruleKeys(state.rules)];
      // never seen alive (a first start): the rules' own backfill covers their usernames
      if (alive.length > 0 && names.length > 0) {
        const since = new Date(Math.max(...alive.map((d) => d.getTime())) - this.options.overlapMs);
        await this.options.repository.owe(names, since, new Date(), 'gap');
        this.logger.info('X stream gap owed to the backfill', { usernames: names.length, since: since.toISOString() });
      }
      if (state.connected) state.gapOwed = true;
    } catch (err) {
      // retried at the next sync; the position does not move meanwhile
      this.logger.warn('X stream gap could not be owed yet', { err: errorMessage(err) });
    }
  }

  private async giveUp(): Promise<void> {
    const state = this.holder;
    this.holder = null;
    if (!state) return;
    state.abort.abort();
    await state.connection;
    this.targets.reset();
    this.unappliedSince = null;
    this.options.userCheck?.reset();
    this.metrics?.connected(0);
    this.logger.info('this replica no longer holds the X stream');
  }

  private async syncRules(state: HolderState): Promise<void> {
    const { api, repository, settleMs } = { ...this.options, settleMs: this.options.ruleSettleMs };
    const now = new Date();
    const wanted = wantedRules(this.targets.all(), now);
    state.rules ??= await api.listRules();
    // query rules in force keep their room; username rules take the rest (queries.ts)
    const queryRules = state.rules.filter(isQueryRule).length;
    const userRules = state.rules.filter((r) => !isQueryRule(r));
    const plan = planRules(userRules, wanted, this.options.ruleMaxLength, this.options.maxRules - queryRules);
    const before = new Set(ruleUsernames(state));
    const added = plan.add.flatMap((r) => parseRule(r) ?? []);
    const fresh = added.filter((u) => !before.has(u));
    // the new usernames are owed before their rules exist: a failure below costs a search, never a post
    const due = new Date(now.getTime() + settleMs);
    await repository.owe(fresh, this.lookbackFor(fresh), due, 'rules');
    // add before delete (a moved username stays covered) unless that would pass X's rule cap
    const addFirst = state.rules.length + plan.add.length <= this.options.maxRules;
    if (!addFirst && plan.delete.length > 0) {
      const moved = added.filter((u) => before.has(u));
      await repository.owe(moved, new Date(now.getTime() - this.options.overlapMs), due, 'rules');
      await this.deleteRules(state, plan.delete);
    }
    if (plan.add.length > 0) state.rules = [...state.rules, ...(await api.addRules(plan.add))];
    if (addFirst) await this.deleteRules(state, plan.delete);
    if (plan.add.length > 0 || plan.delete.length > 0)
      this.logger.info('X stream rules changed', {
        added: plan.add.length,
        deleted: plan.delete.length,
        newUsernames: fresh.length,
        rules: state.rules.length,
      });
    state.overflow = await this.syncOverflow(state, plan.overflow);
    const usernameRules = state.rules.filter((r) => !isQueryRule(r)).length;
    await this.queries.sync(state, this.options.maxRules - usernameRules);
    this.metrics?.rules(state.rules.length, plan.overflow.length);
  }

  private async deleteRules(state: HolderState, ids: string[]): Promise<void> {
    if (ids.length === 0 || !state.rules) return;
    await this.options.api.deleteRules(ids);
    const gone = new Set(ids);
    state.rules = state.rules.filter((r) => !gone.has(r.id));
  }

  /** targets beyond X_MAX_RULES: owed to the backfill every Starter interval (new ones at once) */
  private async syncOverflow(state: HolderState, overflow: string[]): Promise<string[]> {
    if (overflow.length !== state.overflow.length)
      this.logger.warn('X stream rules full: targets polled by search instead', {
        overflowTargets: overflow.length,
        maxRules: this.options.maxRules,
      });
    if (overflow.length === 0) return overflow;
    const known = new Set(state.overflow);
    const fresh = overflow.filter((u) => !known.has(u));
    const now = Date.now();
    if (fresh.length > 0) await this.options.repository.owe(fresh, this.lookbackFor(fresh), new Date(now), 'overflow');
    if (now - state.lastOverflowRun >= this.options.overflowIntervalMs) {
      const old = overflow.filter((u) => known.has(u));
      await this.options.repository.owe(old, state.overflowSince ?? this.lookbackFor(old), new Date(now), 'overflow');
      state.lastOverflowRun = now;
      state.overflowSince = new Date(now - this.options.overlapMs);
    }
    return overflow;
  }

  /** owes what could not be handed off; false when that failed (the position must not move) */
  private async oweLost(): Promise<boolean> {
    if (this.lostSince.size === 0) return true;
    const lost = this.lostSince;
    this.lostSince = new Map();
    try {
      const bySince = new Map<number, string[]>();
      for (const [u, at] of lost) bySince.set(at.getTime(), [...(bySince.get(at.getTime()) ?? []), u]);
      for (const [at, names] of bySince) await this.options.repository.owe(names, new Date(at), new Date(), 'lost');
      return true;
    } catch (err) {
      for (const [u, at] of lost) if (!this.lostSince.has(u)) this.lostSince.set(u, at);
      this.logger.warn('X stream lost posts could not be owed yet', { err: errorMessage(err) });
      return false;
    }
  }

  /**
   * The rules follow the targets once changes have been quiet for `coalesceMs`, or the first
   * unapplied one is four times that old (a steady trickle of changes is applied in batches).
   */
  private async followTargets(state: HolderState): Promise<void> {
    const now = Date.now();
    const targetsChanged = await this.targets.refresh();
    if ((await this.queries.refresh()) || targetsChanged) {
      this.unappliedSince ??= now;
      this.lastChangeAt = now;
    }
    const { coalesceMs } = this.options;
    const quiet = now - this.lastChangeAt >= coalesceMs;
    const due = this.unappliedSince !== null && (quiet || now - this.unappliedSince >= 4 * coalesceMs);
    if (state.rules !== null && !due) return;
    try {
      this.unappliedSince = null;
      await this.syncRules(state);
    } catch (err) {
      // X's view of the rules is unknown after a failed call: list them again next time
      state.rules = null;
      this.unappliedSince ??= 0;
      this.logger.warn('X stream rules sync failed', { err: errorMessage(err) });
    }
  }

  async sync(): Promise<void> {
    await this.readCoverage();
    const holds = await this.options.election.check();
    if (!holds) return this.giveUp();
    const becoming = !this.holder;
    if (!this.holder) {
      this.logger.info('this replica holds the X stream');
      this.holder = this.newHolder();
    }
    const state = this.holder;
    await this.followTargets(state);
    // the rules first, then the connection: its gap is owed over every rule's usernames
    if (becoming) this.connect(state);
    if (state.connected && !state.gapOwed) await this.oweGap(state);
    const lostOwed = await this.oweLost();
    if (state.connected && state.gapOwed && lostOwed && this.aliveAt) {
      // never past a post not handed off or recorded yet (were this holder to die, the next one's gap covers it)
      let aliveAt = this.aliveAt;
      for (const waiting of [this.handoff.oldestWaiting(), this.queries.oldestRecording()])
        if (waiting && waiting < aliveAt) aliveAt = waiting;
      await this.options.repository.savePosition({ lastTweetId: this.lastTweetId, aliveAt });
    }
    await this.options.userCheck?.flush();
    if (!state.connected) return;
    // searches only while connected: a window read before the connection is up would leave a gap
    this.owed.maybeRun(this.partsOf, this.unappliedSince !== null);
    // in the background, at low priority: never part of a connection's set-up
    this.options.userCheck?.maybeRun([...ruleUsernames(state), ...state.overflow]);
    if (this.metrics) {
      const s = await this.options.repository.owedSummary();
      this.metrics.owed(s.rows, s.oldest ? Math.max(0, (Date.now() - s.oldest.getTime()) / 1000) : 0);
    }
  }

  private tick(): void {
    this.current = this.sync()
      .catch((err: unknown) => void this.logger.error('X stream sync failed', { err: errorMessage(err) }))
      .finally(() => this.schedule());
  }

  private schedule(): void {
    if (!this.running) return;
    this.timer = setTimeout(() => this.tick(), this.options.syncMs ?? DEFAULT_SYNC_MS);
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    // a holder whose lease ran out unrenewed (PostgreSQL unreachable, a hung sync) drops the
    // stream before another replica may take it
    this.recording
      ?.start()
      .catch((err: unknown) => this.logger.error('X stream recording did not start', { err: errorMessage(err) }));
    this.watchdog = setInterval(() => {
      if (this.holder && !this.options.election.holds()) {
        this.logger.warn('X stream lease not renewed in time: giving the stream up');
        void this.giveUp();
      }
    }, 250);
    this.tick();
  }

  async stop(): Promise<void> {
    this.running = false;
    clearTimeout(this.timer);
    clearInterval(this.watchdog);
    await this.current;
    await this.giveUp();
    await this.handoff.close();
    await this.recording?.stop();
    await this.owed.idle();
    await this.options.userCheck?.stop();
    await this.options.election.close();
  }

  isHolder(): boolean {
    return this.holder !== null;
  }

  covers(): boolean {
    return this.holder?.connected === true || this.covering;
  }

  /** any replica: was the holder's stream alive within a stall and a few syncs? */
  private async readCoverage(): Promise<void> {
    try {
      const { aliveAt } = await this.options.repository.position();
      const window = (this.options.stallMs ?? DEFAULT_STALL_MS) + 3 * (this.options.syncMs ?? DEFAULT_SYNC_MS);
      this.covering = aliveAt !== null && Date.now() - aliveAt.getTime() < window;
    } catch {
      this.covering = false;
    }
  }

  async drain(): Promise<void> {
    await this.handoff.drain();
  }
}

function ruleUsernames(state: HolderState): string[] {
  return (state.rules ?? []).flatMap((r) => parseRule(r) ?? []);
}

export function createStreamMode(options: StreamModeOptions): StreamMode {
  return new StreamModeRunner(options);
}
