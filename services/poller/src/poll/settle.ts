/**
 * What follows every poll, whichever way in (the tick, the push, X search): its coverage record
 * (a failed or refused poll opens a gap: gaps.ts), the account look it asks for, and its metrics.
 * One step, called once per target at the end of its poll (poll.ts, search.ts), skipped polls too.
 */
import type { Logger } from '@sts/common';
import { isUnavailable } from '../domain/profiles';
import type { NewHit, PollOutcome, PollResult } from '../domain/pipeline';
import type { TargetState } from '../domain/schedule';
import { noteMiss, type CoverageRepository } from '../gaps/gaps';

export interface PollerMetrics {
  polls(outcome: PollOutcome): void;
  hits(count: number): void;
  /** new hits of a poll, and whether a committed tweet woke it */
  detected?(hits: readonly NewHit[], how: 'push' | 'poll'): void;
}

/** the local store's profile watch or X's account lookup */
interface Looks {
  look(targetKey: string): void;
}

export interface SettleDeps {
  logger: Logger;
  /** the coverage record (absent: none kept) */
  coverage?: CoverageRepository;
  looks?: Looks;
  metrics?: PollerMetrics;
}

export type Settle = (target: TargetState, result: PollResult, how: 'push' | 'poll') => Promise<void>;

/**
 * Whether a poll asks for a look at the target's account: a target never looked at, an
 * unavailable one (is it back?) or one whose poll failed (gone? a refusal of the budget tells nothing).
 */
function wantsLook(target: TargetState, result: PollResult): boolean {
  if (result.outcome === 'skipped' || result.busy) return false;
  const unknown = target.targetStatus === null || target.targetStatus === undefined;
  return unknown || isUnavailable(target.targetStatus) || result.outcome === 'error';
}

export function createSettle(deps: SettleDeps): Settle {
  const { coverage, looks, metrics, logger } = deps;
  return async (target, result, how) => {
    if (coverage) await noteMiss(coverage, logger, target.targetKey, result);
    if (looks && wantsLook(target, result)) looks.look(target.targetKey);
    if (result.outcome === 'ok') {
      metrics?.hits(result.hits.length);
      if (result.hits.length > 0) metrics?.detected?.(result.hits, how);
    }
    metrics?.polls(result.outcome);
  };
}
