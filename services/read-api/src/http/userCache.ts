/**
 * The hot path of GET /api/v1/users/:username: the serialised `{"data": <user>}` body per
 * username, kept a few seconds (TTL) in a bounded map (oldest evicted first), with concurrent misses for one username
 * sharing a single lookup. Unknown users are cached as null for the same TTL. A TTL of 0 turns
 * caching off (every call reads the source; concurrent lookups are still shared).
 */
import type { SocialSource } from '@sts/social';
import { userRecord } from '../domain/records';

export interface UserCache {
  /** the JSON body for the user, or null when the user does not exist */
  get(username: string): Promise<string | null>;
  clear(): void;
}

export function createUserCache(source: SocialSource, options: { ttlMs: number; maxEntries?: number }): UserCache {
  const ttl = options.ttlMs;
  const max = options.maxEntries ?? 10_000;
  const entries = new Map<string, { expires: number; json: string | null }>();
  const inflight = new Map<string, Promise<string | null>>();

  async function load(key: string, username: string): Promise<string | null> {
    try {
      const user = await source.getUser(username);
      const json = user ? `{"data":${JSON.stringify(userRecord(user))}}` : null;
      if (ttl > 0) {
        entries.delete(key);
        entries.set(key, { expires: Date.now() + ttl, json });
        if (entries.size > max) entries.delete(entries.keys().next().value!);
      }
      return json;
    } finally {
      inflight.delete(key);
    }
  }

  return {
    get(username) {
      const key = username.toLowerCase();
      if (ttl > 0) {
        const hit = entries.get(key);
        if (hit) {
          if (hit.expires > Date.now()) return Promise.resolve(hit.json);
          entries.delete(key);
        }
      }
      let pending = inflight.get(key);
      if (!pending) {
        pending = load(key, username);
        inflight.set(key, pending);
      }
      return pending;
    },
    clear() {
      entries.clear();
    },
  };
}
