/** A monitor's delivery log and hit history, read newest first in keyset pages. */
import type { HitRow } from '@sts/db';
import type { CursorPosition } from '../cursor';
import type { DeliveryView } from '../types';

/** an attempt as logged (its URL unmasked) */
export type AttemptRecord = DeliveryView;

interface AttemptDetailRecord {
  /** [name, value] pairs as stored (jsonb); null when not kept */
  requestHeaders: unknown;
  requestBody: string | null;
  responseHeaders: unknown;
  responseBody: Uint8Array | null;
}

export interface LogsRepository {
  /**
   * up to `take` attempts of the monitor strictly older than `after` in (createdAt desc, id desc),
   * none created before `since` (the plan's window)
   */
  attempts(monitorId: string, after: CursorPosition | undefined, take: number, since: Date): Promise<AttemptRecord[]>;
  /** the attempt when its monitor belongs to the account */
  findAttempt(
    accountId: string,
    attemptId: string,
  ): Promise<(AttemptRecord & { monitorId: string; accountId: string }) | null>;
  attemptDetail(attemptId: string): Promise<AttemptDetailRecord>;
  /** the detail of several attempts in one read, by attempt id */
  attemptDetails(attemptIds: string[]): Promise<Map<string, AttemptDetailRecord>>;
  ownerOfAttempt(attemptId: string): Promise<string | null>;
  /**
   * The latest attempt of each event delivery of the monitor (not test pings) with an attempt of
   * one of `outcomes` in [since, until], when that latest one still has one of `outcomes` and its
   * hit or event still exists: oldest first, at most `max`, with how many there are in all.
   */
  recoverableDeliveries(
    monitorId: string,
    window: { since: Date; until: Date | null; outcomes: readonly string[] },
    max: number,
    /** deliveries with a redelivery pending since after this are left out (one is on its way) */
    pendingAfter: Date,
  ): Promise<{ attempts: { id: string; deliveryId: string }[]; total: number }>;
  /**
   * Marks redeliveries of these deliveries pending, at `now`; resolves with the ones this call
   * marked: not pending already, or pending since before `pendingAfter` (lost). Concurrent calls
   * never both mark one delivery.
   */
  claimRedeliveries(
    accountId: string,
    monitorId: string,
    deliveryIds: string[],
    now: Date,
    pendingAfter: Date,
  ): Promise<string[]>;
  /** drops pending marks (their redeliveries could not be queued) */
  releaseRedeliveries(deliveryIds: string[]): Promise<void>;
  /**
   * up to `take` hits strictly older than `after` in (detectedAt desc, id desc), none of a post
   * created before `since` (the plan's window)
   */
  hits(monitorId: string, after: CursorPosition | undefined, take: number, since: Date): Promise<HitRow[]>;
  /** whether the hit is still stored (hits are dropped by week after retention) */
  hitExists(hitId: string): Promise<boolean>;
  /** the newest hit, with its place in the monitor's sequence (null: recorded before events were numbered) */
  latestHit(monitorId: string): Promise<(HitRow & { sequence?: bigint | null }) | null>;
}
