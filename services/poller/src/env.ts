import { z } from 'zod';
import { commonEnv, directDatabaseEnv, opsEnv, parseEnv } from '@sts/common';
import { planEnv } from '@sts/core';
import { requireXToken, socialEnv, xPriceEnv } from '@sts/social';
import { streamEnv } from '@sts/x-stream';
import { activityEnv } from './intake/activity/env';

export const pollerEnvSchema = z
  .object({
    ...commonEnv,
    /** the poller's sessions (LISTEN, advisory locks) connect here: README, "Database connections" */
    ...directDatabaseEnv,
    ...planEnv,
    ...socialEnv,
    /** X's prices (X_PRICE_POST_READ, X_PRICE_USER_READ, X_PRICE_EVENT), exported as x_billable_price_usd */
    ...xPriceEnv,
    ...opsEnv(3003),
    /** X stream mode: X_RULE_MAX_LENGTH, X_MAX_RULES, X_RULE_SETTLE_SECONDS (stream/env.ts) */
    ...streamEnv,
    /** the X Activity API intake: X_INTAKE_ACTIVITY, X_ACTIVITY_MAX_SUBS, X_HEALTH_LOOKUP_SECONDS (activity/env.ts) */
    ...activityEnv,
    /** overrides the plans' poll intervals (tests and demos use 1) */
    POLL_INTERVAL_SECONDS: z.coerce.number().int().min(1).max(86_400).optional(),
    /** targets polled at the same time by one replica */
    POLL_CONCURRENCY: z.coerce.number().int().min(1).max(256).default(8),
    /**
     * most due targets one tick claims (oldest due first; each claimed by one replica): after an
     * outage the backlog drains at this many a tick per replica
     */
    POLL_CLAIM_LIMIT: z.coerce.number().int().min(1).max(10_000).default(200),
    /** tweets read per source call */
    POLL_BATCH_SIZE: z.coerce.number().int().min(1).max(100).default(100),
    /** how long one target's poll may take before its lease lapses */
    POLL_TIMEOUT_MS: z.coerce.number().int().min(1000).max(600_000).default(30_000),
    /** X source: how far behind its position a poll re-reads (tweets X makes visible late) */
    POLL_OVERLAP_SECONDS: z.coerce.number().int().min(0).max(3600).default(30),
    /**
     * X source: how monitors read X. `stream`: the filtered stream (stream/) serves
     * targets with a Starter or trial watcher, the tick polls only the Free-only ones by batched
     * search; `search`: due targets packed into `from:` OR-queries; `timeline`: one timeline read
     * per target (small tiers). See services/poller/README.md, "X monitor modes".
     */
    X_MONITOR_MODE: z.enum(['stream', 'search', 'timeline']).default('stream'),
    /** search mode (and stream mode's Free-only polls): most characters of one packed `from:` query */
    X_QUERY_MAX_LENGTH: z.coerce.number().int().min(32).max(4096).default(512),
    /** PostgreSQL connections of one replica (k8s/README.md, "Database connection budget") */
    DB_POOL_SIZE: z.coerce.number().int().min(1).max(100).default(10),
    /**
     * more than this percent of the watched accounts reported unavailable together (and at least
     * TARGET_FLAP_MIN) is the source failing, not the accounts: none is marked, no event or mail,
     * an alert, and they are looked at again later (domain/flap.ts)
     */
    TARGET_FLAP_SHARE: z.coerce.number().gt(0).max(100).default(20),
    /** a watched account reported unavailable is marked after this long, unless the source looks failing */
    TARGET_FLAP_WINDOW_SEC: z.coerce.number().int().min(1).max(3600).default(60),
    /** the fewest accounts turning unavailable together that can be the source failing */
    TARGET_FLAP_MIN: z.coerce.number().int().min(1).max(1_000_000).default(10),
  })
  .superRefine(requireXToken);

export type PollerEnv = z.infer<typeof pollerEnvSchema>;

export function loadPollerEnv(source: NodeJS.ProcessEnv = process.env): PollerEnv {
  return parseEnv(pollerEnvSchema, source);
}
