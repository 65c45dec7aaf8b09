/**
 * What one delivery becomes before anything is sent, decided once (pure): the flow's prepare
 * step asks this and this asks each rule once: the policy (held, skipped, the URL the log
 * stores), the webhook's ordering (a fifo webhook's live event waits for its turn), the body
 * (its bytes, size limit and sequence header) and the pacing (lane, pace, 429 rule).
 */
import type { WebhookPayload } from '@sts/messaging';
import { requestBody, type WebhookKind } from './payloads';
import { pacingFor, type Pacing } from './pacing';
import { deliveryPolicy, LIVE_EVENTS, type HoldState } from './policy';

type Webhook = NonNullable<HoldState['webhook']> & { kind: WebhookKind; ordering: 'unordered' | 'fifo' };

export interface PlanInput<W extends Webhook> {
  event: Parameters<typeof deliveryPolicy>[0];
  monitor: HoldState & { webhook: W | null };
  payload: WebhookPayload;
  /** what asked for it: a message's first attempt, a due delivery (a retry, a fifo turn) or a held event */
  origin: 'message' | 'due' | 'held';
  /** a delivery the user asked for again (webhook.redeliver) */
  redelivery: boolean;
  /** disabled endpoints' events are held here (without: logged as skipped) */
  holding: boolean;
  now: Date;
}

/**
 * held: the hold takes it; unsent: logged without a request (skipped, or its body too large);
 * queued: a fifo webhook's event waits for its turn; send: it goes out as built here
 */
export type DeliveryPlan<W> =
  | { kind: 'held'; url: string }
  | { kind: 'unsent'; url: string; outcome: 'skipped' | 'failed'; error: string; webhookKind: WebhookKind | 'none' }
  | { kind: 'queued'; webhook: W }
  | {
      kind: 'send';
      webhook: W;
      /** the endpoint's URL as the attempt log stores it */
      url: string;
      body: string;
      /** the body encoded once: signed, sent and measured as these bytes */
      bytes: Buffer;
      /** the sequence header, the same on every attempt */
      sequence: number | undefined;
      pacing: Pacing;
      /** the webhook's retry schedule applies (a live event; not a test ping or a requested redelivery) */
      scheduled: boolean;
    };

const isLive = (event: string): boolean => (LIVE_EVENTS as readonly string[]).includes(event);

export function planDelivery<W extends Webhook>(p: PlanInput<W>): DeliveryPlan<W> {
  const policy = deliveryPolicy(p.event, p.redelivery, p.monitor, p.now);
  const { url } = policy;
  // a held event is not held again
  if (p.holding && p.origin !== 'held' && policy.held) return { kind: 'held', url };
  const webhook = p.monitor.webhook;
  if (!webhook || policy.skip) {
    const error = policy.skip ?? 'monitor has no webhook';
    return { kind: 'unsent', url, outcome: 'skipped', error, webhookKind: webhook?.kind ?? 'none' };
  }
  const scheduled = p.origin !== 'message' || (!p.redelivery && isLive(p.event));
  if (p.origin === 'message' && scheduled && webhook.ordering === 'fifo') return { kind: 'queued', webhook };
  const request = requestBody(webhook.kind, p.payload);
  if (request.kind === 'too-large')
    return { kind: 'unsent', url, outcome: 'failed', error: request.error, webhookKind: webhook.kind };
  const { body, bytes, sequence } = request;
  return { kind: 'send', webhook, url, body, bytes, sequence, pacing: pacingFor(webhook.kind, webhook.url), scheduled };
}
