/**
 * The one home of the gateways' cached API-key lookup in Redis: its key name, and its eviction
 * (a revocation by the dashboard or the CLI drops it so the revocation is immediate; the gateways'
 * short TTLs bound it when Redis is unreachable). The client's keyPrefix must be the gateways'
 * (REDIS_KEY_PREFIX).
 */

/** `apikey:<sha256 of the key>`, under the client's REDIS_KEY_PREFIX */
export const apiKeyCacheKey = (keyHash: string): string => `apikey:${keyHash}`;

/** Drops a key's cached lookup; resolves false when Redis was not reachable (never throws). */
export async function evictCachedApiKey(
  redis: { del(key: string): Promise<number> },
  keyHash: string,
): Promise<boolean> {
  try {
    await redis.del(apiKeyCacheKey(keyHash));
    return true;
  } catch {
    return false;
  }
}
