/**
 * What the dispatcher takes from @sts/messaging: the routing keys its queue is bound to, and the
 * consumer side of AmqpClient (tests may drive handle() without it).
 */
import type { AmqpClient } from '@sts/messaging';

export type { ConsumeOutcome } from '@sts/messaging';

export type DispatcherRoutingKey =
  | 'monitor.hit'
  | 'monitor.test'
  | 'monitor.profile_changed'
  | 'monitor.target_unavailable'
  | 'monitor.post_deleted'
  | 'webhook.redeliver';
/** the routing keys the dispatcher's queue is bound to */
export const DISPATCHER_BINDINGS: DispatcherRoutingKey[] = [
  'monitor.hit',
  'monitor.test',
  'monitor.profile_changed',
  'monitor.target_unavailable',
  'monitor.post_deleted',
  'webhook.redeliver',
];
/** the events a webhook receives (what a delivery attempt logs) */
export type DeliveryEvent = Exclude<DispatcherRoutingKey, 'webhook.redeliver'>;
/** consume; stop when the dispatcher fails closed (it stops consuming, see life.ts) */
export type DispatcherMessaging = Pick<AmqpClient, 'consume' | 'stop'>;
