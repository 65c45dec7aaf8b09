/**
 * X `search` mode (and `stream` mode's ticks): due targets polled by batched search. Each chunk of
 * due targets takes their leases, packs the leased ones into `from:a OR from:b ...` queries of at
 * most X_QUERY_MAX_LENGTH characters (packFromQueries: ~20 targets a request), and runs each group
 * from the oldest position of its targets (since_id, with the overlap window behind it for
 * late-visible posts). Each target keeps its own position: it takes only its author's tweets not
 * behind that position's window, records its hits, events, position (the group's newest id) and
 * next due time in one transaction, exactly as a single-target poll does.
 */
import type { Logger } from '@sts/common';
import {
  MIN_QUERY_LENGTH,
  packFromQueries,
  SourceBusyError,
  upstreamRuleKey,
  upstreamRuleParts,
  withRuleParts,
  type QueryGroup,
  type SocialTweet,
  type XSource,
} from '@sts/social';
import { compileMonitors, type CompiledMonitor } from '../../domain/hits';
import { groupSinceId, tweetsForTarget } from '../../domain/groups';
import { isPushed, scheduleAfterPoll, type IntervalPolicy, type TargetState } from '../../domain/schedule';
import type { LeaseStore } from '../../adapters/lease';
import type { StoredCursor } from '../../domain/pipeline';
import type { Settle } from '../../poll/settle';
import type { HitWriter } from '../../adapters/hitWriter';
import type { ScheduleStore } from '../../adapters/scheduleStore';
import { errorMessage } from '@sts/core';
import { LeaseStoreError, SKIPPED, withTimeout, type GroupPoll, type PollResult } from '../../domain/pipeline';
import { advance, record, startOf } from '../../record/record';

export interface GroupPollDeps {
  schedule: Pick<ScheduleStore, 'monitorsFor'>;
  writer: HitWriter;
  source: XSource;
  leases: LeaseStore;
  logger: Logger;
  intervals: IntervalPolicy;
  /** X_QUERY_MAX_LENGTH */
  maxQueryLength: number;
  /** POLL_OVERLAP_SECONDS, in ms */
  overlapMs: number;
  pollTimeoutMs: number;
  now: () => Date;
  /** coverage, account look, metrics: after every target's poll */
  settle: Settle;
}

/** A leased target with what its poll needs. */
interface Leased {
  target: TargetState;
  token: string;
  stored: StoredCursor | null;
  monitors: CompiledMonitor[];
}

/** one target's share of a group search, recorded in one transaction */
async function recordShare(
  deps: GroupPollDeps,
  l: Leased,
  tweets: readonly SocialTweet[],
  newestId: string,
  readAt: Date,
): Promise<PollResult> {
  const key = l.target.targetKey;
  const { cursor, notBefore } = startOf(l.stored, l.monitors);
  const own = tweetsForTarget(key, tweets, cursor.position, notBefore, deps.overlapMs);
  const polledAt = deps.now();
  advance(cursor, { tweets: own, position: `x.${newestId}` });
  const schedule = scheduleAfterPoll(l.target, deps.intervals, polledAt, readAt);
  const hits = await record(deps.writer, {
    targetKey: key,
    tweets: own,
    monitors: l.monitors,
    cursor,
    polledAt,
    schedule,
  });
  return { outcome: 'ok', hits, position: cursor.position };
}

/**
 * A target's share of a failed group search: its error on the cursor and monitors. When the fleet's
 * budget refused the search (SourceBusyError) it is no poll, as poll.ts treats a single target:
 * last_polled_at stays, the target stays due and the tick takes no further group; when the budget
 * reopens every unread target is taken in fair order.
 */
async function recordProblem(deps: GroupPollDeps, l: Leased, err: unknown, readAt: Date): Promise<PollResult> {
  const message = (typeof err === 'string' ? err : errorMessage(err)).slice(0, 500);
  const refused = err instanceof SourceBusyError;
  const polledAt = deps.now();
  const schedule = scheduleAfterPoll(l.target, deps.intervals, polledAt, readAt);
  const key = l.target.targetKey;
  await (
    refused
      ? deps.writer.recordRefusal(key, message, { ...schedule, nextDueAt: polledAt })
      : deps.writer.recordFailure(key, message, polledAt, schedule)
  ).catch((e: unknown) => deps.logger.warn('could not record the poll failure', { err: errorMessage(e) }));
  return refused
    ? { outcome: 'error', hits: [], position: null, busy: true }
    : { outcome: 'error', hits: [], position: null };
}

function partition<T>(items: readonly T[], test: (item: T) => boolean): [T[], T[]] {
  const yes: T[] = [];
  const no: T[] = [];
  for (const item of items) (test(item) ? yes : no).push(item);
  return [yes, no];
}

/** reads each leased target's position and monitors; keeps those still due with a monitor */
async function prepare(deps: Pick<GroupPollDeps, 'schedule' | 'writer'>, taken: Leased[]): Promise<Leased[]> {
  const ready: Leased[] = [];
  for (const l of taken) {
    l.stored = await deps.writer.cursor(l.target.targetKey);
    const seen = l.target.lastPolledAt?.getTime() ?? -Infinity;
    if (l.stored?.lastPolledAt && l.stored.lastPolledAt.getTime() > seen) continue; // polled since
    l.monitors = compileMonitors(await deps.schedule.monitorsFor(l.target.targetKey));
    if (l.monitors.length > 0) ready.push(l);
  }
  return ready;
}

/**
 * Packs the targets into query groups of the same upstream rule parts (`-is:retweet`,
 * `-is:reply`, `-is:quote`, `lang:` only where no monitor of the target needs what they leave out,
 * see upstreamRuleParts), each `(from:a OR from:b ...) <parts>` within maxLength: the `from:` part
 * is packed with the parts' length reserved. Parts too long to leave room for one `from:` clause
 * are dropped (they only save reads: every rule is applied again to what comes back).
 */
function ruleGroups(targets: readonly Leased[], maxLength: number): QueryGroup[] {
  const byRule = new Map<string, { parts: string[]; usernames: string[] }>();
  for (const l of targets) {
    let parts = upstreamRuleParts(l.monitors);
    if (maxLength - withRuleParts('', parts).length < MIN_QUERY_LENGTH) parts = [];
    const key = upstreamRuleKey(parts);
    const entry = byRule.get(key) ?? { parts, usernames: [] };
    entry.usernames.push(l.target.username);
    byRule.set(key, entry);
  }
  const groups: QueryGroup[] = [];
  for (const { parts, usernames } of byRule.values()) {
    const reserved = withRuleParts('', parts).length;
    for (const g of packFromQueries(usernames, maxLength - reserved))
      groups.push({ query: withRuleParts(g.query, parts), usernames: g.usernames });
  }
  return groups;
}

export function createGroupPoll(deps: GroupPollDeps, inFlight: Set<string>): GroupPoll {
  const { leases, logger } = deps;

  /** takes the leases it can; a target leased elsewhere (or polled since it was read) is skipped */
  async function lease(targets: TargetState[]): Promise<Leased[]> {
    const taken: Leased[] = [];
    for (const target of targets) {
      const key = target.targetKey;
      if (inFlight.has(key)) continue;
      let token: string | null;
      try {
        token = await leases.acquire(key, deps.pollTimeoutMs * 2);
      } catch (err) {
        await release(taken);
        throw new LeaseStoreError(`lease store unavailable: ${errorMessage(err)}`);
      }
      if (!token) continue;
      inFlight.add(key);
      taken.push({ target, token, stored: null, monitors: [] });
    }
    return taken;
  }

  async function release(taken: Leased[]): Promise<void> {
    for (const l of taken) {
      inFlight.delete(l.target.targetKey);
      await leases.release(l.target.targetKey, l.token).catch(() => undefined);
    }
  }

  /** one group query for the leased targets of `group` */
  async function runGroup(
    group: QueryGroup,
    members: Leased[],
    readAt: Date,
    out: Map<string, PollResult>,
    priority: 'high' | 'low',
  ) {
    const notBefore = new Date(Math.min(...members.map((l) => startOf(l.stored, l.monitors).notBefore.getTime())));
    try {
      const result = await withTimeout(
        deps.source.searchGroup(group, {
          sinceId: groupSinceId(members.map((l) => l.stored?.position ?? null)),
          notBefore,
          firstPage: true,
          // X budget: Free-only groups leave a reserve to Starter/trial ones
          priority,
        }),
        deps.pollTimeoutMs,
        `the X search did not answer within ${deps.pollTimeoutMs} ms`,
      );
      if (result.truncated)
        logger.warn('group search truncated: its oldest new posts were not read', { query: group.query });
      for (const l of members) {
        const problem = result.problems.get(l.target.targetKey);
        out.set(
          l.target.targetKey,
          problem
            ? await recordProblem(deps, l, problem.message, readAt)
            : await recordShare(deps, l, result.tweets, result.newestId, readAt),
        );
      }
    } catch (err) {
      logger.warn('group poll failed', { query: group.query, err: errorMessage(err) });
      for (const l of members) out.set(l.target.targetKey, await recordProblem(deps, l, err, readAt));
    }
  }

  return async (targets, readAt) => {
    const out = new Map<string, PollResult>(targets.map((t) => [t.targetKey, SKIPPED]));
    const taken = await lease(targets);
    try {
      const ready = await prepare(deps, taken);
      const byKey = new Map(ready.map((l) => [l.target.targetKey, l]));
      // Starter/trial targets and Free-only ones in groups of their own, so the X budget can make
      // the Free-only queries wait (priority 'low') without holding back a paid target
      const [paid, freeOnly] = partition(ready, (l) => isPushed(l.target, readAt));
      for (const [share, priority] of [
        [paid, 'high'],
        [freeOnly, 'low'],
      ] as const) {
        for (const g of ruleGroups(share, deps.maxQueryLength)) {
          const members = g.usernames.map((u) => byKey.get(u.toLowerCase())!);
          await runGroup(g, members, readAt, out, priority);
        }
      }
    } finally {
      await release(taken);
    }
    for (const t of targets) await deps.settle(t, out.get(t.targetKey)!, 'poll');
    return out;
  };
}
