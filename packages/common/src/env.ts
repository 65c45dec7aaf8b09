import { z } from 'zod';
import { isRedisUrlList, redisConfigProblems, REDIS_MODES } from './redisConfig';
import { developmentSecretProblems } from './devSecrets';

export class ConfigError extends Error {
  override name = 'ConfigError';
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  }
}

/**
 * Parses the environment once, at start, against a zod schema. Every missing or bad variable is
 * named in one ConfigError, so an operator fixes them all in one go. Values are never echoed
 * (they may be secrets).
 */
export function parseEnv<S extends z.ZodType>(schema: S, source: NodeJS.ProcessEnv = process.env): z.infer<S> {
  // Treat empty strings as unset, as shells and k8s manifests often leave them so.
  const cleaned: Record<string, string> = {};
  for (const [k, v] of Object.entries(source)) if (v !== undefined && v !== '') cleaned[k] = v;
  // a development secret is refused in production whatever the schema says
  const devSecrets = developmentSecretProblems(cleaned);
  const result = schema.safeParse(cleaned);
  if (devSecrets.length > 0) {
    const rest = result.success
      ? []
      : result.error.issues.map((i) => `${i.path.join('.') || '(environment)'}: ${i.message}`);
    throw new ConfigError([...devSecrets, ...rest]);
  }
  if (result.success) {
    // fields that are only valid together (REDIS_MODE with REDIS_URL and REDIS_KEY_PREFIX)
    const data = result.data as Record<string, unknown>;
    if (typeof data.REDIS_MODE === 'string' && typeof data.REDIS_URL === 'string') {
      const problems = redisConfigProblems(data);
      if (problems.length > 0) throw new ConfigError(problems);
    }
    return result.data;
  }
  const problems = result.error.issues.map((issue) => {
    const name = issue.path.join('.') || '(environment)';
    const missing = issue.code === 'invalid_type' && cleaned[String(issue.path[0])] === undefined;
    return missing ? `${name} is required but not set` : `${name}: ${issue.message}`;
  });
  throw new ConfigError(problems);
}

/** Reusable field schemas. */
export const envFields = {
  port: (fallback: number) => z.coerce.number().int().min(0).max(65535).default(fallback),
  url: (protocols: string[]) =>
    z.string().refine(
      (v) => {
        try {
          return protocols.includes(new URL(v).protocol.replace(/:$/, ''));
        } catch {
          return false;
        }
      },
      { message: `must be a URL with scheme ${protocols.join(' or ')}` },
    ),
  bool: (fallback: boolean) =>
    z
      .enum(['true', 'false', '1', '0', 'yes', 'no'])
      .default(fallback ? 'true' : 'false')
      .transform((v) => v === 'true' || v === '1' || v === 'yes'),
  list: () =>
    z
      .string()
      .default('')
      .transform((v) =>
        v
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean),
      ),
  logLevel: () => z.enum(['error', 'warn', 'info', 'http', 'verbose', 'debug', 'silly']).default('info'),
};

/** The connection settings every service shares. Defaults work against local services. */
export const commonEnv = {
  /** PostgreSQL, or a PgBouncer in transaction mode in front of it (docs/pgbouncer.md) */
  DATABASE_URL: envFields.url(['postgres', 'postgresql']).default('postgresql://postgres@127.0.0.1:5432/sts'),
  /** one redis:// or rediss:// URL; with REDIS_MODE=cluster, one or more seed nodes, comma-separated */
  REDIS_URL: z
    .string()
    .refine(isRedisUrlList, {
      message: 'must be a URL with scheme redis or rediss (cluster mode: a comma list of them)',
    })
    .default('redis://127.0.0.1:6379'),
  /** `standalone` (one server) or `cluster` (a Redis Cluster, ioredis' Cluster client): packages/common/src/redis.ts */
  REDIS_MODE: z.enum(REDIS_MODES).default('standalone'),
  /** put before every Redis key this process uses */
  REDIS_KEY_PREFIX: z.string().default('sts:'),
  /** RabbitMQ (amqps:// for TLS) */
  AMQP_URL: envFields.url(['amqp', 'amqps']).default('amqp://guest:guest@127.0.0.1:5672'),
  /** the lowest level written (JSON lines on stdout) */
  LOG_LEVEL: envFields.logLevel(),
};

/**
 * What needs a PostgreSQL session of its own (LISTEN, session advisory locks, the migration
 * runner) connects here, never through a transaction-mode PgBouncer that DATABASE_URL may name.
 * Unset: DATABASE_URL (no pooler in between). Only the services that hold such sessions read it.
 */
export const directDatabaseEnv = {
  /** PostgreSQL itself, for sessions (LISTEN, session advisory locks, migrations); unset: DATABASE_URL */
  DATABASE_DIRECT_URL: envFields.url(['postgres', 'postgresql']).optional(),
};

/** The database connection settings alone (the migration runner). */
export const databaseEnvSchema = z.object({ DATABASE_URL: commonEnv.DATABASE_URL, ...directDatabaseEnv });

/** DATABASE_DIRECT_URL, or DATABASE_URL when it is unset. */
export function directDatabaseUrl(env: { DATABASE_URL: string; DATABASE_DIRECT_URL?: string | undefined }): string {
  return env.DATABASE_DIRECT_URL ?? env.DATABASE_URL;
}
