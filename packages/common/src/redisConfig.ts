/**
 * REDIS_MODE / REDIS_URL / REDIS_KEY_PREFIX checks without I/O (used by parseEnv and createRedis;
 * the clients themselves are built in redis.ts).
 */
export type RedisMode = 'standalone' | 'cluster';
export const REDIS_MODES = ['standalone', 'cluster'] as const;

export interface RedisEnv {
  REDIS_URL?: string;
  REDIS_MODE?: string;
  REDIS_KEY_PREFIX?: string;
}

export interface RedisConfig {
  mode: RedisMode;
  /** the URLs as given (standalone: exactly one) */
  urls: URL[];
  keyPrefix: string;
}

export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

/** the comma-separated parts of REDIS_URL (empty parts dropped) */
export function splitRedisUrls(value: string): string[] {
  return value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/** true when `value` is one or more comma-separated redis:// or rediss:// URLs */
export function isRedisUrlList(value: string): boolean {
  const parts = splitRedisUrls(value);
  return (
    parts.length > 0 &&
    parts.every((p) => {
      try {
        const u = new URL(p);
        return (u.protocol === 'redis:' || u.protocol === 'rediss:') && u.hostname !== '';
      } catch {
        return false;
      }
    })
  );
}

/**
 * The problems with a Redis configuration, each naming the variable and never echoing a value
 * (URLs carry passwords). Empty when it is usable.
 */
export function redisConfigProblems(env: RedisEnv): string[] {
  const mode = env.REDIS_MODE || 'standalone';
  const url = env.REDIS_URL || DEFAULT_REDIS_URL;
  const problems: string[] = [];
  if (!(REDIS_MODES as readonly string[]).includes(mode))
    return [`REDIS_MODE: must be one of ${REDIS_MODES.join(', ')}`];
  if (!isRedisUrlList(url)) return ['REDIS_URL: must be a URL with scheme redis or rediss'];
  const urls = splitRedisUrls(url).map((u) => new URL(u));
  if (mode === 'standalone' && urls.length > 1)
    problems.push(
      'REDIS_URL: lists several addresses, but REDIS_MODE is standalone (set REDIS_MODE=cluster for a Redis Cluster, or give one URL)',
    );
  if (mode === 'cluster') {
    if (urls.some((u) => u.pathname !== '' && u.pathname !== '/' && u.pathname !== '/0'))
      problems.push('REDIS_URL: a Redis Cluster has only database 0; remove the database number from the URL');
    if (new Set(urls.map((u) => u.protocol)).size > 1)
      problems.push('REDIS_URL: mixes redis:// and rediss:// seed nodes; use one scheme for the whole cluster');
    if (/[{}]/.test(env.REDIS_KEY_PREFIX ?? ''))
      problems.push(
        'REDIS_KEY_PREFIX: must not contain { or } in cluster mode (a hash tag in the prefix would put every key in one slot)',
      );
  }
  return problems;
}
