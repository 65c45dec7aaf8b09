/**
 * The source failing, told from the accounts failing. No I/O.
 *
 * A watched account the source reports unavailable (suspended, protected, not found) is a
 * suspect first, not marked: it is marked once it has stayed unavailable for the window
 * (TARGET_FLAP_WINDOW_SEC) while the source looks healthy. The source looks failing when more
 * than TARGET_FLAP_SHARE percent of its watched accounts are open suspects at once (and at least
 * TARGET_FLAP_MIN of them: a few accounts of a small source are just accounts): then none is
 * marked, no event or mail goes out, and each is looked at again later. A suspect seen available
 * again stops being one. A target already unavailable that changes to another unavailable status
 * is no turn and is marked as usual.
 */
import { isUnavailable } from './profiles';
import type { TargetStatus } from '@sts/messaging';

export interface FlapPolicy {
  /** percent of the source's watched accounts (TARGET_FLAP_SHARE) */
  sharePercent: number;
  /** how long a suspect stays one before it is marked (TARGET_FLAP_WINDOW_SEC) */
  windowMs: number;
  /** the fewest open suspects that can be the source failing (TARGET_FLAP_MIN) */
  minTargets: number;
}

/** while the source looks failing, its suspects are looked at again this many windows later */
const FAILING_RECHECK_WINDOWS = 5;

export type FlapVerdict =
  /** mark it: the change is told (status, events, mail) */
  | { kind: 'mark' }
  /** a suspect within its window: not marked yet, looked at again at `recheckAt` */
  | { kind: 'pending'; recheckAt: Date }
  /** too many of the source's accounts turned at once: not marked, looked at again at `recheckAt` */
  | { kind: 'source_failing'; recheckAt: Date };

/** whether a look from `previous` to `status` turns an available target unavailable */
export function turnsUnavailable(previous: TargetStatus, status: TargetStatus): boolean {
  return isUnavailable(status) && !isUnavailable(previous);
}

/** more than the share of the watched accounts, and at least the minimum, are open suspects */
export function sourceFailing(policy: FlapPolicy, openSuspects: number, watched: number): boolean {
  return openSuspects >= policy.minTargets && openSuspects * 100 > policy.sharePercent * watched;
}

/**
 * The verdict on a target that turned unavailable: `openSuspects` counts the source's open
 * suspects with this one, `watched` the source's watched accounts, `firstSeenAt` when this one
 * was first reported unavailable.
 */
export function judgeTurn(
  policy: FlapPolicy,
  s: { openSuspects: number; watched: number; firstSeenAt: Date; now: Date },
): FlapVerdict {
  const now = s.now.getTime();
  if (sourceFailing(policy, s.openSuspects, s.watched))
    return { kind: 'source_failing', recheckAt: new Date(now + policy.windowMs * FAILING_RECHECK_WINDOWS) };
  const due = s.firstSeenAt.getTime() + policy.windowMs;
  if (now < due) return { kind: 'pending', recheckAt: new Date(due) };
  return { kind: 'mark' };
}
