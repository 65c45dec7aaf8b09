/**
 * The poller: the tick (src/intake/tick: every tick it claims the due targets and polls them, one
 * by one or, in X search mode, by batched search from src/intake/search) and, with a database
 * URL, the local store's push (src/intake/push: a committed tweet of a pushed target polls it at
 * once) and its query monitors (src/intake/query: a committed tweet is matched at once against
 * every active query monitor). A target's poll (src/poll) runs under its Redis lease, one replica
 * at a time, records each page through src/record and settles (coverage, account look, metrics).
 * The X stream (@sts/x-stream) runs beside it (main.ts).
 */
import type { Logger } from '@sts/common';
import type { SocialSource, XSource } from '@sts/social';
import type { IntervalPolicy, TargetState } from './domain/schedule';
import { subscribe, type DirectSession, type Subscription } from '@sts/db';
import { SESSION_APPLICATION_NAME } from './adapters/session';
import type { LeaseStore } from './adapters/lease';
import type { HitWriter } from './adapters/hitWriter';
import type { ScheduleStore } from './adapters/scheduleStore';
import { errorMessage } from '@sts/core';
import { createCycle, type CycleResult } from './intake/tick/cycle';
import { ticker } from './intake/tick/ticker';
import { createPush, type Push } from './intake/push/push';
import { createQueryIntake, type QueryIntake } from './intake/query/query';
import { createXQueryIntake, type XQueryIntake, type XQueryIntakeDeps } from './intake/xquery/xquery';
import { createGroupPoll, type GroupPollDeps } from './intake/search/search';
import type { GroupPoll } from './domain/pipeline';
import { createTargetPoll } from './poll/poll';
import { createSettle, type PollerMetrics, type Settle } from './poll/settle';
import type { ProfileRepository } from './adapters/profiles';
import { createProfileWatch, type ProfileWatch } from './intake/profile/profile';
import type { PostDeletes } from './adapters/postDeletes';
import { createXProfileLookup, type XProfileLookup, type XProfileLookupDeps } from './intake/profile/xLookup';
import type { CoverageRepository } from './gaps/gaps';

/** the channel of the local store's tweet trigger (migration 20261124100000_poll_targets) */
export const TWEETS_CHANNEL = 'sts_tweets';

/** how often due targets are looked for */
const TICK_MS = 1000;

export interface PollerOptions {
  schedule: ScheduleStore;
  writer: HitWriter;
  source: SocialSource;
  leases: LeaseStore;
  logger: Logger;
  intervals: IntervalPolicy;
  /** targets polled at once by this replica (POLL_CONCURRENCY) */
  concurrency: number;
  /** tweets per source call (POLL_BATCH_SIZE) */
  batchSize: number;
  /** a poll's time limit (POLL_TIMEOUT_MS); its lease lives twice as long */
  pollTimeoutMs: number;
  /** most due targets one tick claims (POLL_CLAIM_LIMIT); an outage's backlog drains at this pace */
  claimLimit: number;
  /** how often due targets are looked for (default 1 s; tests shorten it) */
  tickMs?: number;
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
  search?: Pick<GroupPollDeps, 'source' | 'maxQueryLength' | 'overlapMs'>;
  metrics?: PollerMetrics;
  /** the coverage record: a failed or refused poll opens a gap (src/gaps) */
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

/** X search mode: the cycle's batched-search poll (none without `search`) */
function groupPollOf(options: PollerOptions, shared: SharedPollDeps, inFlight: Set<string>): { groupPoll?: GroupPoll } {
  if (!options.search) return {};
  return { groupPoll: createGroupPoll({ ...shared, ...options.search }, inFlight) };
}

/**
 * The push lost the notifications sent while its LISTEN was down: each pushed target is polled
 * once (xid 0: any position covers it), at the push's concurrency.
 */
async function resyncPush(schedule: ScheduleStore, push: Push, logger: Logger): Promise<void> {
  try {
    const keys = await schedule.pushedTargets();
    for (const key of keys) push.wake(key, 0n);
    logger.info('tweet listener reconnected; polling the pushed targets once', { targets: keys.length });
  } catch (err) {
    logger.warn('pushed targets could not be made due', { err: errorMessage(err) });
  }
}

/** The local store's query intake (a source that reads every author's tweets), or none (X). */
function queryIntakeOf(options: PollerOptions, now: () => Date): QueryIntake | null {
  const { source, metrics } = options;
  if (!source.pollAllTweets) return null;
  return createQueryIntake({
    schedule: options.schedule,
    writer: options.writer,
    source: { pollAllTweets: (request) => source.pollAllTweets!(request) },
    logger: options.logger,
    now,
    batchSize: options.batchSize,
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
    schedule: options.schedule,
    writer: options.writer,
    leases: options.leases,
    intervals: options.intervals,
    logger: options.logger,
    now,
    pollTimeoutMs: options.pollTimeoutMs,
    ...(options.coverage && { coverage: options.coverage }),
    onHits: (hits) => {
      metrics?.hits(hits.length);
      metrics?.detected?.(hits, 'poll');
    },
  });
}

/** what a target's poll and X search's group poll share */
type SharedPollDeps = Pick<
  GroupPollDeps,
  'schedule' | 'writer' | 'leases' | 'logger' | 'intervals' | 'pollTimeoutMs' | 'now' | 'settle'
>;

export function createPoller(options: PollerOptions): Poller {
  const { schedule, writer, logger, intervals, concurrency } = options;
  const now = options.now ?? (() => new Date());
  let stopping = false;
  const inFlight = new Set<string>();
  const { profiles, accounts } = profileLooksOf(options, now);
  const looks = profiles ?? accounts;
  // after every poll: its coverage record, the account look it asks for, its metrics
  const settle: Settle = createSettle({
    logger,
    ...(options.coverage && { coverage: options.coverage }),
    ...(looks && { looks }),
    ...(options.metrics && { metrics: options.metrics }),
  });
  const shared: SharedPollDeps = {
    schedule,
    writer,
    leases: options.leases,
    logger,
    intervals,
    pollTimeoutMs: options.pollTimeoutMs,
    now,
    settle,
  };
  const poll = createTargetPoll({ ...shared, source: options.source, batchSize: options.batchSize }, inFlight);
  const runCycle = createCycle({
    schedule,
    poll,
    now,
    concurrency,
    intervals,
    claimLimit: options.claimLimit,
    // as long as a poll's lease: a replica that dies leaves its claims to lapse then
    claimTtlMs: options.pollTimeoutMs * 2,
    stopping: () => stopping,
    ...(options.selectDue ? { select: options.selectDue } : {}),
    ...groupPollOf(options, shared, inFlight),
  });
  const push = createPush({ schedule, poll, now, concurrency, logger, inFlight });
  const tick = ticker(() => runCycle(), options.tickMs ?? TICK_MS, logger);
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
          onReconnect: () => void resyncPush(schedule, push, logger),
        });
        // not reachable now: it keeps reconnecting, and the interval poll covers meanwhile
        await listener?.ready.catch((err: unknown) =>
          logger.warn('tweet listener did not start', { err: errorMessage(err) }),
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
