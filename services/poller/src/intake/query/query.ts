/**
 * The local store's query monitors: every committed tweet is matched at once against every active
 * query monitor, the way a pushed target's tweets are (src/intake/push). While an active query
 * monitor exists, the tweet trigger also notifies "q <xid>" on the tweets channel (migration
 * 20261126040000_query_monitors); a wake-up reads every author's tweets after the query cursor
 * (poll_cursors row QUERY_CURSOR_KEY, the monitors' last check), in the store's poll order, and
 * records each page through the shared record step (src/record): hits with their monitor.hit
 * events in the same transactions as a target's, the cursor moved with the last chunk, so a
 * crash re-reads the page and records the rest, nothing twice.
 *
 * Runs are serialised in this replica (one at a time, wake-ups during a run fold into one more);
 * a run whose position is still below the woken transaction (an older one was still open) runs
 * again after a short, growing delay, a bounded number of times, and a run every `intervalMs`
 * is the safety net for a lost notification. Replicas may run at the same time: the hit key and
 * the forward-only cursor make that harmless (work done twice, nothing recorded twice).
 * Every plan's query monitors are matched at once (there is no interval to keep to: the match
 * costs no upstream read).
 */
import type { Logger } from '@sts/common';
import { errorMessage } from '@sts/core';
import { QUERY_CURSOR_KEY } from '@sts/db';
import type { PollPage, PollRequest } from '@sts/social';
import type { NewHit } from '../../domain/pipeline';
import type { HitWriter } from '../../adapters/hitWriter';
import type { ScheduleStore } from '../../adapters/scheduleStore';
import { compileMonitors } from '../../domain/hits';
import { positionCovers } from '../../domain/schedule';
import { advance, record, startOf } from '../../record/record';

export interface QueryIntakeDeps {
  schedule: Pick<ScheduleStore, 'queryMonitors'>;
  writer: Pick<HitWriter, 'cursor' | 'recordBatch'>;
  source: { pollAllTweets(request: PollRequest): Promise<PollPage> };
  logger: Logger;
  now: () => Date;
  /** tweets per source call (POLL_BATCH_SIZE) */
  batchSize: number;
  /** the safety net's period (default 5 s) */
  intervalMs?: number;
  /** runs again of a run that did not reach the woken transaction (default 8; 25 ms doubling) */
  maxRetries?: number;
  /** the new hits of each run */
  onHits?: (hits: readonly NewHit[]) => void;
}

export interface QueryIntake {
  /** a notification payload of the tweet trigger ("q <xid>"; others are not this intake's) */
  notify(payload: string): void;
  /** a run for transaction `xid` */
  wake(xid: bigint): void;
  start(): void;
  /** stops taking wake-ups and waits for the run in flight */
  stop(): Promise<void>;
  /** one run now (tests): the new hits, and the position reached (null: no active query monitor) */
  runOnce(): Promise<{ hits: NewHit[]; position: string | null }>;
  idle(): boolean;
}

const NOTIFICATION = /^q ([0-9]{1,20})$/;

/** A query-intake notification of the tweet trigger: its xid, or null when the payload is not one. */
function parseQueryNotification(payload: string): bigint | null {
  const m = NOTIFICATION.exec(payload);
  return m ? BigInt(m[1]!) : null;
}

/** One run: every page after the query cursor, matched and recorded; the position reached. */
async function runQueries(deps: QueryIntakeDeps): Promise<{ hits: NewHit[]; position: string | null }> {
  const monitors = compileMonitors(await deps.schedule.queryMonitors());
  if (monitors.length === 0) return { hits: [], position: null };
  const { cursor, notBefore } = startOf(await deps.writer.cursor(QUERY_CURSOR_KEY), monitors);
  const hits: NewHit[] = [];
  for (let first = true; ; first = false) {
    const polledAt = deps.now();
    const page = await deps.source.pollAllTweets({
      position: cursor.position,
      notBefore,
      limit: deps.batchSize,
      firstPage: first,
    });
    advance(cursor, page);
    const batch = { targetKey: QUERY_CURSOR_KEY, tweets: page.tweets, monitors, cursor: { ...cursor }, polledAt };
    hits.push(...(await record(deps.writer, batch)));
    if (!page.more) return { hits, position: cursor.position };
  }
}

export function createQueryIntake(deps: QueryIntakeDeps): QueryIntake {
  const maxRetries = deps.maxRetries ?? 8;
  let wanted: { xid: bigint; attempt: number } | null = null;
  let running: Promise<void> | null = null;
  const timers = new Set<NodeJS.Timeout>();
  let safetyNet: NodeJS.Timeout | undefined;
  let stopped = false;

  function want(xid: bigint, attempt: number): void {
    wanted = wanted
      ? { xid: wanted.xid > xid ? wanted.xid : xid, attempt: Math.min(wanted.attempt, attempt) }
      : { xid, attempt };
  }

  function pump(): void {
    if (stopped || running || !wanted) return;
    const w = wanted;
    wanted = null;
    running = runFor(w).finally(() => {
      running = null;
      pump();
    });
  }

  async function runFor(w: { xid: bigint; attempt: number }): Promise<void> {
    try {
      const { hits, position } = await runQueries(deps);
      if (hits.length > 0) deps.onHits?.(hits);
      if (position === null || positionCovers(position, w.xid) || w.attempt >= maxRetries) return;
      const t = setTimeout(
        () => {
          timers.delete(t);
          want(w.xid, w.attempt + 1);
          pump();
        },
        25 * 2 ** w.attempt,
      );
      timers.add(t);
    } catch (err) {
      deps.logger.warn('query intake run failed', { err: errorMessage(err) });
    }
  }

  return {
    notify(payload) {
      const xid = parseQueryNotification(payload);
      if (xid === null)
        return void deps.logger.warn('ignored a malformed query notification', { payload: payload.slice(0, 200) });
      this.wake(xid);
    },
    wake(xid) {
      if (stopped) return;
      want(xid, 0);
      pump();
    },
    start() {
      stopped = false;
      safetyNet ??= setInterval(() => this.wake(0n), deps.intervalMs ?? 5000);
      safetyNet.unref();
    },
    async stop() {
      stopped = true;
      clearInterval(safetyNet);
      safetyNet = undefined;
      for (const t of timers) clearTimeout(t);
      timers.clear();
      wanted = null;
      await running;
    },
    runOnce: () => runQueries(deps),
    idle: () => wanted === null && running === null && timers.size === 0,
  };
}
