/**
 * The `stream` mode's variables (X_MONITOR_MODE=stream, SOCIAL_SOURCE=x), spread into the
 * poller's environment schema. Bounds: a rule must hold at least one `from:<15 characters>`
 * clause (20) and X's largest rule is 4,096 characters (Enterprise); X_MAX_RULES up to the
 * Enterprise counts. A bad value stops the poller with exit code 2.
 */
import { z } from 'zod';

export const streamEnv = {
  /** most characters of one filtered-stream rule (X Pro: 1,024; Basic: 512) */
  X_RULE_MAX_LENGTH: z.coerce.number().int().min(20).max(4096).default(1024),
  /** most rules the app may hold (X Pro: 1,000); targets beyond are polled by batched search */
  X_MAX_RULES: z.coerce.number().int().min(1).max(250_000).default(1000),
  /** after a rule change, wait this long (X: rules take effect within ~20 s) then backfill its targets */
  X_RULE_SETTLE_SECONDS: z.coerce.number().int().min(0).max(300).default(20),
  /** monitor changes within this window make one rule change (and one backfill) */
  X_RULE_COALESCE_SECONDS: z.coerce.number().int().min(0).max(60).default(5),
  /** ask X to replay a disconnect up to this long through `backfill_minutes` (0: off; X allows 1–5 on plans that have it) */
  X_STREAM_BACKFILL_MINUTES: z.coerce.number().int().min(0).max(5).default(0),
  /**
   * the owed backfill's lookup pre-check (`most_recent_tweet_id`, recentCheck.ts): `auto`
   * looks new targets' rule-change windows up (their first account look) and any window whose
   * searches do not fit the search budget left; `off`: every window is searched
   */
  X_BACKFILL_LOOKUP: z.enum(['auto', 'off']).default('auto'),
  /** the stream holder's lease in PostgreSQL: renewed every sync, taken by another replica once expired */
  X_STREAM_LEASE_SECONDS: z.coerce.number().int().min(3).max(60).default(10),
};
