/** read-api configuration, from the environment only, validated at start. */
import { z } from 'zod';
import { commonEnv, envFields, opsEnv, parseEnv } from '@sts/common';
import { planRetentionEnv } from '@sts/core';
import { requireXToken, socialEnv } from '@sts/social';

export const readApiEnvSchema = z
  .object({
    DATABASE_URL: commonEnv.DATABASE_URL,
    ...opsEnv(3102),
    READ_API_PORT: envFields.port(3002),
    READ_API_HOST: z.string().default('0.0.0.0'),
    INTERNAL_TOKEN: z.string().min(16, { message: 'must be at least 16 characters' }),
    /** how long user lookups are cached in process; 0 turns the cache off */
    USER_CACHE_TTL_MS: z.coerce.number().int().min(0).max(600_000).default(5000),
    /** how long a stop waits for in-flight requests */
    SHUTDOWN_GRACE_MS: z.coerce.number().int().min(0).max(120_000).default(10_000),
    DB_POOL_SIZE: z.coerce.number().int().min(1).max(200).default(10),
    /** Redis (SOCIAL_SOURCE=x): the X budget, the user cache and the read cache, shared with the fleet */
    REDIS_URL: commonEnv.REDIS_URL,
    REDIS_MODE: commonEnv.REDIS_MODE,
    REDIS_KEY_PREFIX: commonEnv.REDIS_KEY_PREFIX,
    /** X reads cached in Redis, per kind; 0 turns a kind off (README: "Read cache") */
    READ_CACHE_PROFILE_TTL_MS: z.coerce.number().int().min(0).max(3_600_000).default(30_000),
    READ_CACHE_TIMELINE_TTL_MS: z.coerce.number().int().min(0).max(3_600_000).default(5000),
    READ_CACHE_TWEET_TTL_MS: z.coerce.number().int().min(0).max(3_600_000).default(60_000),
    READ_CACHE_SEARCH_TTL_MS: z.coerce.number().int().min(0).max(3_600_000).default(10_000),
    ...socialEnv,
    /** how far back each plan sees its hits (the longest plan's is what storage keeps) */
    ...planRetentionEnv,
  })
  .superRefine(requireXToken);

export type ReadApiEnv = z.infer<typeof readApiEnvSchema>;

export function loadReadApiEnv(source: NodeJS.ProcessEnv = process.env): ReadApiEnv {
  return parseEnv(readApiEnvSchema, source);
}
