/**
 * One poll cycle: reads the due targets from the schedule (poll_targets.next_due_at, indexed: a
 * tick with nothing due reads nothing), re-evaluates them (a monitor or plan change makes a target
 * due at once so its interval is computed again: one not due yet is rescheduled, not polled) and
 * polls the due ones, `concurrency` at a time. A forced cycle polls every target.
 */
import { dueTargets, isPushed, nextDueAt, type IntervalPolicy, type TargetState } from './domain/schedule';
import type { PollerRepository } from './adapters/repository';
import type { PollOutcome, TargetPoll } from './poll';
import { errorMessage } from './poll';

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
  repository: PollerRepository;
  intervals: IntervalPolicy;
  concurrency: number;
  now: () => Date;
  poll: TargetPoll;
  /** stops taking targets (the poller is stopping) */
  stopping: () => boolean;
  /** a poll's outcome and its new hits */
  onPolled: (outcome: PollOutcome, result: Awaited<ReturnType<TargetPoll>>) => void;
  /** which targets a tick polls among the due ones (X stream mode leaves the streamed ones); default all */
  select?: (due: TargetState[]) => TargetState[];
}

/** Reads the candidates and reschedules the ones that are not due; returns the due ones. */
async function dueNow(deps: CycleDeps, readAt: Date): Promise<TargetState[]> {
  const candidates = await deps.repository.dueTargets(readAt);
  const due = dueTargets(candidates, deps.intervals, readAt);
  if (due.length < candidates.length) {
    const dueKeys = new Set(due.map((t) => t.targetKey));
    await deps.repository.reschedule(
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
  return due;
}

export function createCycle(deps: CycleDeps): (opts?: { force?: boolean }) => Promise<CycleResult> {
  return async (opts = {}) => {
    const readAt = deps.now();
    const read = opts.force ? await deps.repository.targets() : await dueNow(deps, readAt);
    const due = deps.select ? deps.select(read) : read;
    const result: CycleResult = { targets: due.length, polled: 0, skipped: 0, failed: 0, hits: 0 };
    let next = 0;
    let aborted: unknown;
    const worker = async () => {
      while (next < due.length && !deps.stopping() && aborted === undefined) {
        const target = due[next++]!;
        let r: Awaited<ReturnType<TargetPoll>>;
        try {
          r = await deps.poll(target, { readAt });
        } catch (err) {
          aborted = err;
          return;
        }
        if (r.outcome === 'skipped') result.skipped++;
        else if (r.outcome === 'error') result.failed++;
        else {
          result.polled++;
          result.hits += r.hits.length;
        }
        deps.onPolled(r.outcome, r);
      }
    };
    await Promise.all(Array.from({ length: Math.min(deps.concurrency, due.length) }, worker));
    if (aborted !== undefined) throw aborted instanceof Error ? aborted : new Error(errorMessage(aborted));
    return result;
  };
}
