/**
 * The one place Redis clients are built. REDIS_MODE picks the client:
 * - `standalone` (default): one server (or a primary behind a proxy/Sentinel-managed address),
 *   REDIS_URL is one `redis://` or `rediss://` URL, as before.
 * - `cluster`: a Redis Cluster through ioredis' Cluster client. REDIS_URL lists one or more seed
 *   nodes, comma-separated (`rediss://:pw@node-a:6379,rediss://:pw@node-b:6379`); the client
 *   discovers the rest of the cluster from them. User name, password and TLS (`rediss:`) come from
 *   the first URL and apply to every node; a cluster has only database 0, so a path other than
 *   `/` or `/0` is a configuration error.
 *
 * REDIS_KEY_PREFIX is applied by ioredis (keyPrefix) in both modes. In cluster mode it must not
 * contain `{` or `}`: a hash tag in the prefix would put every key of the system in one slot.
 * Keys that one command or script uses together carry a `{...}` hash tag after the prefix (the
 * gateway's quota: `{<account>}`), so they live in the same slot.
 */
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import { ConfigError } from './env';
import type { Logger } from './logger';
import {
  DEFAULT_REDIS_URL,
  redisConfigProblems,
  splitRedisUrls,
  type RedisConfig,
  type RedisEnv,
  type RedisMode,
} from './redisConfig';

/** Either client: both speak the same commands (and defineCommand), so adapters take this. */
export type RedisClient = Redis | Cluster;

/** Parses and checks the Redis settings; throws a ConfigError naming the variable. */
export function redisConfigFromEnv(env: RedisEnv): RedisConfig {
  const problems = redisConfigProblems(env);
  if (problems.length > 0) throw new ConfigError(problems);
  return {
    mode: (env.REDIS_MODE || 'standalone') as RedisMode,
    urls: splitRedisUrls(env.REDIS_URL || DEFAULT_REDIS_URL).map((u) => new URL(u)),
    keyPrefix: env.REDIS_KEY_PREFIX ?? '',
  };
}

export interface CreateRedisOptions {
  /** connect on the first command (default) or only on connect() (`lazyConnect: true`) */
  lazyConnect?: boolean;
  /**
   * false: commands fail at once while disconnected instead of waiting for a reconnect (the
   * gateway answers its JSON 503 rather than queueing calls)
   */
  enableOfflineQueue?: boolean;
  /** standalone: reconnect attempts a command waits through before failing (ioredis default 20) */
  maxRetriesPerRequest?: number | null;
  connectTimeout?: number;
  /** false: never reconnect (one-shot tools such as the admin CLI); default true */
  reconnect?: boolean;
  /** a service's logger: connection errors become `redis connection error` warnings (else unhandled) */
  logger?: Pick<Logger, 'warn'>;
}

/**
 * Builds the client REDIS_MODE asks for. Both clients prefix keys with REDIS_KEY_PREFIX and take
 * password and TLS from the URL(s).
 */
export function createRedis(env: RedisEnv, opts: CreateRedisOptions = {}): RedisClient {
  const client = newClient(env, opts);
  const logger = opts.logger;
  if (logger) client.on('error', (err: Error) => logger.warn('redis connection error', { err: err.message }));
  return client;
}

function newClient(env: RedisEnv, opts: CreateRedisOptions): RedisClient {
  const config = redisConfigFromEnv(env);
  const common = {
    ...(opts.lazyConnect !== undefined && { lazyConnect: opts.lazyConnect }),
    ...(opts.enableOfflineQueue !== undefined && { enableOfflineQueue: opts.enableOfflineQueue }),
  };
  if (config.mode === 'standalone') {
    const options: RedisOptions = {
      keyPrefix: config.keyPrefix,
      ...common,
      ...(opts.maxRetriesPerRequest !== undefined && { maxRetriesPerRequest: opts.maxRetriesPerRequest }),
      ...(opts.connectTimeout !== undefined && { connectTimeout: opts.connectTimeout }),
      ...(opts.reconnect === false && { retryStrategy: () => null }),
    };
    // ioredis reads host, port, user, password, database and TLS (rediss:) from the URL
    return new Redis(config.urls[0]!.toString(), options);
  }
  const first = config.urls[0]!;
  const tls = first.protocol === 'rediss:';
  const options: ClusterOptions = {
    keyPrefix: config.keyPrefix,
    ...common,
    ...(opts.reconnect === false && { clusterRetryStrategy: () => null }),
    redisOptions: {
      ...(first.username && { username: decodeURIComponent(first.username) }),
      ...(first.password && { password: decodeURIComponent(first.password) }),
      ...(tls && { tls: {} }),
      ...(opts.maxRetriesPerRequest !== undefined && { maxRetriesPerRequest: opts.maxRetriesPerRequest }),
      ...(opts.connectTimeout !== undefined && { connectTimeout: opts.connectTimeout }),
    },
    // With TLS, connect by the names the cluster announces so certificates match them (managed
    // clusters such as ElastiCache announce host names; ioredis' documented setting for them).
    ...(tls && {
      dnsLookup: (address: string, callback: (err: null, address: string) => void) => callback(null, address),
    }),
  };
  const nodes = config.urls.map((u) => ({ host: u.hostname.replace(/^\[|\]$/g, ''), port: Number(u.port || 6379) }));
  return new Cluster(nodes, options);
}
