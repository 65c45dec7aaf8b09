/**
 * The X Activity API's shapes (docs.x.com, x-api/activity): the event types this service
 * subscribes to, a subscription as X lists it, and the event envelope the stream delivers
 * (`event_uuid`, `filter.user_id`, `event_type`, `tag`, `payload`, `includes`).
 */

/** `profile.update.*` types whose change is a compared profile field (docs/webhooks.md). */
export const XAA_PROFILE_TYPES = [
  'profile.update.bio',
  'profile.update.screenname',
  'profile.update.handle',
  'profile.update.profile_picture',
  'profile.update.verified_badge',
] as const;

export const XAA_EVENT_TYPES = [...XAA_PROFILE_TYPES, 'post.delete', 'post.create'] as const;

export type XaaProfileType = (typeof XAA_PROFILE_TYPES)[number];
export type XaaEventType = (typeof XAA_EVENT_TYPES)[number];

export function isXaaEventType(value: string): value is XaaEventType {
  return (XAA_EVENT_TYPES as readonly string[]).includes(value);
}

export function isXaaProfileType(value: string): value is XaaProfileType {
  return (XAA_PROFILE_TYPES as readonly string[]).includes(value);
}

/** One subscription: one event type for one account. */
export interface XaaSubscriptionKey {
  eventType: XaaEventType;
  userId: string;
}

export interface XaaSubscription extends XaaSubscriptionKey {
  id: string;
  tag: string | null;
}

/** `event_type:user_id`, the identity of a subscription */
export function subscriptionKey(s: XaaSubscriptionKey): string {
  return `${s.eventType}:${s.userId}`;
}

/** An event as the stream delivered it. */
export interface XaaEvent {
  uuid: string;
  userId: string;
  eventType: string;
  tag: string | null;
  payload: Record<string, unknown>;
  includes: Record<string, unknown> | null;
}
