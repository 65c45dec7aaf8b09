/**
 * X_MONITOR_MODE=stream: one replica (elected, stream/election.ts) keeps X's filtered-stream rules
 * in step with the targets that have a Starter or trial watcher, holds the single stream
 * connection (stream/connection.ts) and records what it delivers through the poller's recording
 * path (stream/recorder.ts). Every `syncMs` (2 s) each replica checks the election; the holder
 * then re-reads the targets, applies the rule changes (domain/streamRules.ts) and saves the
 * stream's position (`x_stream_state`).
 *
 * Nothing is lost across a gap: when a connection comes up (start, reconnect, failover) the holder
 * backfills every rule's usernames by batched search from the saved position (the last time the
 * stream was seen alive, minus `overlapMs`); usernames newly put in a rule are backfilled
 * `ruleSettleMs` after the change (X: rules take effect within ~20 s) from their monitors'
 * creation (at most `lookbackMs` back). Overflow targets (beyond X_MAX_RULES) are polled by the
 * holder with batched search every `overflowIntervalMs`. Hits are unique per monitor and tweet, so
 * the stream and a backfill bringing the same tweet make one hit.
 *
 * No user lookup on the way: rules and backfills use `from:username`, posts carry their author.
 * Renamed and suspended accounts are found by the background check (stream/userCheck.ts).
 */
import type { Logger } from '@sts/common';
import type { SocialTweet } from '@sts/social';
import type { PollerRepository } from '../../adapters/repository';
import { parseRule, planRules, wantedRules, type StreamRule } from '../../domain/streamRules';
import type { DropKind } from '../../domain/streamBackoff';
import { runStreamConnection } from './connection';
import type { StreamElection } from './election';
import { recordTweets } from './recorder';
import type { StreamRepository, StreamTarget } from './repository';
import type { GroupSearch } from './search';
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
}

export interface StreamModeOptions {
  repository: StreamRepository;
  pollerRepository: PollerRepository;
  election: StreamElection;
  api: XStreamApi;
  search: GroupSearch;
  /** the accounts' background check (renamed, suspended → last_error), off the set-up path */
  userCheck?: UserCheck;
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
  /** how far back a username new to the rules is backfilled at most (Free interval + overlap) */
  lookbackMs: number;
  /** the Starter plan interval: overflow targets are polled by search this often */
  overflowIntervalMs: number;
  /** default 2 s */
  syncMs?: number;
  /** default 20 s (X) */
  stallMs?: number;
}

export interface StreamMode {
  start(): void;
  stop(): Promise<void>;
  /** one election check + rules sync (what the timer runs; tests call it) */
  sync(): Promise<void>;
  isHolder(): boolean;
  /** a stream was alive in the fleet lately (the holder's saved position): the tick leaves streamed targets */
  covers(): boolean;
  /** resolves when every tweet received so far is recorded */
  drain(): Promise<void>;
}

/** tweet ids remembered for the backfills' overlap (5/s for an hour is 18,000) */
const RECENT_IDS = 50_000;

interface HolderState {
  rules: StreamRule[] | null;
  abort: AbortController;
  connection: Promise<void>;
  connected: boolean;
  overflow: string[];
  overflowSince: Date | null;
  lastOverflowRun: number;
}

class StreamModeRunner implements StreamMode {
  private holder: HolderState | null = null;
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private current: Promise<void> = Promise.resolve();
  private streamQueue: Promise<void> = Promise.resolve();
  private backfillQueue: Promise<void> = Promise.resolve();
  private readonly recent = new Set<string>();
  private covering = false;
  private readonly pendingBackfills = new Set<NodeJS.Timeout>();
  /** usernames whose rule-change backfill is scheduled */
  private readonly pendingNames = new Set<string>();
  /** rule-change backfills that came due before the connection was up: run once it is */
  private deferred: { usernames: string[]; since: Date }[] = [];
  private lastTweetId: string | null = null;
  private aliveAt: Date | null = null;
  private targetsByKey = new Map<string, StreamTarget>();
  private readonly logger: Logger;

  constructor(private readonly options: StreamModeOptions) {
    this.logger = options.logger;
  }

  private get metrics(): StreamMetrics | undefined {
    return this.options.metrics;
  }

  private record(tweets: SocialTweet[], via: 'stream' | 'backfill'): Promise<void> {
    // a backfill re-reads its overlap window: what this holder recorded already is left out
    const fresh = via === 'backfill' ? tweets.filter((t) => !this.recent.has(t.id)) : tweets;
    if (via === 'stream') this.options.userCheck?.seen(fresh.map((t) => t.author));
    const run = async () => {
      const r = await recordTweets(this.options.pollerRepository, fresh);
      if (r.hits > 0) this.metrics?.hits(r.hits);
      // mode `stream` covers the gaps' backfills too: what the mode adds to a post's latency
      if (r.newHits.length > 0) this.metrics?.detected(r.newHits);
      if (via === 'backfill') this.metrics?.backfilled(fresh.length);
      for (const t of fresh) {
        this.remember(t.id);
        if (this.lastTweetId === null || BigInt(t.id) > BigInt(this.lastTweetId)) this.lastTweetId = t.id;
      }
    };
    // each kind in arrival order, on its own queue (a long backfill never holds up the stream's
    // posts); a failure is logged and the next gap's backfill repairs it
    const done = (via === 'stream' ? this.streamQueue : this.backfillQueue).then(run).catch((err: unknown) => {
      this.logger.error('recording stream tweets failed', { via, error: errorMessage(err) });
    });
    if (via === 'stream') this.streamQueue = done;
    else this.backfillQueue = done;
    return done;
  }

  /** the ids recorded lately (bounded): a backfill's overlap is not recorded twice */
  private remember(id: string): void {
    this.recent.add(id);
    if (this.recent.size > RECENT_IDS) {
      const oldest = this.recent.values().next().value;
      if (oldest !== undefined) this.recent.delete(oldest);
    }
  }

  private async backfill(usernames: readonly string[], since: Date, why: string): Promise<void> {
    if (usernames.length === 0) return;
    const floor = Date.now() - 7 * 86_400_000; // search/recent reaches 7 days back
    const from = new Date(Math.max(since.getTime(), floor));
    try {
      const tweets = await this.options.search(usernames, from, this.options.queryMaxLength);
      this.logger.info('X stream backfill', {
        why,
        usernames: usernames.length,
        since: from.toISOString(),
        posts: tweets.length,
      });
      await this.record(tweets, 'backfill');
    } catch (err) {
      this.logger.warn('X stream backfill failed', { why, error: errorMessage(err) });
      throw err;
    }
  }

  /** after a gap: every rule's usernames from where the stream was last seen alive */
  private async gapBackfill(state: HolderState): Promise<void> {
    const saved = await this.options.repository.position();
    const alive = [saved.aliveAt, this.aliveAt].filter((d): d is Date => d !== null);
    state.rules ??= await this.options.api.listRules().catch(() => null);
    // never seen alive (a first start): the rules this holder just added have their own backfill
    const names =
      alive.length > 0 ? ruleUsernames(state) : ruleUsernames(state).filter((u) => !this.pendingNames.has(u));
    const since =
      alive.length > 0
        ? new Date(Math.max(...alive.map((d) => d.getTime())) - this.options.overlapMs)
        : this.lookbackFor(names);
    // retried at the next connection when it fails (the position has not moved past the gap)
    await this.backfill(names, since, 'gap').catch(() => undefined);
  }

  /** the earliest a username new to the stream must be read from */
  private lookbackFor(names: readonly string[]): Date {
    const floor = Date.now() - this.options.lookbackMs;
    let min = Date.now();
    for (const n of names) {
      const created = this.targetsByKey.get(n)?.oldestMonitorAt.getTime() ?? floor;
      min = Math.min(min, Math.max(created, floor));
    }
    return new Date(min - this.options.overlapMs);
  }

  private newHolder(): HolderState {
    return {
      rules: null,
      abort: new AbortController(),
      connection: Promise.resolve(),
      connected: false,
      overflow: [],
      overflowSince: null,
      lastOverflowRun: 0,
    };
  }

  private connect(state: HolderState): void {
    state.connection = runStreamConnection(
      {
        api: this.options.api,
        logger: this.logger,
        stallMs: this.options.stallMs ?? 20_000,
        onTweet: (t) => void this.record([t], 'stream'),
        onActivity: () => (this.aliveAt = new Date()),
        onConnected: () => {
          state.connected = true;
          this.metrics?.connected(1);
          this.logger.info('X stream connected');
          void this.gapBackfill(state).then(() => this.runDeferred());
        },
        onDropped: (kind) => {
          state.connected = false;
          this.metrics?.connected(0);
          this.metrics?.reconnect(kind);
        },
      },
      state.abort.signal,
    );
  }

  private async giveUp(): Promise<void> {
    const state = this.holder;
    this.holder = null;
    if (!state) return;
    state.abort.abort();
    await state.connection;
    for (const d of this.deferred) this.settled(d.usernames);
    this.deferred = [];
    this.options.userCheck?.reset();
    this.metrics?.connected(0);
    this.logger.info('this replica no longer holds the X stream');
  }

  private async syncRules(state: HolderState): Promise<void> {
    const { api, repository } = this.options;
    const targets = await repository.targets();
    this.targetsByKey = new Map(targets.map((t) => [t.targetKey, t]));
    const now = new Date();
    const wanted = wantedRules(targets, now);
    state.rules ??= await api.listRules();
    const plan = planRules(state.rules, wanted, this.options.ruleMaxLength, this.options.maxRules);
    const before = new Set(ruleUsernames(state));
    if (plan.delete.length > 0) {
      await api.deleteRules(plan.delete);
      const gone = new Set(plan.delete);
      state.rules = state.rules.filter((r) => !gone.has(r.id));
    }
    if (plan.add.length > 0) {
      state.rules = [...state.rules, ...(await api.addRules(plan.add))];
      const added = plan.add.flatMap((r) => parseRule(r) ?? []);
      // usernames that were in a rule already were covered up to now; new ones from their monitors
      const fresh = this.lookbackFor(added.filter((u) => !before.has(u)));
      this.scheduleBackfill(added, new Date(Math.min(now.getTime() - this.options.overlapMs, fresh.getTime())));
    }
    if (plan.add.length > 0 || plan.delete.length > 0)
      this.logger.info('X stream rules changed', {
        added: plan.add.length,
        deleted: plan.delete.length,
        rules: state.rules.length,
      });
    this.syncOverflow(state, plan.overflow);
    this.metrics?.rules(state.rules.length, plan.overflow.length);
  }

  private scheduleBackfill(usernames: string[], since: Date): void {
    for (const u of usernames) this.pendingNames.add(u);
    const t = setTimeout(() => {
      this.pendingBackfills.delete(t);
      if (!this.holder) return this.settled(usernames);
      // no connection yet: a backfill now would leave a gap until it is up; it runs right after
      // the connection's own backfill instead (which leaves these names to it), so a first start
      // searches every new name once
      if (!this.holder.connected) return void this.deferred.push({ usernames, since });
      this.runBackfill(usernames, since);
    }, this.options.ruleSettleMs);
    this.pendingBackfills.add(t);
  }

  private settled(usernames: readonly string[]): void {
    for (const u of usernames) this.pendingNames.delete(u);
  }

  private runBackfill(usernames: string[], since: Date): void {
    const done = () => this.settled(usernames);
    void this.backfill(usernames, since, 'rules changed').then(done, done);
  }

  private runDeferred(): void {
    const due = this.deferred;
    this.deferred = [];
    for (const d of due) this.runBackfill(d.usernames, d.since);
  }

  /** targets beyond X_MAX_RULES: polled by batched search on the Starter interval */
  private syncOverflow(state: HolderState, overflow: string[]): void {
    if (overflow.length !== state.overflow.length)
      this.logger.warn('X stream rules full: targets polled by search instead', {
        overflowTargets: overflow.length,
        maxRules: this.options.maxRules,
      });
    const known = new Set(state.overflow);
    const fresh = overflow.filter((u) => !known.has(u));
    state.overflow = overflow;
    if (overflow.length === 0 || !state.connected) return;
    if (fresh.length === 0 && Date.now() - state.lastOverflowRun < this.options.overflowIntervalMs) return;
    const since = fresh.length > 0 || !state.overflowSince ? this.lookbackFor(overflow) : state.overflowSince;
    const started = Date.now();
    state.lastOverflowRun = started;
    void this.backfill(overflow, since, 'overflow').then(
      () => (state.overflowSince = new Date(started - this.options.overlapMs)),
      () => undefined,
    );
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
    try {
      await this.syncRules(state);
    } catch (err) {
      // X's view of the rules is unknown after a failed call: list them again next time
      state.rules = null;
      this.logger.warn('X stream rules sync failed', { error: errorMessage(err) });
    }
    // the rules first, then the connection: its gap backfill reads every rule's usernames
    if (becoming) this.connect(state);
    if (state.connected && this.aliveAt)
      await this.options.repository.savePosition({ lastTweetId: this.lastTweetId, aliveAt: this.aliveAt });
    await this.options.userCheck?.flush();
    // in the background, at low priority: never part of a connection's set-up
    if (state.connected) this.options.userCheck?.maybeRun([...ruleUsernames(state), ...state.overflow]);
  }

  private tick(): void {
    this.current = this.sync()
      .catch((err: unknown) => void this.logger.error('X stream sync failed', { error: errorMessage(err) }))
      .finally(() => this.schedule());
  }

  private schedule(): void {
    if (!this.running) return;
    this.timer = setTimeout(() => this.tick(), this.options.syncMs ?? 2000);
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.tick();
  }

  async stop(): Promise<void> {
    this.running = false;
    clearTimeout(this.timer);
    for (const t of this.pendingBackfills) clearTimeout(t);
    this.pendingBackfills.clear();
    this.pendingNames.clear();
    this.deferred = [];
    await this.current;
    await this.giveUp();
    await this.drain();
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
      const window = (this.options.stallMs ?? 20_000) + 3 * (this.options.syncMs ?? 2000);
      this.covering = aliveAt !== null && Date.now() - aliveAt.getTime() < window;
    } catch {
      this.covering = false;
    }
  }

  async drain(): Promise<void> {
    await Promise.all([this.streamQueue, this.backfillQueue]);
  }
}

function ruleUsernames(state: HolderState): string[] {
  return (state.rules ?? []).flatMap((r) => parseRule(r) ?? []);
}

export function createStreamMode(options: StreamModeOptions): StreamMode {
  return new StreamModeRunner(options);
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
