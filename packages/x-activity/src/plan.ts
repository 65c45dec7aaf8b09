/**
 * Which subscriptions the watched accounts get (no I/O). A subscription is one event type for one
 * account, and the tier bounds their number (`max`): accounts are taken whole (every type they
 * want, or none: a partly pushed account would still be polled), paying accounts first, then in
 * target order so the choice is stable between rounds; an account whose types do not fit stays on
 * the polled path, and a smaller one after it may still fit. A subscription X refused
 * (`refused`) is never planned: its account stays polled for the types it wanted.
 */
import { subscriptionKey, type XaaEventType, type XaaSubscription, type XaaSubscriptionKey } from './types';

export interface WatchedAccount {
  userId: string;
  targetKey: string;
  /** a paying (or trial) account watches it */
  paying: boolean;
  types: readonly XaaEventType[];
}

export interface SubscriptionPlan {
  /** the subscriptions wanted, account by account */
  wanted: (XaaSubscriptionKey & { targetKey: string })[];
  /** the accounts that got their subscriptions */
  pushed: WatchedAccount[];
  /** the accounts left to the polled path (over the limit, or a type refused) */
  polled: WatchedAccount[];
}

export function planSubscriptions(
  accounts: readonly WatchedAccount[],
  max: number,
  refused: ReadonlySet<string>,
): SubscriptionPlan {
  const order = [...accounts].sort(
    (a, b) =>
      Number(b.paying) - Number(a.paying) || (a.targetKey < b.targetKey ? -1 : a.targetKey > b.targetKey ? 1 : 0),
  );
  const plan: SubscriptionPlan = { wanted: [], pushed: [], polled: [] };
  const seen = new Set<string>();
  for (const account of order) {
    const keys = account.types
      .map((eventType) => ({ eventType, userId: account.userId, targetKey: account.targetKey }))
      .filter((k) => !seen.has(subscriptionKey(k)));
    const blocked = keys.some((k) => refused.has(subscriptionKey(k)));
    if (keys.length === 0 || blocked || plan.wanted.length + keys.length > max) {
      if (keys.length > 0 || blocked) plan.polled.push(account);
      continue;
    }
    for (const k of keys) seen.add(subscriptionKey(k));
    plan.wanted.push(...keys);
    plan.pushed.push(account);
  }
  return plan;
}

export interface SubscriptionDiff {
  create: (XaaSubscriptionKey & { targetKey: string })[];
  /** X's subscriptions (this service's tag) no account wants any more, or a second copy of one */
  remove: XaaSubscription[];
}

export function diffSubscriptions(
  wanted: SubscriptionPlan['wanted'],
  existing: readonly XaaSubscription[],
  tag: string,
): SubscriptionDiff {
  const want = new Set(wanted.map(subscriptionKey));
  const held = new Set<string>();
  const remove: XaaSubscription[] = [];
  for (const s of existing) {
    if (s.tag !== tag) continue;
    const key = subscriptionKey(s);
    if (!want.has(key) || held.has(key)) remove.push(s);
    else held.add(key);
  }
  return { create: wanted.filter((w) => !held.has(subscriptionKey(w))), remove };
}
