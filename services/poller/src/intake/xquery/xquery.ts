/**
 * Query monitors read by X recent search (docs/queries.md "On X"): in the `search` and `timeline`
 * modes every active query monitor (a timeline cannot answer a query), in the `stream` mode those
 * the stream does not read (`streamed`: a Free-only account, or no stream alive in the fleet).
 *
 * A monitor is due one plan interval (IntervalPolicy, as a username target) after its last read.
 * Each due monitor is one `search/recent` request of its query as X reads it (the grouping
 * spelled out) since its cursor (`?query:<id>`, since_id with the overlap window behind it; from
 * the monitor's creation the first time), through the fleet's governor like the username
 * searches (family `search`; a Free account's at low priority). The posts are matched again
 * against the parsed query and recorded through the shared record step (record/queryRecord.ts).
 * A Redis lease per monitor keeps replicas from reading it twice; a budget refusal ends the run
 * (the rest stays due); another failure goes on the monitor's cursor and waits an interval.
 */
import type { Logger } from '@sts/common';
import { effectivePlan, errorMessage } from '@sts/core';
import { queryCursorKeyOf } from '@sts/db';
import { SourceBusyError, type XSource } from '@sts/social';
import type { LeaseStore } from '../../adapters/lease';
import type { CoverageRepository } from '../../gaps/gaps';
import type { QueryWatcher } from '@sts/db';
import type { NewHit, StoredCursor } from '../../domain/pipeline';
import type { HitWriter } from '../../adapters/hitWriter';
import type { ScheduleStore } from '../../adapters/scheduleStore';
import { groupSinceId } from '../../domain/groups';
import { queryRuleValue } from '@sts/x-stream';
import type { IntervalPolicy } from '../../domain/schedule';
import { recordQueryTweets } from '../../record/queryRecord';

export interface XQueryIntakeDeps {
  schedule: Pick<ScheduleStore, 'queryWatchers'>;
  writer: Pick<HitWriter, 'cursor' | 'recordBatch' | 'recordFailure'>;
  searchGroup: XSource['searchGroup'];
  leases: LeaseStore;
  intervals: IntervalPolicy;
  logger: Logger;
  now: () => Date;
  /** stream mode: the stream reads this monitor (a search would read it twice) */
  streamed?: (monitor: QueryWatcher, now: Date) => boolean;
  /** a search's time limit (POLL_TIMEOUT_MS); its lease lives twice as long */
  pollTimeoutMs: number;
  /** how often due monitors are looked for (default 1 s) */
  tickMs?: number;
  /** the new hits of each read */
  onHits?: (hits: readonly NewHit[]) => void;
  /** the coverage record: a refused or failed search opens a gap on the monitor's cursor key */
  coverage?: CoverageRepository;
}

export interface XQueryIntake {
  start(): void;
  stop(): Promise<void>;
  /** reads every due query monitor once (tests); how many were read and their new hits */
  runOnce(): Promise<{ read: number; hits: NewHit[] }>;
}

type ReadOutcome = { kind: 'read'; hits: NewHit[] } | { kind: 'skipped' } | { kind: 'refused' };

function intervalMs(m: QueryWatcher, policy: IntervalPolicy, now: Date): number {
  return (policy.overrideSec ?? policy.plans[effectivePlan(m.account, now)].pollIntervalSec) * 1000;
}

function isDue(cursor: StoredCursor | null, m: QueryWatcher, policy: IntervalPolicy, now: Date): boolean {
  const last = cursor?.lastPolledAt;
  return !last || last.getTime() + intervalMs(m, policy, now) <= now.getTime();
}

/** one monitor's search since its cursor, recorded; a failure other than the budget's on its cursor */
async function readMonitor(deps: XQueryIntakeDeps, m: QueryWatcher, query: string): Promise<ReadOutcome> {
  const key = queryCursorKeyOf(m.id);
  const stored = await deps.writer.cursor(key);
  const now = deps.now();
  if (!isDue(stored, m, deps.intervals, now)) return { kind: 'skipped' };
  try {
    const result = await deps.searchGroup(
      { query, usernames: [] },
      {
        sinceId: groupSinceId([stored?.position ?? null]),
        notBefore: m.createdAt,
        firstPage: true,
        priority: effectivePlan(m.account, now) === 'free' ? 'low' : 'high',
        resolveUsers: false,
      },
    );
    if (result.truncated)
      deps.logger.warn('query search truncated: its oldest new posts were not read', { monitorId: m.id });
    const hits = await recordQueryTweets(deps.writer, m, result.tweets, `x.${result.newestId}`, deps.now());
    return { kind: 'read', hits };
  } catch (err) {
    const refused = err instanceof SourceBusyError;
    await missed(deps, key, refused ? 'budget_refused' : 'source_error');
    if (refused) return { kind: 'refused' };
    deps.logger.warn('query search failed', { monitorId: m.id, err: errorMessage(err) });
    await deps.writer.recordFailure(key, errorMessage(err).slice(0, 500), deps.now());
    return { kind: 'read', hits: [] };
  }
}

/** the coverage record of a search not made (evidence, not a step: a failure to write it is logged) */
async function missed(deps: XQueryIntakeDeps, key: string, reason: 'budget_refused' | 'source_error'): Promise<void> {
  await deps.coverage
    ?.missed(key, reason)
    .catch((err: unknown) =>
      deps.logger.warn('could not record a coverage gap', { target: key, err: errorMessage(err) }),
    );
}

/** the monitor's read under its lease (another replica reading it: skipped) */
async function leasedRead(deps: XQueryIntakeDeps, m: QueryWatcher, query: string): Promise<ReadOutcome> {
  const key = queryCursorKeyOf(m.id);
  const token = await deps.leases.acquire(key, deps.pollTimeoutMs * 2);
  if (!token) return { kind: 'skipped' };
  try {
    return await readMonitor(deps, m, query);
  } finally {
    await deps.leases.release(key, token).catch(() => undefined);
  }
}

async function runXQueries(deps: XQueryIntakeDeps): Promise<{ read: number; hits: NewHit[] }> {
  const now = deps.now();
  const out = { read: 0, hits: [] as NewHit[] };
  for (const m of await deps.schedule.queryWatchers()) {
    const query = queryRuleValue(m.query);
    // a stored query that no longer parses matches nothing (compileMonitors): nothing to read
    if (query === null || deps.streamed?.(m, now)) continue;
    const r = await leasedRead(deps, m, query);
    if (r.kind === 'refused') break; // the budget reopens later: the rest stays due
    if (r.kind === 'read') {
      out.read++;
      out.hits.push(...r.hits);
    }
  }
  return out;
}

export function createXQueryIntake(deps: XQueryIntakeDeps): XQueryIntake {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<unknown> = Promise.resolve();
  let stopped = true;

  const tick = (): void => {
    running = runXQueries(deps)
      .then((r) => {
        if (r.hits.length > 0) deps.onHits?.(r.hits);
      })
      .catch((err: unknown) => deps.logger.warn('query search run failed', { err: errorMessage(err) }))
      .finally(() => {
        if (!stopped) timer = setTimeout(tick, deps.tickMs ?? 1000);
      });
  };

  return {
    start() {
      if (!stopped) return;
      stopped = false;
      tick();
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
    runOnce: () => runXQueries(deps),
  };
}
