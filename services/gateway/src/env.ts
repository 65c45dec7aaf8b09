import { z } from 'zod';
import { commonEnv, envFields, opsEnv, parseEnv } from '@sts/common';
import { planEnv } from '@sts/core';

export const gatewayEnvSchema = z.object({
  ...commonEnv,
  ...planEnv,
  ...opsEnv(3100),
  /** the public API port */
  GATEWAY_PORT: envFields.port(3000),
  /** the address the API listens on */
  GATEWAY_HOST: z.string().default('0.0.0.0'),
  /** read-api, where calls are forwarded */
  READ_API_URL: envFields.url(['http', 'https']).default('http://127.0.0.1:3002'),
  /** shared with read-api: it answers only calls that carry it */
  INTERNAL_TOKEN: z.string().min(16, 'must be at least 16 characters'),
  /** overall time limit for a forwarded call (504 after it) */
  UPSTREAM_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(10_000),
  /** time limit for opening a connection to read-api (504 after it; a refused connection is a 503 at once) */
  UPSTREAM_CONNECT_TIMEOUT_MS: z.coerce.number().int().min(50).max(30_000).default(2000),
  /** most keep-alive sockets open to read-api */
  UPSTREAM_MAX_SOCKETS: z.coerce.number().int().min(1).max(4096).default(128),
  /** most GET/HEAD/OPTIONS calls of one event-loop turn pipelined together on one socket to read-api (1: none) */
  UPSTREAM_PIPELINE_DEPTH: z.coerce.number().int().min(1).max(64).default(8),
  /** only routes read-api answers within this many ms on average (its Server-Timing) are pipelined */
  UPSTREAM_PIPELINE_MAX_MS: z.coerce.number().min(0).max(60_000).default(2),
  /** how long a stop waits for in-flight calls */
  SHUTDOWN_GRACE_MS: z.coerce.number().int().min(0).max(120_000).default(10_000),
  /** how long a key lookup is trusted in process and in Redis (revocation takes at most twice this: ≤ 4 s) */
  KEY_CACHE_TTL_MS: z.coerce.number().int().min(0).max(2000).default(2000),
  /** lookups of unknown API keys per client address per minute; past it, 401 without a database query */
  UNKNOWN_KEY_MAX_PER_MIN: z.coerce.number().int().min(1).max(100_000).default(30),
  /** how often the filter of live API keys is rebuilt from PostgreSQL (it also follows apikey.changed events) */
  KEY_FILTER_REBUILD_MS: z.coerce.number().int().min(1000).max(86_400_000).default(300_000),
  /** how often keys created since the last look are read into that filter (a key inserted without an event) */
  KEY_FILTER_SYNC_MS: z.coerce.number().int().min(100).max(600_000).default(5000),
  /** proxies in front whose X-Forwarded-For is believed for the client address (0: the socket's address) */
  GATEWAY_TRUSTED_PROXY_HOPS: z.coerce.number().int().min(0).max(10).default(0),
  /** how often successful calls are written through to usage_monthly */
  USAGE_FLUSH_MS: z.coerce.number().int().min(50).max(10_000).default(1000),
  /** most open GET /api/v1/stream streams per account on the Starter plan (Free has none) */
  STREAM_MAX_PER_ACCOUNT: z.coerce.number().int().min(1).max(1000).default(3),
  /** most open streams on one gateway process (503 beyond) */
  STREAM_MAX_PER_PROCESS: z.coerce.number().int().min(1).max(100_000).default(5000),
  /** a comment line on every open stream this often (keeps proxies from closing idle streams) */
  STREAM_HEARTBEAT_MS: z.coerce.number().int().min(50).max(120_000).default(15_000),
  /** a stream ends (stream.closed, reason max_lifetime) this long after it opened; the client resumes with Last-Event-ID */
  STREAM_MAX_LIFETIME_S: z.coerce.number().int().min(1).max(2_592_000).default(86_400),
  /** bytes a stream's client may leave unread before it is disconnected */
  STREAM_MAX_UNSENT_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .max(16 * 1024 * 1024)
    .default(256 * 1024),
  /** PostgreSQL connections of one process (k8s/README.md, "Database connection budget") */
  DB_POOL_SIZE: z.coerce.number().int().min(1).max(100).default(5),
});

export type GatewayEnv = z.infer<typeof gatewayEnvSchema>;

const s = gatewayEnvSchema.shape;

/** the settings as they are when no variable sets them (the factories' values for options left out) */
export const gatewaySettingDefaults = z
  .object({
    UPSTREAM_TIMEOUT_MS: s.UPSTREAM_TIMEOUT_MS,
    SHUTDOWN_GRACE_MS: s.SHUTDOWN_GRACE_MS,
    USAGE_FLUSH_MS: s.USAGE_FLUSH_MS,
    KEY_FILTER_REBUILD_MS: s.KEY_FILTER_REBUILD_MS,
    KEY_FILTER_SYNC_MS: s.KEY_FILTER_SYNC_MS,
    UNKNOWN_KEY_MAX_PER_MIN: s.UNKNOWN_KEY_MAX_PER_MIN,
  })
  .parse({});

export function loadGatewayEnv(source: NodeJS.ProcessEnv = process.env): GatewayEnv {
  return parseEnv(gatewayEnvSchema, source);
}
