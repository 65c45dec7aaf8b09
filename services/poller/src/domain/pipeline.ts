/**
 * The contracts between the poller's steps. Four ways in (src/intake/: the tick, the local
 * store's push, X search, the X stream) decide what is read when; a target's poll (src/poll/) or
 * a group search reads it; one step records what was read (src/record/: hits, events, cursor,
 * schedule); the outbox relay (src/relay/) publishes the events. An intake imports none of the
 * others: the composition (poller.ts, main.ts) hands each what it calls.
 */
import type { HitRow } from '@sts/db';
import type { MonitorHitEvent } from '@sts/messaging';
import type { ReadTime, TargetState } from './schedule';

/** the channel a hit's commit notifies, waking the outbox relay */
export const OUTBOX_CHANNEL = 'sts_outbox';

/**
 * Hits (and their events) per transaction: a post to a target of 20,000 watchers is 20 short
 * transactions, each well inside the transaction timeout, instead of one that grows with them.
 */
export const HIT_CHUNK = 1000;

/** A hit to record: the hit row (without its generated id) plus what the insert and its event need. */
export interface NewHit extends Omit<HitRow, 'id'> {
  accountId: string;
  tweetAuthorId: string;
  event: MonitorHitEvent;
}

export interface CursorState {
  /** newest tweet (by id) examined; informational */
  lastTweetId: string | null;
  lastTweetAt: Date | null;
  /** the source's poll position: where the next poll starts */
  position: string | null;
}

export interface StoredCursor extends CursorState {
  lastPolledAt: Date | null;
}

export type PollOutcome = 'ok' | 'error' | 'skipped';

/** What a poll did: its outcome, the new hits and the position it ended at (null when it read nothing). */
export interface PollResult {
  outcome: PollOutcome;
  hits: NewHit[];
  position: string | null;
  /** refused by the fleet's budget (SourceBusyError): the tick takes no further target */
  busy?: true;
}

export const SKIPPED: PollResult = { outcome: 'skipped', hits: [], position: null };

interface PollOptions {
  /** woken by a committed tweet: polls even when another replica polled since `target` was read */
  push?: boolean;
  /** when `target` was read (default: now); a monitor or plan change stamped later re-evaluates it at once */
  readAt?: Date;
}

/** One target's poll under its lease (src/poll/poll.ts): what the tick and the push call. */
export type TargetPoll = (target: TargetState, opts?: PollOptions) => Promise<PollResult>;

/** X search: a chunk of due targets polled by batched search (src/intake/search/), what the tick calls instead. */
export type GroupPoll = (targets: TargetState[], readAt: ReadTime) => Promise<Map<string, PollResult>>;

/** Redis did not answer: the cycle ends (once, not once per target) and the next tick retries. */
export class LeaseStoreError extends Error {
  override name = 'LeaseStoreError';
}

class PollTimeout extends Error {
  override name = 'PollTimeout';
}

/** `p`, or a PollTimeout with `message` after `ms` */
export function withTimeout<T>(p: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new PollTimeout(message)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

export function pollTimeout(ms: number): Error {
  return new PollTimeout(`poll took longer than ${ms} ms`);
}
