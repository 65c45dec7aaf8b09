/** read-api configuration, from the environment only, validated at start. */
import { z } from 'zod';
import { commonEnv, envFields, opsEnv, parseEnv } from '@sts/common';
import { encryptionKeyField, encryptionKeyListField } from '@sts/core';
import { requireXToken, socialEnv } from '@sts/social';
import { useCaseEnv } from '@sts/usecases';

export const readApiEnvSchema = z
  .object({
    DATABASE_URL: commonEnv.DATABASE_URL,
    ...opsEnv(3102),
    /** the internal API port (the gateway forwards to it; never public) */
    READ_API_PORT: envFields.port(3002),
    /** the address it listens on */
    READ_API_HOST: z.string().default('0.0.0.0'),
    /** shared with the gateway: calls without it are refused */
    INTERNAL_TOKEN: z.string().min(16, { message: 'must be at least 16 characters' }),
    /** how long user lookups are cached in process; 0 turns the cache off */
    USER_CACHE_TTL_MS: z.coerce.number().int().min(0).max(600_000).default(5000),
    /** how long a stop waits for in-flight requests */
    SHUTDOWN_GRACE_MS: z.coerce.number().int().min(0).max(120_000).default(10_000),
    /** PostgreSQL connections of one process (k8s/README.md, "Database connection budget") */
    DB_POOL_SIZE: z.coerce.number().int().min(1).max(200).default(10),
    /**
     * Redis: Idempotency-Key answers, the Test webhook / Redeliver bound (shared with the
     * dashboard), the preview cache; with SOCIAL_SOURCE=x also the X budget and the read cache
     */
    REDIS_URL: commonEnv.REDIS_URL,
    REDIS_MODE: commonEnv.REDIS_MODE,
    REDIS_KEY_PREFIX: commonEnv.REDIS_KEY_PREFIX,
    /** X reads cached in Redis, per kind; 0 turns a kind off (README: "Read cache") */
    READ_CACHE_PROFILE_TTL_MS: z.coerce.number().int().min(0).max(3_600_000).default(30_000),
    READ_CACHE_TIMELINE_TTL_MS: z.coerce.number().int().min(0).max(3_600_000).default(5000),
    READ_CACHE_TWEET_TTL_MS: z.coerce.number().int().min(0).max(3_600_000).default(60_000),
    READ_CACHE_SEARCH_TTL_MS: z.coerce.number().int().min(0).max(3_600_000).default(10_000),
    ...socialEnv,
    /** the management endpoints: plan limits (PLAN_*), WEBHOOK_TEST_MAX_PER_MIN */
    ...useCaseEnv,
    /** test pings, redeliveries and recoveries are published here (as the dashboard does) */
    AMQP_URL: commonEnv.AMQP_URL,
    /** webhook signing secrets are encrypted with it (the dashboard's and the dispatcher's key); needed to set a webhook */
    SECRETS_ENCRYPTION_KEY: encryptionKeyField().optional(),
    /** former keys, decrypt only (npm run cli -- secrets rotate) */
    SECRETS_ENCRYPTION_KEYS_OLD: encryptionKeyListField().optional(),
    /** the save-time webhook URL rule, as the dashboard's: ports besides 443, hosts exempt from the public-address rule */
    WEBHOOK_ALLOWED_PORTS: z.string().default(''),
    /** host names exempt from the public-address rule, comma-separated (local development and tests only) */
    WEBHOOK_ALLOW_PRIVATE_HOSTS: z.string().default(''),
  })
  .superRefine(requireXToken);

export type ReadApiEnv = z.infer<typeof readApiEnvSchema>;

const { USER_CACHE_TTL_MS, SHUTDOWN_GRACE_MS } = readApiEnvSchema.shape;

/** the settings as they are when no variable sets them (createReadApi's values for options left out) */
export const readApiSettingDefaults = z.object({ USER_CACHE_TTL_MS, SHUTDOWN_GRACE_MS }).parse({});

export function loadReadApiEnv(source: NodeJS.ProcessEnv = process.env): ReadApiEnv {
  return parseEnv(readApiEnvSchema, source);
}
