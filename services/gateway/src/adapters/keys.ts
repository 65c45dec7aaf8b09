/**
 * API-key lookups: live-key filter → in-process cache → Redis (`apikey:<sha256>`) → PostgreSQL.
 * Each level trusts an answer for at most `ttlMs`, so a revoked key stops working everywhere
 * within 2 × ttlMs (4 s with the largest allowed ttl of 2 s); `key revoke` also deletes the Redis
 * entry and tells the gateways (apikey.changed), which drop it at once. A busy key is refreshed
 * ahead of its expiry, so calls never wait for the refresh. last_used_at is written in batches,
 * at most once a minute per key (a Prisma query holds the event loop about a millisecond).
 *
 * Unknown keys (the checksum is a public CRC32, so well-formed unknown keys are cheap to make):
 * - the filter of all live key hashes (adapters/liveKeys.ts) answers most of them: a hash it has
 *   never seen is unknown without Redis or PostgreSQL, whoever sends it; only its rare false
 *   positives (≤ 0.01 %) are looked up;
 * - lookups that turn out unknown are counted per client address (`unknownPerMinute` a minute,
 *   fixed windows, in process). The count decides who is slowed, never whether a valid key is
 *   answered: past it, that address's lookups the filter lets through run one at a time. Without
 *   a filter (not built yet), past it a key not in the cache is answered unknown as before;
 * - they are cached apart from the known keys, in their own bounded map, so a flood of them can
 *   never evict a valid key from the cache (each map drops its own oldest entry when full).
 */
import { apiKeyCacheKey, type RedisClient } from '@sts/common';
import { effectivePlan, type ApiKeyScope, type PlanName } from '@sts/core';
import type { Db } from '@sts/db';
import { gatewaySettingDefaults } from '../env';

export interface KeyIdentity {
  keyId: string;
  accountId: string;
  plan: PlanName;
  /** absent in entries cached before scopes existed: read */
  scope?: ApiKeyScope;
}

interface Cached {
  value: KeyIdentity | null;
  expires: number;
}

export interface KeyStore {
  /** the in-process answer while it is fresh: the identity, null (unknown/revoked), or undefined (ask lookup) */
  peek(hash: string): KeyIdentity | null | undefined;
  /** `clientAddress` counts unknown answers against that address (no counting without it) */
  lookup(hash: string, clientAddress?: string): Promise<KeyIdentity | null>;
  /** forgets the in-process answer for this hash (a key was created or revoked elsewhere) */
  evict(hash: string): void;
  /** remembers the key was used; flushed to api_keys.last_used_at by flush() */
  touch(keyId: string): void;
  flush(): Promise<void>;
}

export interface KeyStoreOptions {
  db: Db;
  redis: RedisClient;
  /** how long an answer is trusted, in process and in Redis; revocation takes at most 2 × ttlMs */
  ttlMs: number;
  /** api_keys.last_used_at is written at most once per this per key; default 60 s */
  lastUsedResolutionMs?: number;
  /** known keys kept in process; default 100,000 */
  maxEntries?: number;
  /** unknown keys kept in process (their own map); default 10,000 */
  maxUnknownEntries?: number;
  /** lookups answered "unknown" per client address per minute before the database is no longer asked; default 30 */
  unknownPerMinute?: number;
  /** the live-key filter: false = never a live key, undefined = no filter yet (ask the database) */
  filter?: { mightExist(hash: string): boolean | undefined };
}

/** One lookup at a time per slowed address: a flood from it costs one query at a time, and still gets answers. */
function createSlowLanes(): <T>(addr: string, work: () => Promise<T>) => Promise<T> {
  const lanes = new Map<string, Promise<unknown>>();
  return (addr, work) => {
    const next = (lanes.get(addr) ?? Promise.resolve()).then(work, work);
    const tail = next.catch(() => undefined);
    lanes.set(addr, tail);
    void tail.then(() => {
      if (lanes.get(addr) === tail) lanes.delete(addr);
    });
    return next;
  };
}

/** Fixed one-minute windows per client address, in process (bounded: cleared past 100,000 addresses). */
function createUnknownCounter(perMinute: number): { blocked(addr: string): boolean; count(addr: string): void } {
  const windows = new Map<string, { start: number; n: number }>();
  const current = (addr: string) => {
    const now = Date.now();
    const w = windows.get(addr);
    return w && now - w.start < 60_000 ? w : undefined;
  };
  return {
    blocked: (addr) => (current(addr)?.n ?? 0) >= perMinute,
    count(addr) {
      const w = current(addr);
      if (w) w.n++;
      else {
        if (windows.size >= 100_000) windows.clear();
        windows.set(addr, { start: Date.now(), n: 1 });
      }
    },
  };
}

/** Sets `key` in a bounded map, dropping the oldest entry when full. */
function setBounded<V>(map: Map<string, V>, key: string, value: V, max: number): void {
  map.delete(key);
  if (map.size >= max) {
    const oldest = map.keys().next();
    if (!oldest.done) map.delete(oldest.value);
  }
  map.set(key, value);
}

export function createKeyStore(opts: KeyStoreOptions): KeyStore {
  const { db, redis, ttlMs } = opts;
  const maxEntries = opts.maxEntries ?? 100_000;
  const maxUnknown = opts.maxUnknownEntries ?? 10_000;
  const resolution = opts.lastUsedResolutionMs ?? 60_000;
  // known keys and unknown keys in separate maps: unknown ones never push a valid key out
  const known = new Map<string, Cached>();
  const unknown = new Map<string, Cached>();
  const unknownByAddress = createUnknownCounter(
    opts.unknownPerMinute ?? gatewaySettingDefaults.UNKNOWN_KEY_MAX_PER_MIN,
  );
  const slowLane = createSlowLanes();
  const cached = (hash: string) => known.get(hash) ?? unknown.get(hash);
  const inflight = new Map<string, Promise<KeyIdentity | null>>();
  // keys used since the last flush, and when each key's last_used_at was last written
  let used = new Set<string>();
  const written = new Map<string, number>();

  async function load(hash: string): Promise<KeyIdentity | null> {
    if (ttlMs > 0) {
      const cached = await redis.get(apiKeyCacheKey(hash));
      if (cached !== null) return cached === '' ? null : (JSON.parse(cached) as KeyIdentity);
    }
    const row = await db.apiKey.findUnique({
      where: { keyHash: hash },
      select: {
        id: true,
        revokedAt: true,
        scope: true,
        account: { select: { id: true, plan: true, trialEndsAt: true } },
      },
    });
    const value: KeyIdentity | null =
      row && !row.revokedAt
        ? { keyId: row.id, accountId: row.account.id, plan: effectivePlan(row.account), scope: row.scope }
        : null;
    if (ttlMs > 0) await redis.set(apiKeyCacheKey(hash), value ? JSON.stringify(value) : '', 'PX', ttlMs);
    return value;
  }

  /** one load per key at a time; its answer is trusted in process for ttlMs from when it arrives */
  function refresh(hash: string): Promise<KeyIdentity | null> {
    let p = inflight.get(hash);
    if (!p) {
      p = load(hash)
        .then((value) => {
          if (ttlMs > 0) {
            const entry = { value, expires: Date.now() + ttlMs };
            if (value) {
              unknown.delete(hash);
              setBounded(known, hash, entry, maxEntries);
            } else {
              known.delete(hash);
              setBounded(unknown, hash, entry, maxUnknown);
            }
          }
          return value;
        })
        .finally(() => inflight.delete(hash));
      inflight.set(hash, p);
    }
    return p;
  }

  return {
    peek(hash) {
      const hit = cached(hash);
      if (!hit) return undefined;
      const left = hit.expires - Date.now();
      if (left <= 0) return undefined;
      // refresh ahead in the second half of the entry's life, so a busy key never waits for it
      if (left < ttlMs / 2 && !inflight.has(hash)) refresh(hash).catch(() => undefined);
      return hit.value;
    },
    async lookup(hash, clientAddress) {
      const hit = cached(hash);
      if (hit && hit.expires > Date.now()) return hit.value;
      const maybe = opts.filter?.mightExist(hash);
      if (maybe === false) {
        // never a live key: no Redis, no database
        if (clientAddress !== undefined) unknownByAddress.count(clientAddress);
        return null;
      }
      if (clientAddress === undefined) return refresh(hash);
      if (unknownByAddress.blocked(clientAddress)) {
        // without a filter, this address already made too many unknown-key lookups: no Redis, no database
        if (maybe === undefined) return null;
        return slowLane(clientAddress, () => refresh(hash));
      }
      const value = await refresh(hash);
      if (value === null) unknownByAddress.count(clientAddress);
      return value;
    },
    evict(hash) {
      known.delete(hash);
      unknown.delete(hash);
    },
    touch(keyId) {
      used.add(keyId);
    },
    async flush() {
      if (used.size === 0) return;
      const now = Date.now();
      const due: string[] = [];
      for (const id of used) if (now - (written.get(id) ?? 0) >= resolution) due.push(id);
      used = new Set();
      if (due.length === 0) return;
      if (written.size > maxEntries) written.clear();
      for (const id of due) written.set(id, now);
      try {
        await db.apiKey.updateMany({ where: { id: { in: due } }, data: { lastUsedAt: new Date(now) } });
      } catch (err) {
        for (const id of due) written.delete(id);
        throw err;
      }
    },
  };
}
