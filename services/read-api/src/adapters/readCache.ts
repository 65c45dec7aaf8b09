/**
 * read-api's cache in front of the X source: profile, timeline first page, one tweet and search
 * pages, serialised in Redis (shared by every replica) with a short TTL per kind, and identical
 * concurrent reads in one process sharing one upstream call (single-flight). "Not found" is
 * cached too. Errors are never cached: a read the X budget cannot afford (SourceBusyError) goes
 * out as 503 UPSTREAM_BUSY with Retry-After, and the next read tries again.
 *
 * Keys: `ra:x:<kind>:<sha256 of the normalised arguments>`. A TTL of 0 turns a kind off. The local
 * source is not wrapped (see README: its reads are index-bound and must show a new post at once).
 */
import { createHash } from 'node:crypto';
import type { RedisClient } from '@sts/common';
import type { Page, PageRequest, SocialSource, SocialTweet, SocialUser } from '@sts/social';

interface ReadCacheTtls {
  profileMs: number;
  timelineMs: number;
  tweetMs: number;
  searchMs: number;
}

export interface ReadCacheOptions {
  redis: RedisClient;
  ttls: ReadCacheTtls;
  /** a Redis failure falls back to the source; reported here */
  onError?: (err: unknown) => void;
}

/** Dates travel as ISO strings; `createdAt` fields come back as Dates. */
function revive(key: string, value: unknown): unknown {
  return key === 'createdAt' && typeof value === 'string' ? new Date(value) : value;
}

function keyOf(kind: string, parts: unknown[]): string {
  return `ra:x:${kind}:${createHash('sha256').update(JSON.stringify(parts)).digest('base64url')}`;
}

export function createCachedSource(source: SocialSource, options: ReadCacheOptions): SocialSource {
  const { redis, ttls } = options;
  const inflight = new Map<string, Promise<unknown>>();
  const report = (err: unknown) => options.onError?.(err);

  async function load<T>(key: string, ttlMs: number, read: () => Promise<T>): Promise<T> {
    const raw = await redis.get(key).catch((err: unknown) => (report(err), null));
    if (raw !== null) return (JSON.parse(raw, revive) as { v: T }).v;
    const value = await read();
    await redis.set(key, JSON.stringify({ v: value }), 'PX', ttlMs).catch(report);
    return value;
  }

  /** Cached for ttlMs (0: straight to the source), one call in flight per key in this process. */
  function cached<T>(kind: string, parts: unknown[], ttlMs: number, read: () => Promise<T>): Promise<T> {
    if (ttlMs <= 0) return read();
    const key = keyOf(kind, parts);
    const pending = inflight.get(key) as Promise<T> | undefined;
    if (pending) return pending;
    const p = load(key, ttlMs, read).finally(() => inflight.delete(key));
    inflight.set(key, p);
    return p;
  }

  return {
    name: source.name,
    getUser: (username): Promise<SocialUser | null> =>
      cached('user', [username.toLowerCase()], ttls.profileMs, () => source.getUser(username)),
    getUserTimeline: (username, page: PageRequest): Promise<Page<SocialTweet> | null> =>
      // only the first page: later pages are read once, by one caller, as they page on
      page.cursor === undefined
        ? cached('timeline', [username.toLowerCase(), page.limit], ttls.timelineMs, () =>
            source.getUserTimeline(username, page),
          )
        : source.getUserTimeline(username, page),
    getTweet: (id) => cached('tweet', [id], ttls.tweetMs, () => source.getTweet(id)),
    search: (query, page) =>
      cached('search', [query, page.limit, page.cursor ?? null], ttls.searchMs, () => source.search(query, page)),
    pollTweets: (username, request) => source.pollTweets(username, request),
  };
}
