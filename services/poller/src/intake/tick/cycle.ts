/**
 * One poll cycle: claims the due targets from the schedule (poll_targets.next_due_at, indexed: a
 * tick with nothing due reads nothing; at most `claimLimit`, oldest due first, each claimed by one
 * replica), re-evaluates them (a monitor or plan change makes a target due at once so its interval
 * is computed again: one not due yet is rescheduled, not polled) and polls the due ones,
 * `concurrency` at a time, in a fair order (`fairOrder`: Starter/trial first, then the longest
 * unread). Claimed targets the cycle did not reach (budget refused, stopping, an error) are given
 * back at their old due time. A forced cycle polls every target.
 */
import {
  dueTargets,
  fairOrder,
  isPushed,
  nextDueAt,
  type IntervalPolicy,
  type ReadTime,
  type TargetState,
} from '../../domain/schedule';
import { errorMessage, chunks } from '@sts/core';
import type { Claim, ScheduleStore } from '../../adapters/scheduleStore';
import type { GroupPoll, PollResult, TargetPoll } from '../../domain/pipeline';

export interface CycleResult {
  /** targets due (all with `force`) */
  targets: number;
  polled: number;
  /** leased by another replica, polled by one since this cycle looked, or no active monitor left */
  skipped: number;
  failed: number;
  /** hits recorded (new ones only) */
  hits: number;
}

export interface CycleDeps {
  schedule: ScheduleStore;
  intervals: IntervalPolicy;
  concurrency: number;
  /** most targets one tick claims (the pace of an outage's catch-up) */
  claimLimit: number;
  /** how long a claim holds a target before another replica may take it */
  claimTtlMs: number;
  now: () => Date;
  poll: TargetPoll;
  /** stops taking targets (the poller is stopping) */
  stopping: () => boolean;
  /** which targets a tick polls among the due ones (X stream mode leaves the streamed ones); default all */
  select?: (due: TargetState[], now: Date) => TargetState[];
  /** X search mode: polls a chunk of targets by batched search instead of one by one */
  groupPoll?: GroupPoll;
}

/** targets per group poll: a few packed queries (~20 targets each), well inside one lease */
const GROUP_CHUNK = 60;

/**
 * Claims the candidates and reschedules the ones that are not due; returns the due ones, their
 * claims and the read time (PostgreSQL's clock, the one the schedule's stamps come from).
 */
async function dueNow(deps: CycleDeps): Promise<{ readAt: ReadTime; due: TargetState[]; claims: Claim[] }> {
  const { readAt, targets: candidates, claims } = await deps.schedule.claimDue(deps.claimLimit, deps.claimTtlMs);
  const due = dueTargets(candidates, deps.intervals, readAt);
  if (due.length < candidates.length) {
    const dueKeys = new Set(due.map((t) => t.targetKey));
    await deps.schedule.reschedule(
      candidates
        .filter((t) => !dueKeys.has(t.targetKey))
        .map((t) => ({
          targetKey: t.targetKey,
          nextDueAt: nextDueAt(t, deps.intervals, readAt),
          pushed: isPushed(t, readAt),
          readAt,
        })),
    );
  }
  return { readAt, due, claims };
}

export function createCycle(deps: CycleDeps): (opts?: { force?: boolean }) => Promise<CycleResult> {
  return async (opts = {}) => {
    const taken = opts.force
      ? { readAt: deps.now(), due: await deps.schedule.targets(), claims: [] }
      : await dueNow(deps);
    const { readAt, claims } = taken;
    const read = taken.due;
    // Starter/trial first, then the longest unread: a short budget stretches polls, starves none
    const due = fairOrder(deps.select ? deps.select(read, readAt) : read, readAt);
    const result: CycleResult = { targets: due.length, polled: 0, skipped: 0, failed: 0, hits: 0 };
    // the budget refused a poll: the rest of this tick would be refused too (and the order of
    // the next tick, which sees every unread target due, is the fair one)
    let refused = false;
    const count = (r: PollResult) => {
      if (r.busy) refused = true;
      if (r.outcome === 'skipped') result.skipped++;
      else if (r.outcome === 'error') result.failed++;
      else {
        result.polled++;
        result.hits += r.hits.length;
      }
    };
    const group = deps.groupPoll;
    const units: TargetState[][] = group ? chunks(due, GROUP_CHUNK) : due.map((t) => [t]);
    const pollUnit = group
      ? async (unit: TargetState[]) => {
          for (const r of (await group(unit, readAt)).values()) count(r);
        }
      : async (unit: TargetState[]) => count(await deps.poll(unit[0]!, { readAt }));
    const started = new Set<string>();
    try {
      await runPool(
        units,
        deps.concurrency,
        () => refused || deps.stopping(),
        async (unit) => {
          for (const t of unit) started.add(t.targetKey);
          await pollUnit(unit);
        },
      );
    } finally {
      // the selected targets this cycle never started stay due, in their place (a poll, or the
      // select's own reschedule, wrote the others' schedule)
      const selected = new Set(due.map((t) => t.targetKey));
      const unpolled = claims.filter((c) => selected.has(c.targetKey) && !started.has(c.targetKey));
      await deps.schedule.release(unpolled);
    }
    return result;
  };
}

/** Runs `work` over `units`, `concurrency` at a time; the first error ends the run and is thrown. */
async function runPool<T>(
  units: readonly T[],
  concurrency: number,
  stopping: () => boolean,
  work: (unit: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  let aborted: unknown;
  const worker = async () => {
    while (next < units.length && !stopping() && aborted === undefined) {
      try {
        await work(units[next++]!);
      } catch (err) {
        aborted = err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, units.length) }, worker));
  if (aborted !== undefined) throw aborted instanceof Error ? aborted : new Error(errorMessage(aborted));
}
