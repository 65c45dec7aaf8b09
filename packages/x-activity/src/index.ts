export * from './types';
export { planSubscriptions, diffSubscriptions, type WatchedAccount, type SubscriptionPlan } from './plan';
export {
  createXActivityApi,
  XActivityError,
  type XActivityApi,
  type XActivityApiOptions,
  type XaaRefusal,
  type StreamHandlers,
  type StreamReplay,
} from './client';
export { SubscriptionReconciler, type ReconcileOutcome, type Refused } from './reconcile';
