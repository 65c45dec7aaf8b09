/**
 * Events held while an endpoint is disabled (pure rules). When endpoint health disabled a
 * webhook (health.ts), its new events are not logged as skipped: they are held in PostgreSQL
 * (adapters/holding.ts) and sent oldest first when it is enabled again (hold.ts). While a hold is
 * not empty, new events queue behind it, so the endpoint receives them in the order they came.
 * A hold is bounded in age and size; past a bound the oldest are dropped and logged as skipped.
 * The size bound also holds for a webhook's deliveries waiting for a retry or a fifo turn.
 * Whether an event is held is the delivery policy's (policy.ts `holdsEvent`).
 */
export interface HoldBounds {
  /** WEBHOOK_HOLD_DAYS */
  days: number;
  /** WEBHOOK_HOLD_MAX, per webhook */
  max: number;
}

/** held before this time: past the age bound */
export function holdCutoff(bounds: HoldBounds, now: Date): Date {
  return new Date(now.getTime() - bounds.days * 86_400_000);
}

/** the attempt log's reasons for a held event dropped past a bound, and for a waiting delivery (`due`) */
export function droppedReasons(bounds: HoldBounds): { age: string; size: string; due: string } {
  const tail = 'recover it with Recover (outcome skipped) once the endpoint works';
  return {
    age: `held while the endpoint was disabled for more than ${bounds.days} days (WEBHOOK_HOLD_DAYS): dropped; ${tail}`,
    size: `more than ${bounds.max} events held while the endpoint was disabled (WEBHOOK_HOLD_MAX): the oldest dropped; ${tail}`,
    due: `more than ${bounds.max} deliveries waiting for the endpoint (retries, fifo turns; WEBHOOK_HOLD_MAX): the oldest dropped; ${tail}`,
  };
}
