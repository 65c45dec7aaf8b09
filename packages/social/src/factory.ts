/**
 * Picks the social data source from configuration: `local` (PostgreSQL, the default) or `x` (the
 * X API v2). `socialEnv` holds the zod fields a service spreads into its environment schema, and
 * `requireXToken` the check that X_BEARER_TOKEN is set when SOCIAL_SOURCE=x.
 */
import type { Registry } from 'prom-client';
import { z } from 'zod';
import type { RedisClient } from '@sts/common';
import type { Db } from '@sts/db';
import { createLocalSource } from './local';
import type { SocialSource } from './types';
import {
  createRedisGovernor,
  createXMetrics,
  createXSource,
  parseRateLimits,
  type XBillableResource,
  type XBilling,
  type XFamily,
} from './x';

export interface SocialSourceConfig {
  SOCIAL_SOURCE?: 'local' | 'x' | undefined;
  X_API_BASE_URL?: string | undefined;
  X_BEARER_TOKEN?: string | undefined;
  /** per X API request (socialEnv's default when left out, as for every field of socialEnv) */
  X_TIMEOUT_MS?: number | undefined;
  /** X: the window a poll re-reads behind its position (the poller's setting; left out: the X source's) */
  POLL_OVERLAP_SECONDS?: number | undefined;
  /** X: how long a resolved username is cached in Redis */
  X_USER_CACHE_TTL_SECONDS?: number | undefined;
  /** X: percent of each rate-limit window low-priority (Free) polls leave to the others */
  X_LOW_PRIORITY_RESERVE_PERCENT?: number | undefined;
  /** X: the tier's limits per window before X's headers tell them (empty: Pro's) */
  X_RATE_LIMITS?: Partial<Record<XFamily, number>> | undefined;
}

export interface SocialSourceDeps {
  db: Db;
  /** the fleet's Redis: X's rate-limit governor and user cache (every service passes it) */
  redis?: RedisClient;
  /** registers the X request and budget metrics */
  registry?: Registry;
  /** what X bills is recorded here (createXBilling); default: not counted */
  billing?: XBilling;
}

export const socialEnv = {
  /** where profiles, posts and search come from: `local` (this PostgreSQL) or `x` (the X API v2) */
  SOCIAL_SOURCE: z.enum(['local', 'x']).default('local'),
  /** the X API's address (tests point it at the fake X) */
  X_API_BASE_URL: z
    .string()
    .refine(
      (v) => {
        try {
          return ['https:', 'http:'].includes(new URL(v).protocol);
        } catch {
          return false;
        }
      },
      { message: 'must be an http(s) URL' },
    )
    .default('https://api.x.com'),
  /** the X app's bearer token; required when SOCIAL_SOURCE=x */
  X_BEARER_TOKEN: z.string().optional(),
  /** time limit of one X request */
  X_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(10_000),
  /** how long a username → X user id lookup is kept in Redis (packages/social/README.md) */
  X_USER_CACHE_TTL_SECONDS: z.coerce.number().int().min(1).max(604_800).default(3600),
  /** share of each X rate-limit window that Free-only polls leave to Starter polls and API reads */
  X_LOW_PRIORITY_RESERVE_PERCENT: z.coerce.number().int().min(0).max(90).default(20),
  /** the limits assumed before X's first answer: `family=n,...` per 15 minutes; empty: X API Pro's */
  X_RATE_LIMITS: z
    .string()
    .default('')
    .superRefine((v, ctx) => {
      const parsed = parseRateLimits(v);
      if (typeof parsed === 'string') ctx.addIssue({ code: 'custom', message: parsed });
    })
    .transform((v) => parseRateLimits(v) as Partial<Record<XFamily, number>>),
};

/** the socialEnv settings as they are when no variable sets them (a config that leaves one out) */
const socialDefaults = z.object(socialEnv).parse({});

const price = (usd: number) => z.coerce.number().min(0).max(1000).default(usd);

/**
 * X's prices per billable resource in USD (pay-per-use, docs.x.com x-api/getting-started/pricing):
 * the defaults are the public prices of December 2026. Spread into the env of the processes that
 * show them: the poller (the x_billable_price_usd gauge the dashboards multiply by) and
 * `npm run cli -- x cost`.
 */
export const xPriceEnv = {
  /** USD X charges per post read (a post returned by search, a timeline, a post lookup, the filtered stream), once per UTC day */
  X_PRICE_POST_READ: price(0.005),
  /** USD X charges per user read (a user returned by a users lookup), once per UTC day */
  X_PRICE_USER_READ: price(0.01),
  /** USD X charges per billed X Activity API event (`post.create`, `profile.update.*`; `post.delete` is free) */
  X_PRICE_EVENT: price(0.005),
};

/** The prices of xPriceEnv by billable resource (the `resource` label of x_billable_total). */
export function xPricesFromEnv(env: {
  X_PRICE_POST_READ: number;
  X_PRICE_USER_READ: number;
  X_PRICE_EVENT: number;
}): Record<XBillableResource, number> {
  return { post_read: env.X_PRICE_POST_READ, user_read: env.X_PRICE_USER_READ, activity_event: env.X_PRICE_EVENT };
}

/** For `schema.superRefine(requireXToken)`: X_BEARER_TOKEN must be set when SOCIAL_SOURCE=x. */
export function requireXToken(
  env: { SOCIAL_SOURCE?: string | undefined; X_BEARER_TOKEN?: string | undefined },
  ctx: z.RefinementCtx,
): void {
  if (env.SOCIAL_SOURCE === 'x' && !env.X_BEARER_TOKEN) {
    ctx.addIssue({ code: 'custom', path: ['X_BEARER_TOKEN'], message: 'is required when SOCIAL_SOURCE=x' });
  }
}

export function createSocialSource(config: SocialSourceConfig, deps: SocialSourceDeps): SocialSource {
  const kind = config.SOCIAL_SOURCE ?? socialDefaults.SOCIAL_SOURCE;
  if (kind === 'local') return createLocalSource({ db: deps.db });
  if (kind === 'x') {
    if (!config.X_BEARER_TOKEN) throw new Error('X_BEARER_TOKEN is required when SOCIAL_SOURCE=x');
    const reserve = (config.X_LOW_PRIORITY_RESERVE_PERCENT ?? socialDefaults.X_LOW_PRIORITY_RESERVE_PERCENT) / 100;
    const governor = deps.redis
      ? createRedisGovernor(deps.redis, {
          lowPriorityReserve: reserve,
          limits: config.X_RATE_LIMITS ?? socialDefaults.X_RATE_LIMITS,
        })
      : undefined;
    return createXSource({
      baseUrl: config.X_API_BASE_URL ?? socialDefaults.X_API_BASE_URL,
      bearerToken: config.X_BEARER_TOKEN,
      timeoutMs: config.X_TIMEOUT_MS ?? socialDefaults.X_TIMEOUT_MS,
      // the poller's setting: a service that does not poll leaves it to the source's own
      ...(config.POLL_OVERLAP_SECONDS !== undefined && { overlapMs: config.POLL_OVERLAP_SECONDS * 1000 }),
      userCacheTtlSeconds: config.X_USER_CACHE_TTL_SECONDS ?? socialDefaults.X_USER_CACHE_TTL_SECONDS,
      ...(deps.redis && { redis: deps.redis }),
      ...(deps.billing && { billing: deps.billing }),
      ...(governor && { governor }),
      ...(governor && deps.registry && { metrics: createXMetrics(deps.registry, governor) }),
    });
  }
  throw new Error(`unknown SOCIAL_SOURCE "${String(kind)}" (expected local or x)`);
}
