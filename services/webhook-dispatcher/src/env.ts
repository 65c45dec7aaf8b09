import { z } from 'zod';
import { commonEnv, directDatabaseEnv, envFields, opsEnv, parseEnv } from '@sts/common';
import { encryptionKeyField, encryptionKeyListField } from '@sts/core';

const positiveInt = (fallback: number, max: number) => z.coerce.number().int().min(1).max(max).default(fallback);

/** the dispatcher's settings that have a default: the one place each default is written */
const dispatchSettings = {
  /** whole-request time limit of one delivery */
  WEBHOOK_TIMEOUT_MS: positiveInt(15_000, 120_000),
  /** deliveries in flight at once to one endpoint (scheme, host and port) */
  WEBHOOK_MAX_CONCURRENCY_PER_ENDPOINT: positiveInt(8, 1000),
  /** unacknowledged messages (and so deliveries in flight) per dispatcher process */
  DISPATCH_PREFETCH: positiveInt(256, 10_000),
  /** how long a message parked for a backed-up endpoint stays away before it comes back (ms) */
  DISPATCH_DEFER_MS: positiveInt(5000, 600_000),
  /** how long a monitor's context may be served from memory (ms; changes drop it at once); 0: read it for every delivery */
  DISPATCH_CONTEXT_CACHE_MS: z.coerce.number().int().min(0).max(3_600_000).default(60_000),
  /** how long an attempt row may wait for others to share its insert and commit (ms; 0: written at once) */
  DISPATCH_RECORD_LINGER_MS: z.coerce.number().int().min(0).max(1000).default(25),
  /** how often due deliveries (retries, fifo turns) are looked for in PostgreSQL (ms); a tenth of it while polls keep finding some */
  DISPATCH_DUE_POLL_MS: positiveInt(1000, 60_000),
  /** due deliveries in flight at once per process (besides the queue's DISPATCH_PREFETCH) */
  DISPATCH_DUE_IN_FLIGHT: positiveInt(64, 10_000),
  /** events of a disabled webhook are held at most this many days; older ones are dropped (logged as skipped) */
  WEBHOOK_HOLD_DAYS: positiveInt(3, 30),
  /** events held per disabled webhook at most, and deliveries waiting per webhook for a retry or a fifo turn; beyond it the oldest are dropped (logged as skipped) */
  WEBHOOK_HOLD_MAX: positiveInt(10_000, 1_000_000),
  /** SIGTERM: how long deliveries in flight may take to finish before they are handed back (ms; below Kubernetes' 30 s) */
  DISPATCH_SHUTDOWN_GRACE_MS: z.coerce.number().int().min(0).max(600_000).default(20_000),
};

export const dispatcherEnvSchema = z.object({
  DATABASE_URL: commonEnv.DATABASE_URL,
  /** the monitor cache's LISTEN session (never a transaction-mode PgBouncer); unset: DATABASE_URL */
  ...directDatabaseEnv,
  AMQP_URL: commonEnv.AMQP_URL,
  ...opsEnv(3004),
  /** decrypts the stored webhook signing secrets (32 bytes, base64 or 64 hex digits) */
  SECRETS_ENCRYPTION_KEY: encryptionKeyField(),
  /** former keys, comma-separated: secrets stored under them still decrypt until `secrets rotate` ran */
  SECRETS_ENCRYPTION_KEYS_OLD: encryptionKeyListField().optional(),
  /** host names exempt from the private-address check (local development and tests); empty by default */
  WEBHOOK_ALLOW_PRIVATE_HOSTS: envFields.list(),
  ...dispatchSettings,
  /** PostgreSQL connections of one dispatcher process (k8s/README.md, "Database connection budget") */
  DB_POOL_SIZE: z.coerce.number().int().min(1).max(200).optional(),
  /** the earlier name of DB_POOL_SIZE, still read when DB_POOL_SIZE is unset */
  DISPATCH_DB_POOL_SIZE: z.coerce.number().int().min(1).max(200).optional(),
});

export type DispatcherEnv = z.infer<typeof dispatcherEnvSchema>;

/** the settings as they are when no variable sets them (createDispatcher's values for options left out) */
export const dispatchSettingDefaults = z.object(dispatchSettings).parse({});

/** DB_POOL_SIZE, else the earlier DISPATCH_DB_POOL_SIZE, else 10 */
export function dispatcherPoolSize(env: Pick<DispatcherEnv, 'DB_POOL_SIZE' | 'DISPATCH_DB_POOL_SIZE'>): number {
  return env.DB_POOL_SIZE ?? env.DISPATCH_DB_POOL_SIZE ?? 10;
}

export function parseDispatcherEnv(source: NodeJS.ProcessEnv = process.env): DispatcherEnv {
  return parseEnv(dispatcherEnvSchema, source);
}
