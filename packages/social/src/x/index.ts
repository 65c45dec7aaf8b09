/** The X provider: client (the one request helper), governor, user directory, packing, source. */
export { answerFor, X_ACCOUNT_FIELDS, type XAccountRequest, type XAccounts, type XAccountState } from './accounts';
export {
  billableReads,
  isBilledActivityEvent,
  utcDay,
  X_BILLABLE_RESOURCES,
  type XBillableRead,
  type XBillableResource,
} from './billable';
export { createXBilling, noXBilling, type XBilling, type XBillingOptions } from './billing';
export { createXClient, type XAnswer, type XCall, type XClient, type XClientOptions } from './client';
export {
  createProcessGovernor,
  createRedisGovernor,
  parseRateLimits,
  rateLimitHeaders,
  X_DEFAULT_LIMITS,
  X_FAMILIES,
  X_WINDOW_MS,
  type XAcquireResult,
  type XBudget,
  type XFamily,
  type XGovernor,
  type XGovernorOptions,
  type XObservation,
  type XPriority,
} from './governor';
export { createXMetrics, noXMetrics, type XMetrics } from './metrics';
export { MIN_QUERY_LENGTH, packFromQueries, type QueryGroup } from './pack';
export type { AccountSinceRequest, AccountSinceResult, GroupSearchRequest, GroupSearchResult } from './poll';
export { createXSource, isXSource, type XSource, type XSourceOptions } from './source';
export { readStreamLines, type StreamLineHandlers } from './streamLines';
export { createXUserDirectory, type XUserDirectory, type XUserResolution } from './users';
export {
  mapXTweet,
  mapXUser,
  referencesOf,
  X_TWEET_FIELDS,
  X_USER_FIELDS,
  type XProblem,
  type XResponse,
} from './wire';
