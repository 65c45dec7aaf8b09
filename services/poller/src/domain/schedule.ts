/**
 * Which targets are due and where a target's poll starts. No I/O.
 *
 * A target's interval comes from the plans of the accounts watching it: the shortest among them
 * (an account on an active trial counts as Starter). POLL_INTERVAL_SECONDS overrides the plans.
 */
import { effectivePlan, type PlanLimits, type PlanName } from '@sts/core';
import type { TargetStatus } from '@sts/messaging';
import type { WatchingAccount } from '@sts/db';
import { backedOffInterval, isUnavailable } from './profiles';

export interface TargetState {
  /** lower-cased username, what monitors are grouped by */
  targetKey: string;
  /** the username as a monitor spelled it, for the source */
  username: string;
  /** the distinct plans (with trial end) of the accounts whose active monitors watch the target */
  accounts: WatchingAccount[];
  lastPolledAt: Date | null;
  /** the last poll that was recorded (a failed or refused poll moves lastPolledAt only); absent: unknown */
  lastSuccessAt?: Date | null;
  /** the watched account's health (target_profiles); null: never looked at; absent: unknown */
  targetStatus?: TargetStatus | null;
}

export interface IntervalPolicy {
  /** plansFromEnv(env), or just each plan's poll interval */
  plans: Record<PlanName, Pick<PlanLimits, 'pollIntervalSec'>>;
  /** POLL_INTERVAL_SECONDS: overrides the plans when set */
  overrideSec?: number | undefined;
}

/**
 * Seconds between two polls of the target: the shortest plan interval among its accounts, backed
 * off while the watched account is unavailable (suspended, protected, not found).
 */
export function intervalFor(target: TargetState, policy: IntervalPolicy, now: Date): number {
  const sec = planInterval(target, policy, now);
  return isUnavailable(target.targetStatus) ? backedOffInterval(sec) : sec;
}

function planInterval(target: TargetState, policy: IntervalPolicy, now: Date): number {
  if (policy.overrideSec !== undefined) return policy.overrideSec;
  let best = Infinity;
  for (const account of target.accounts) {
    best = Math.min(best, policy.plans[effectivePlan(account, now)].pollIntervalSec);
  }
  // no account (cannot happen for a target of active monitors): the slowest plan
  return Number.isFinite(best)
    ? best
    : Math.max(policy.plans.free.pollIntervalSec, policy.plans.starter.pollIntervalSec);
}

/** A target of the account lookup (X): its plans, the account id last seen and when it was looked at. */
export interface LookupTarget extends TargetState {
  /** the account id of the last profile seen (null: never found) */
  userId: string | null;
  /** the last look (null: never) */
  checkedAt: Date | null;
  /** creation of the target's oldest active monitor */
  firstMonitorAt: Date;
}

/**
 * Targets whose account is due a look: its plan interval (never backed off: the look is what tells
 * an unavailable account is back) has passed since the last look, or passes within `aheadMs` (half
 * the lookup's period), so targets due close together share one batch instead of one call each.
 */
export function dueForLookup(
  targets: readonly LookupTarget[],
  policy: IntervalPolicy,
  now: Date,
  aheadMs: number,
): LookupTarget[] {
  const horizon = now.getTime() + aheadMs;
  return targets.filter(
    (t) => t.checkedAt === null || t.checkedAt.getTime() + planInterval(t, policy, now) * 1000 <= horizon,
  );
}

/** Targets whose interval has passed since their last poll (never polled: due at once). */
export function dueTargets(targets: readonly TargetState[], policy: IntervalPolicy, now: Date): TargetState[] {
  return targets.filter(
    (t) => t.lastPolledAt === null || t.lastPolledAt.getTime() + intervalFor(t, policy, now) * 1000 <= now.getTime(),
  );
}

/**
 * The poll's notBefore: the creation of the target's oldest active monitor (epoch when none).
 * Sources start a target without a position there and never return older tweets, so a target never
 * polled starts where its oldest monitor was created (nothing posted after it is missed, nothing
 * before it fires), and a stale position (all monitors removed, then a new one) does not page
 * through tweets no monitor could match. For X a time is a since_id (`snowflakeBefore`).
 */
export function oldestCreation(monitorsCreatedAt: readonly Date[]): Date {
  let oldest = Infinity;
  for (const d of monitorsCreatedAt) oldest = Math.min(oldest, d.getTime());
  return new Date(Number.isFinite(oldest) ? oldest : 0);
}

/**
 * The order a tick polls its due targets in, so that a short budget (the X governor refusing
 * calls) stretches polls fairly instead of starving some targets: Starter/trial targets before
 * Free-only ones, and within each the one read successfully longest ago first (never read first).
 * A refused poll does not count as a read, so the targets it left out come first next time: every
 * target is read once before any is read twice.
 */
export function fairOrder(targets: readonly TargetState[], now: Date): TargetState[] {
  const success = (t: TargetState) => t.lastSuccessAt?.getTime() ?? -Infinity;
  return targets
    .map((t) => ({ t, paid: isPushed(t, now) ? 0 : 1, at: success(t) }))
    .sort((a, b) => a.paid - b.paid || a.at - b.at || (a.t.targetKey < b.t.targetKey ? -1 : 1))
    .map((x) => x.t);
}

/** A target is pushed (a committed local tweet wakes its poll) when a Starter or trial account watches it. */
export function isPushed(target: Pick<TargetState, 'accounts'>, now: Date): boolean {
  return target.accounts.some((a) => effectivePlan(a, now) !== 'free');
}

/** When the target is next due: its last poll (or `now` when never polled) plus its interval. */
export function nextDueAt(target: TargetState, policy: IntervalPolicy, now: Date): Date {
  const from = target.lastPolledAt ?? now;
  return new Date(from.getTime() + intervalFor(target, policy, now) * 1000);
}

/**
 * When the poller read a target's state. A tick's read time comes from PostgreSQL's own clock (the
 * due query's `clock_timestamp()`), the clock the triggers stamp `changed_at` / `next_due_at`
 * with, and carries its microseconds in `exact` (a Date holds milliseconds): the schedule writes
 * compare that with the stamps, so a change is either read by the tick or after it, never both.
 * A plain Date (pushes, forced cycles: the JS clock) compares at its millisecond, where a change
 * stamped in the same millisecond counts as after the read (re-evaluated: the safe side).
 */
export type ReadTime = Date & { readonly exact?: string };

/** a read time for SQL: PostgreSQL's exact one when the tick has it */
export function pgTime(readAt: ReadTime): string {
  return readAt.exact ?? readAt.toISOString();
}

/** What the poller writes into a target's schedule row after a poll or a re-evaluation. */
export interface ScheduleWrite {
  nextDueAt: Date;
  pushed: boolean;
  /** when the poller read the target's state: a change stamped later makes the target due at once */
  readAt: ReadTime;
}

/** The schedule after polling `target` at `polledAt`. */
export function scheduleAfterPoll(
  target: TargetState,
  policy: IntervalPolicy,
  polledAt: Date,
  readAt: ReadTime,
): ScheduleWrite {
  return {
    nextDueAt: new Date(polledAt.getTime() + intervalFor(target, policy, polledAt) * 1000),
    pushed: isPushed(target, polledAt),
    readAt,
  };
}

/**
 * Whether a local poll position ("l.<xid>.<id>") has read every tweet of transaction `xid`: the
 * position's transaction is at or past it. Other providers' positions (and none) say nothing about
 * local transactions: true, the push has nothing to wait for.
 */
export function positionCovers(position: string | null, xid: bigint): boolean {
  if (position === null || !position.startsWith('l.')) return position === null ? false : true;
  const [px] = position.slice(2).split('.');
  if (px === undefined || !/^[0-9]{1,20}$/.test(px)) return false;
  return BigInt(px) >= xid;
}

/** A notification of the local store's tweet trigger: "<xid> <target key>"; null when malformed. */
export function parseTweetNotification(payload: string): { xid: bigint; targetKey: string } | null {
  const m = /^([0-9]{1,20}) (\S{1,100})$/.exec(payload);
  if (!m) return null;
  return { xid: BigInt(m[1]!), targetKey: m[2]! };
}
