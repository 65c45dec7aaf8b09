/**
 * The poller: the tick (src/intake/tick: every tick it claims the due targets and polls them, one
 * by one or, in X search mode, by batched search from src/intake/search) and, with a database
 * URL, the local store's push (src/intake/push: a committed tweet of a pushed target polls it at
 * once) and its query monitors (src/intake/query: a committed tweet is matched at once against
 * every active query monitor). A target's poll (src/poll) runs under its Redis lease, one replica at a time, and
 * records each page through src/record. The X stream (src/intake/stream) runs beside it (main.ts).
 */
import type { Logger } from '@sts/common';
import type { SocialSource, XSource } from '@sts/social';
import type { IntervalPolicy, TargetState } from './domain/schedule';
import { subscribe, type DirectSession, type Subscription } from '@sts/db';
import { SESSION_APPLICATION_NAME } from './adapters/session';
import type { LeaseStore } from './adapters/lease';
import type { NewHit, PollerRepository } from './adapters/repository';
import { errorMessage } from '@sts/core';
import { createCycle, type CycleResult } from './intake/tick/cycle';
import { ticker } from './intake/tick/ticker';
import { createPush, type Push } from './intake/push/push';
import { createQueryIntake, type QueryIntake } from './intake/query/query';
import { createXQueryIntake, type XQueryIntake, type XQueryIntakeDeps } from './intake/xquery/xquery';
import { createGroupPoll, type GroupPollDeps } from './intake/search/search';
import type { GroupPoll, PollOutcome, PollResult, TargetPoll } from './pipeline';
import { createTargetPoll } from './poll/poll';
import type { ProfileRepository } from './adapters/profiles';
import { isUnavailable } from './domain/profiles';
import { createProfileWatch, type ProfileWatch } from './intake/profile/profile';
import type { PostDeletes } from './adapters/postDeletes';
import { createXProfileLookup, type XProfileLookup, type XProfileLookupDeps } from './intake/profile/xLookup';
import { coveredGroupPoll, coveredPoll, type CoverageRepository } from './gaps/gaps';

/** the channel of the local store's tweet trigger (migration 20261124100000_poll_targets) */
export const TWEETS_CHANNEL = 'sts_tweets';

interface PollerMetrics {
  polls(outcome: PollOutcome): void;
  hits(count: number): void;
  /** new hits of a poll, and whether a committed tweet woke it */
  detected?(hits: readonly NewHit[], how: 'push' | 'poll'): void;
}

export interface PollerOptions {
  repository: PollerRepository;
  source: SocialSource;
  leases: LeaseStore;
  logger: Logger;
  intervals: IntervalPolicy;
  /** targets polled at once by this replica (default 8) */
  concurrency?: number;
  /** tweets per source call (default 100) */
  batchSize?: number;
  /** a poll's time limit (default 30 s); its lease lives twice as long */
  pollTimeoutMs?: number;
  /** how often due targets are looked for (default 1 s) */
  tickMs?: number;
  /** most due targets one tick claims (default 200); an outage's backlog drains at this pace */
  claimLimit?: number;
  /** the process's direct session: LISTENs for the local store's committed tweets (push) */
  session?: DirectSession;
  /** without `session`: a session of its own for the push; without either only the tick polls */
  databaseUrl?: string;
  /**
   * watched accounts' profile and status changes: the local store's are notified on the tweets'
   * channel; with `xAccounts` they are looked up on X in batches (src/intake/profile/xLookup.ts)
   */
  profiles?: ProfileRepository;
  /** the local store's deleted tweets ("d <target> <id>" on the tweets' channel): monitor.post_deleted */
  postDeletes?: PostDeletes;
  /** X: the batched account lookup (with `profiles`) */
  xAccounts?: Pick<XSource, 'lookupAccounts'>;
  /** X: how often the account lookup runs (default 15 s) */
  profileLookupMs?: number;
  /** X stream mode: targets whose first account look the stream's backfill makes (xLookup.ts) */
  leavesFirstLook?: XProfileLookupDeps['leavesFirstLook'];
  /** X: the look interval of targets whose profile changes the X Activity API pushes (xLookup.ts) */
  healthLookupSec?: number;
  /** which due targets a tick polls (default all; X stream mode leaves the streamed ones) */
  selectDue?: (due: TargetState[], now: Date) => TargetState[];
  /** X search mode: batched search (createGroupPoll's options but the shared ones) */
  search?: Omit<GroupPollDeps, 'repository' | 'leases' | 'logger' | 'intervals' | 'pollTimeoutMs' | 'now'>;
  metrics?: PollerMetrics;
  /** the coverage record: a failed or refused poll opens a gap (src/coverage) */
  coverage?: CoverageRepository;
  now?: () => Date;
  /** the query intake's safety-net run when no notification came (default 5 s) */
  queryIntervalMs?: number;
  /** X: query monitors read by recent search (src/intake/xquery) */
  xQueries?: Pick<XQueryIntakeDeps, 'searchGroup' | 'streamed' | 'tickMs'>;
}

export interface Poller {
  /** polls every tick (and on pushes) until stop() */
  start(): Promise<void>;
  /** stops taking targets and waits for the polls in flight */
  stop(): Promise<void>;
  /** Polls every due target once (every target with `force`); what tests and benchmarks call. */
  runCycle(opts?: { force?: boolean }): Promise<CycleResult>;
  /** wakes a target as the tweet trigger's notification would (tests) */
  push: Push;
  /** the local store's query monitors (none on X) */
  queries: QueryIntake | null;
  /** X: the query monitors read by recent search (none on the local store) */
  xQueries: XQueryIntake | null;
  /** the local store's profile looks (absent without `profiles` or with `xAccounts`) */
  profiles?: ProfileWatch;
  /** X's account lookup (absent without `xAccounts`) */
  accounts?: XProfileLookup;
}

interface Looks {
  look(targetKey: string): void;
}

/**
 * Whether a poll asks for a look at the target's account: a target never looked at, an
 * unavailable one (is it back?) or one whose poll failed (gone? a refusal of the budget tells nothing).
 */
function wantsLook(target: TargetState, result: PollResult): boolean {
  if (result.outcome === 'skipped' || result.busy) return false;
  const unknown = target.targetStatus === null || target.targetStatus === undefined;
  return unknown || isUnavailable(target.targetStatus) || result.outcome === 'error';
}

function withProfileLooks(poll: TargetPoll, looks: Looks | undefined): TargetPoll {
  if (!looks) return poll;
  return async (target, opts) => {
    const result = await poll(target, opts);
    if (wantsLook(target, result)) looks.look(target.targetKey);
    return result;
  };
}

function withGroupProfileLooks(poll: GroupPoll, looks: Looks | undefined): GroupPoll {
  if (!looks) return poll;
  return async (targets, readAt) => {
    const results = await poll(targets, readAt);
    for (const t of targets) {
      const r = results.get(t.targetKey);
      if (r && wantsLook(t, r)) looks.look(t.targetKey);
    }
    return results;
  };
}

/** the local store's profile watch, or X's account lookup, or none */
function profileLooksOf(
  options: PollerOptions,
  now: () => Date,
): { profiles?: ProfileWatch; accounts?: XProfileLookup } {
  const { profiles: repository, logger } = options;
  if (!repository) return {};
  if (!options.xAccounts) return { profiles: createProfileWatch({ repository, logger, now }) };
  const accounts = createXProfileLookup({
    source: options.xAccounts,
    repository,
    leases: options.leases,
    logger,
    intervals: options.intervals,
    now,
    ...(options.profileLookupMs !== undefined ? { everyMs: options.profileLookupMs } : {}),
    ...(options.leavesFirstLook && { leavesFirstLook: options.leavesFirstLook }),
    ...(options.healthLookupSec !== undefined && { healthLookupSec: options.healthLookupSec }),
  });
  return { accounts };
}

function recorder(metrics: PollerMetrics | undefined, how: 'push' | 'poll') {
  return (outcome: PollOutcome, r: PollResult) => {
    if (outcome === 'ok') {
      metrics?.hits(r.hits.length);
      if (r.hits.length > 0) metrics?.detected?.(r.hits, how);
    }
    metrics?.polls(outcome);
  };
}

/** X search mode: the cycle's batched-search poll (none without `search`) */
function groupPollOf(
  options: PollerOptions,
  now: () => Date,
  inFlight: Set<string>,
  looks: Looks | undefined,
): { groupPoll?: GroupPoll } {
  if (!options.search) return {};
  const deps: GroupPollDeps = {
    ...options.search,
    repository: options.repository,
    leases: options.leases,
    logger: options.logger,
    intervals: options.intervals,
    pollTimeoutMs: options.pollTimeoutMs ?? 30_000,
    now,
  };
  const groupPoll = createGroupPoll(deps, inFlight);
  const covered = options.coverage ? coveredGroupPoll(groupPoll, options.coverage, options.logger) : groupPoll;
  return { groupPoll: withGroupProfileLooks(covered, looks) };
}

/** The local store's query intake (a source that reads every author's tweets), or none (X). */
/**
 * The push lost the notifications sent while its LISTEN was down: each pushed target is polled
 * once (xid 0: any position covers it), at the push's concurrency.
 */
async function resyncPush(repository: PollerRepository, push: Push, logger: Logger): Promise<void> {
  try {
    const keys = (await repository.pushedTargets?.()) ?? [];
    for (const key of keys) push.wake(key, 0n);
    logger.info('tweet listener reconnected; polling the pushed targets once', { targets: keys.length });
  } catch (err) {
    logger.warn('pushed targets could not be made due', { err: errorMessage(err) });
  }
}

function queryIntakeOf(options: PollerOptions, now: () => Date): QueryIntake | null {
  const { source, metrics } = options;
  if (!source.pollAllTweets) return null;
  return createQueryIntake({
    repository: options.repository,
    source: { pollAllTweets: (request) => source.pollAllTweets!(request) },
    logger: options.logger,
    now,
    batchSize: options.batchSize ?? 100,
    ...(options.queryIntervalMs !== undefined ? { intervalMs: options.queryIntervalMs } : {}),
    onHits: (hits) => {
      metrics?.hits(hits.length);
      metrics?.detected?.(hits, 'push');
    },
  });
}

/** X: the query monitors' recent searches, or none (the local store, or no `xQueries`) */
function xQueryIntakeOf(options: PollerOptions, now: () => Date): XQueryIntake | null {
  if (!options.xQueries) return null;
  const { metrics } = options;
  return createXQueryIntake({
    ...options.xQueries,
    repository: options.repository,
    leases: options.leases,
    intervals: options.intervals,
    logger: options.logger,
    now,
    pollTimeoutMs: options.pollTimeoutMs ?? 30_000,
    ...(options.coverage && { coverage: options.coverage }),
    onHits: (hits) => {
      metrics?.hits(hits.length);
      metrics?.detected?.(hits, 'poll');
    },
  });
}

export function createPoller(options: PollerOptions): Poller {
  const { repository, logger, intervals } = options;
  const concurrency = options.concurrency ?? 8;
  const now = options.now ?? (() => new Date());
  let stopping = false;
  const inFlight = new Set<string>();
  const { profiles, accounts } = profileLooksOf(options, now);
  const looks = profiles ?? accounts;
  const targetPoll = createTargetPoll(
    {
      repository,
      source: options.source,
      leases: options.leases,
      logger,
      intervals,
      batchSize: options.batchSize ?? 100,
      pollTimeoutMs: options.pollTimeoutMs ?? 30_000,
      now,
    },
    inFlight,
  );
  const covered = options.coverage ? coveredPoll(targetPoll, options.coverage, logger) : targetPoll;
  const poll = withProfileLooks(covered, looks);
  // what the tick's cycle and the push both poll with
  const polling = { repository, poll, now, concurrency };
  const runCycle = createCycle({
    ...polling,
    intervals,
    claimLimit: options.claimLimit ?? 200,
    // as long as a poll's lease: a replica that dies leaves its claims to lapse then
    claimTtlMs: (options.pollTimeoutMs ?? 30_000) * 2,
    stopping: () => stopping,
    onPolled: recorder(options.metrics, 'poll'),
    ...(options.selectDue ? { select: options.selectDue } : {}),
    ...groupPollOf(options, now, inFlight, looks),
  });
  const onPushed = recorder(options.metrics, 'push');
  const push = createPush({ ...polling, logger, inFlight, onPolled: (r) => onPushed(r.outcome, r) });
  const tick = ticker(() => runCycle(), options.tickMs ?? 1000, logger);
  const queries = queryIntakeOf(options, now);
  const xQueries = xQueryIntakeOf(options, now);
  let listener: Subscription | undefined;

  return {
    async start() {
      stopping = false;
      push.start();
      const listening = options.session ?? options.databaseUrl;
      if (listening) queries?.start();
      if (listening && !listener) {
        // "q <xid>": the query intake's; a profile change: the profile watch's; "<xid> <target>": a pushed target's
        listener = subscribe({ ...options, applicationName: SESSION_APPLICATION_NAME, logger }, TWEETS_CHANNEL, {
          onNotify: (payload) => {
            if (payload.startsWith('q ')) queries?.notify(payload);
            else if (payload.startsWith('d ')) deleted(options, payload, now);
            else if (!profiles?.notify(payload)) push.notify(payload);
          },
          onReconnect: () => void resyncPush(repository, push, logger),
        });
        // not reachable now: it keeps reconnecting, and the interval poll covers meanwhile
        await listener?.ready.catch((err: unknown) =>
          logger.warn('tweet listener did not start', { error: errorMessage(err) }),
        );
      }
      tick.start();
      accounts?.start();
      xQueries?.start();
    },
    async stop() {
      stopping = true;
      await listener?.close();
      listener = undefined;
      await push.stop();
      await queries?.stop();
      await xQueries?.stop();
      await tick.stop();
      await profiles?.stop();
      await accounts?.stop();
    },
    runCycle,
    push,
    queries,
    xQueries,
    ...(profiles ? { profiles } : {}),
    ...(accounts ? { accounts } : {}),
  };
}

const DELETED = /^d (\S{1,100}) ([0-9]{1,19})$/;

/** "d <target key> <tweet id>": the local store's tweet was deleted (monitor.post_deleted) */
function deleted(options: PollerOptions, payload: string, now: () => Date): void {
  const m = DELETED.exec(payload);
  if (!m || !options.postDeletes) return;
  options.postDeletes
    .record(m[1]!, m[2]!, now())
    .catch((err: unknown) =>
      options.logger.warn('deleted post could not be recorded', { target: m[1], err: errorMessage(err) }),
    );
}
