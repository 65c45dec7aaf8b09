/**
 * One target's poll: take its lease, read the tweets after its position from the social source
 * (one call per page, however many monitors watch it) and record each page (src/record/: hits,
 * events, the new position and the target's next due time). The source never moves the position
 * past a tweet that can still appear (README, "Cursors"); a tweet read twice is one hit and one
 * event (unique monitor + tweet). Then the poll settles (settle.ts: coverage, account look,
 * metrics). What the tick and the push call (a TargetPoll).
 */
import type { Logger } from '@sts/common';
import { errorMessage } from '@sts/core';
import { SourceBusyError, type SocialSource } from '@sts/social';
import { compileMonitors } from '../domain/hits';
import { isPushed, scheduleAfterPoll, type IntervalPolicy, type TargetState } from '../domain/schedule';
import type { LeaseStore } from '../adapters/lease';
import type { HitWriter } from '../adapters/hitWriter';
import type { ScheduleStore } from '../adapters/scheduleStore';
import {
  LeaseStoreError,
  pollTimeout,
  SKIPPED,
  withTimeout,
  type NewHit,
  type PollResult,
  type TargetPoll,
} from '../domain/pipeline';
import { recordPage, startOf } from '../record/record';
import type { Settle } from './settle';

export interface TargetPollDeps {
  schedule: Pick<ScheduleStore, 'monitorsFor'>;
  writer: HitWriter;
  source: SocialSource;
  leases: LeaseStore;
  logger: Logger;
  intervals: IntervalPolicy;
  batchSize: number;
  pollTimeoutMs: number;
  now: () => Date;
  /** coverage, account look, metrics: after every poll */
  settle: Settle;
}

/** Polls one target under its lease; `inFlight` holds the targets this replica is polling. */
export function createTargetPoll(deps: TargetPollDeps, inFlight: Set<string>): TargetPoll {
  const { schedule, writer, leases, logger, pollTimeoutMs, now } = deps;

  /** pages until the source has nothing more; each page is its own transaction */
  async function readPages(target: TargetState, push: boolean, readAt: Date): Promise<PollResult> {
    const key = target.targetKey;
    const deadline = Date.now() + pollTimeoutMs;
    const stored = await writer.cursor(key);
    // another replica polled the target after this cycle read the targets: not due any more (a
    // push is for a tweet committed after that poll's read, so it polls anyway)
    const seen = target.lastPolledAt?.getTime() ?? -Infinity;
    if (!push && stored?.lastPolledAt && stored.lastPolledAt.getTime() > seen) return SKIPPED;
    const monitors = compileMonitors(await schedule.monitorsFor(key));
    if (monitors.length === 0) return SKIPPED;
    const { cursor, notBefore } = startOf(stored, monitors);
    const recorded: NewHit[] = [];
    for (let firstPage = true; ; firstPage = false) {
      const left = deadline - Date.now();
      if (left <= 0) throw pollTimeout(pollTimeoutMs);
      const page = await withTimeout(
        deps.source.pollTweets(target.username, {
          position: cursor.position,
          notBefore,
          limit: deps.batchSize,
          firstPage,
          // X budget: targets watched only by Free accounts leave a reserve to Starter/trial ones
          priority: isPushed(target, now()) ? 'high' : 'low',
        }),
        left,
        `the social source did not answer within ${pollTimeoutMs} ms`,
      );
      // past the deadline the lease may lapse soon: write nothing, the next poll redoes the page
      if (Date.now() > deadline) throw pollTimeout(pollTimeoutMs);
      const polledAt = now();
      const schedule = scheduleAfterPoll(target, deps.intervals, polledAt, readAt);
      if (page === null) {
        await writer.recordFailure(key, `target user @${target.username} not found`, polledAt, schedule);
        return { outcome: 'error', hits: recorded, position: cursor.position };
      }
      recorded.push(...(await recordPage(writer, page, { targetKey: key, monitors, cursor, polledAt, schedule })));
      if (!page.more) return { outcome: 'ok', hits: recorded, position: cursor.position };
    }
  }

  async function failed(target: TargetState, err: unknown, readAt: Date): Promise<PollResult> {
    const key = target.targetKey;
    const message = errorMessage(err);
    logger.warn('poll failed', { target: key, err: message });
    const polledAt = now();
    const schedule = scheduleAfterPoll(target, deps.intervals, polledAt, readAt);
    const busy = err instanceof SourceBusyError;
    // refused by the fleet's budget: no read and no poll (last_polled_at stays), so the target
    // stays due and the tick stops taking targets (cycle.ts); each tick then tries once, and when
    // the budget reopens every unread target is due and taken in fair order (`fairOrder`)
    const write = busy
      ? writer.recordRefusal(key, message.slice(0, 500), { ...schedule, nextDueAt: polledAt })
      : writer.recordFailure(key, message.slice(0, 500), polledAt, schedule);
    await write.catch((e: unknown) =>
      logger.warn('could not record the poll failure', { target: key, err: errorMessage(e) }),
    );
    return busy ? { outcome: 'error', hits: [], position: null, busy } : { outcome: 'error', hits: [], position: null };
  }

  /** lease → read and record the pages (or record the failure) → give the lease back */
  async function leased(target: TargetState, opts: { push?: boolean; readAt?: Date }): Promise<PollResult> {
    const key = target.targetKey;
    if (inFlight.has(key)) return SKIPPED;
    inFlight.add(key);
    const readAt = opts.readAt ?? now();
    let token: string | null;
    try {
      token = await leases.acquire(key, pollTimeoutMs * 2);
    } catch (err) {
      inFlight.delete(key);
      throw new LeaseStoreError(`lease store unavailable: ${errorMessage(err)}`);
    }
    if (!token) {
      inFlight.delete(key);
      return SKIPPED;
    }
    try {
      return await readPages(target, opts.push ?? false, readAt);
    } catch (err) {
      return await failed(target, err, readAt);
    } finally {
      inFlight.delete(key);
      await leases.release(key, token).catch(() => undefined);
    }
  }

  return async (target, opts = {}) => {
    const result = await leased(target, opts);
    await deps.settle(target, result, opts.push ? 'push' : 'poll');
    return result;
  };
}
