/**
 * The local store's push: the tweet trigger notifies "<xid> <target key>" after
 * commit; this wakes the poll of that target at once, when a Starter or trial account watches it
 * (Free-only targets keep their plan interval). Only the replica that takes the target's lease
 * polls; the others leave it to that one (a replica already polling the target keeps the
 * notification and polls once more after, so a tweet committed during a poll is not left to the
 * interval). Bursts coalesce: per target at most one push poll in flight and one follow-up,
 * whatever the number of notifications. A poll whose position is still below the tweet's
 * transaction (an older transaction was still open) retries after a short, growing delay, a
 * bounded number of times; the interval poll stays the safety net for anything missed.
 */
import type { Logger } from '@sts/common';
import { isPushed, parseTweetNotification, positionCovers } from '../../domain/schedule';
import type { ScheduleStore } from '../../adapters/scheduleStore';
import { errorMessage } from '@sts/core';
import type { TargetPoll } from '../../domain/pipeline';

export interface PushDeps {
  schedule: Pick<ScheduleStore, 'target'>;
  poll: TargetPoll;
  logger: Logger;
  now: () => Date;
  /** push polls this replica runs at once (default 8) */
  concurrency: number;
  /** targets being polled by this replica (cycle or push) */
  inFlight: ReadonlySet<string>;
  /** retries of a poll that did not reach the tweet's transaction yet (default 8; 25 ms doubling) */
  maxRetries?: number;
}

export interface Push {
  /** a notification payload of the tweet trigger */
  notify(payload: string): void;
  /** wakes one target for transaction `xid` */
  wake(targetKey: string, xid: bigint): void;
  /** takes wake-ups again after stop() */
  start(): void;
  /** stops taking wake-ups and waits for the push polls in flight */
  stop(): Promise<void>;
  /** push polls running or waiting (tests) */
  idle(): boolean;
}

interface Pending {
  xid: bigint;
  attempt: number;
}

export function createPush(deps: PushDeps): Push {
  const maxRetries = deps.maxRetries ?? 8;
  const pending = new Map<string, Pending>();
  const running = new Map<string, Promise<void>>();
  const timers = new Set<NodeJS.Timeout>();
  let stopped = false;

  function pump(): void {
    for (const [key, p] of pending) {
      if (stopped || running.size >= deps.concurrency) return;
      // a cycle is polling it: keep the wake-up until that poll ends (retried by the timer below)
      if (running.has(key)) continue;
      if (deps.inFlight.has(key)) {
        later(key, p, 25);
        pending.delete(key);
        continue;
      }
      pending.delete(key);
      const run = pollFor(key, p).finally(() => {
        running.delete(key);
        pump();
      });
      running.set(key, run);
    }
  }

  function later(key: string, p: Pending, ms: number): void {
    const t = setTimeout(() => {
      timers.delete(t);
      merge(key, p);
      pump();
    }, ms);
    timers.add(t);
  }

  function merge(key: string, p: Pending): void {
    const had = pending.get(key);
    pending.set(key, had ? { xid: had.xid > p.xid ? had.xid : p.xid, attempt: Math.min(had.attempt, p.attempt) } : p);
  }

  async function pollFor(key: string, p: Pending): Promise<void> {
    try {
      const readAt = deps.now();
      const target = await deps.schedule.target(key);
      if (!target || !isPushed(target, readAt)) return; // Free-only: its plan interval
      const result = await deps.poll(target, { push: true, readAt });
      // not polled here (another replica holds the lease and polls it) or failed: nothing to wait for
      if (result.outcome !== 'ok' || positionCovers(result.position, p.xid)) return;
      if (p.attempt < maxRetries) later(key, { xid: p.xid, attempt: p.attempt + 1 }, 25 * 2 ** p.attempt);
    } catch (err) {
      deps.logger.warn('push poll failed', { target: key, err: errorMessage(err) });
    }
  }

  return {
    notify(payload) {
      const n = parseTweetNotification(payload);
      if (!n)
        return void deps.logger.warn('ignored a malformed tweet notification', { payload: payload.slice(0, 200) });
      this.wake(n.targetKey, n.xid);
    },
    wake(targetKey, xid) {
      if (stopped) return;
      merge(targetKey, { xid, attempt: 0 });
      pump();
    },
    start() {
      stopped = false;
    },
    async stop() {
      stopped = true;
      for (const t of timers) clearTimeout(t);
      timers.clear();
      pending.clear();
      await Promise.allSettled([...running.values()]);
    },
    idle: () => pending.size === 0 && running.size === 0 && timers.size === 0,
  };
}
