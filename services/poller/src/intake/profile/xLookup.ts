/**
 * X's account lookup: X pushes no profile change, so every `everyMs` one replica
 * (a Redis lease) looks the watched accounts up in batches of 100 (`lookupAccounts`: by id when a
 * profile was seen, so a rename is followed; by name for a first look), each target at its plan's
 * interval (`dueForLookup`), and records each answer like a local-store look (`record`: profile
 * changes, target_status, events, mail; an unavailable target's polls back off, one back is polled
 * at once). The calls are `users` calls of the fleet's budget; a refused round is retried next period.
 * `look(target)` asks for a target's look at the next round, soon (a poll failed on the account).
 * `leavesFirstLook(target)`: a target whose first look another path makes (the X stream's backfill
 * looks new targets up anyway, stream/recentCheck.ts) is left out of the rounds until then; the
 * other path records its answers through `recordLooks` like a round's.
 */
import type { Logger } from '@sts/common';
import { errorMessage } from '@sts/core';
import { answerFor, type XAccounts, type XAccountState, type XSource } from '@sts/social';
import type { ProfileRepository } from '../../adapters/profiles';
import type { LeaseStore } from '../../adapters/lease';
import { profileOf, type Sighting } from '../../domain/profiles';
import { dueForLookup, type IntervalPolicy, type LookupTarget } from '../../domain/schedule';

export interface XProfileLookup {
  /** looks at the target at the next round, which starts soon */
  look(targetKey: string): void;
  start(): void;
  /** waits for the round in flight */
  stop(): Promise<void>;
  /** one round now: looks at the due targets (and those asked for); how many were looked at */
  run(): Promise<number>;
  /** no round running (tests) */
  idle(): boolean;
}

export interface XProfileLookupDeps {
  source: Pick<XSource, 'lookupAccounts'>;
  repository: Pick<ProfileRepository, 'record' | 'lookupTargets'>;
  leases: LeaseStore;
  logger: Logger;
  intervals: IntervalPolicy;
  now: () => Date;
  /** how often a round runs (default 15 s); targets due within half a period share its batch */
  everyMs?: number;
  /** how soon a round runs after `look()` (default 250 ms), so looks asked together share a batch */
  lookDelayMs?: number;
  /** a never-looked-at target that another path looks at first (not looked at here while true) */
  leavesFirstLook?: (target: LookupTarget, now: Date) => boolean;
}

/** the round's lease (no target is named so: usernames have no '~') */
const ROUND_LEASE = '~x-profile-lookup';

/** X's answer as the comparison's input */
function sightingOf(state: XAccountState | undefined): Sighting {
  if (!state || state.status === 'not_found') return null;
  if (state.status === 'suspended') return { profile: null, state: 'suspended' };
  return { profile: profileOf(state.user), state: state.status };
}

/** a target of a lookup: looked up by its account id when known (a rename is followed), else by name */
type Looked = Pick<LookupTarget, 'targetKey' | 'userId'>;

/** looks recorded at a time (each its own transaction, under its target's lock) */
const RECORD_CONCURRENCY = 4;

/**
 * Each target's answer through the comparison (profile changes, target_status, events), as a
 * round's look, a few targets at a time; a target that fails is logged, the others recorded.
 */
export async function recordLooks(
  deps: { repository: Pick<ProfileRepository, 'record'>; logger: Logger },
  targets: readonly Looked[],
  found: XAccounts,
  at: Date,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < targets.length) {
      const t = targets[next++]!;
      try {
        await deps.repository.record(t.targetKey, sightingOf(answerFor(t, found)), at);
      } catch (err) {
        deps.logger.warn('account look could not be recorded', { target: t.targetKey, err: errorMessage(err) });
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(RECORD_CONCURRENCY, targets.length) }, worker));
}

/**
 * One round: the due targets and those asked for, looked up in batches and recorded. A round takes
 * the targets due before the next round's midpoint (half a period ahead): each look comes at most
 * half a period early or late, so a target is looked at once per plan interval on average. A whole
 * period ahead, a target looked at would be due again one round early every time (every 45 s for
 * a 60 s plan and 15 s rounds: a third more user reads, each one billed).
 */
async function round(deps: XProfileLookupDeps, everyMs: number, asked: ReadonlySet<string>): Promise<number> {
  const all = await deps.repository.lookupTargets();
  const now = deps.now();
  const left = deps.leavesFirstLook;
  const due = dueForLookup(all, deps.intervals, now, everyMs / 2).filter(
    (t) => !(left && t.checkedAt === null && left(t, now)),
  );
  const targets = [...due, ...all.filter((t) => asked.has(t.targetKey) && !due.includes(t))];
  if (targets.length === 0) return 0;
  const found = await deps.source.lookupAccounts({
    ids: targets.flatMap((t) => (t.userId ? [t.userId] : [])),
    usernames: targets.flatMap((t) => (t.userId ? [] : [t.targetKey])),
  });
  await recordLooks(deps, targets, found, deps.now());
  return targets.length;
}

/** a round under the fleet's lease; another replica holding it: none here (0) */
async function leasedRound(deps: XProfileLookupDeps, everyMs: number, asked: ReadonlySet<string>): Promise<number> {
  const token = await deps.leases.acquire(ROUND_LEASE, Math.max(everyMs * 2, 60_000));
  if (!token) return 0;
  try {
    return await round(deps, everyMs, asked);
  } finally {
    await deps.leases.release(ROUND_LEASE, token).catch(() => undefined);
  }
}

export function createXProfileLookup(deps: XProfileLookupDeps): XProfileLookup {
  const everyMs = deps.everyMs ?? 15_000;
  const wanted = new Set<string>();
  let running: Promise<number> | null = null;
  let timer: NodeJS.Timeout | null = null;
  let soon: NodeJS.Timeout | null = null;
  let stopped = true;

  /** a failed round keeps the targets asked for (next period); a round another replica holds drops them */
  async function once(): Promise<number> {
    const asked = new Set(wanted);
    const n = await leasedRound(deps, everyMs, asked);
    for (const k of asked) wanted.delete(k);
    return n;
  }

  /** a round soon, for the targets asked for */
  function soonRound(): void {
    if (stopped || soon) return;
    soon = setTimeout(() => {
      soon = null;
      void run();
    }, deps.lookDelayMs ?? 250);
  }

  function run(): Promise<number> {
    running ??= once()
      .then((n) => {
        running = null;
        // asked for while this round ran
        if (wanted.size > 0) soonRound();
        return n;
      })
      .catch((err: unknown) => {
        running = null;
        deps.logger.warn('X account lookup failed (retried next round)', { err: errorMessage(err) });
        return 0;
      });
    return running;
  }

  return {
    look(targetKey) {
      wanted.add(targetKey);
      soonRound();
    },
    start() {
      stopped = false;
      timer ??= setInterval(() => void run(), everyMs);
      void run();
    },
    async stop() {
      stopped = true;
      if (timer) clearInterval(timer);
      if (soon) clearTimeout(soon);
      timer = soon = null;
      await running;
    },
    run,
    idle: () => running === null,
  };
}
