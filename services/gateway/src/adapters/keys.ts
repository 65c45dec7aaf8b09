/**
 * API-key lookups: in-process cache → Redis (`apikey:<sha256>`) → PostgreSQL. Each level trusts
 * an answer for at most `ttlMs`, so a revoked key stops working everywhere within 2 × ttlMs
 * (4 s with the largest allowed ttl of 2 s); `key revoke` also deletes the Redis entry at once.
 * A busy key is refreshed ahead of its expiry, so calls never wait for the refresh. Unknown keys
 * are cached too, so a flood of bad keys does not reach the database. last_used_at is written in
 * batches, at most once a minute per key (a Prisma query holds the event loop about a millisecond).
 */
import { apiKeyCacheKey, type RedisClient } from '@sts/common';
import { effectivePlan, type PlanName } from '@sts/core';
import type { Db } from '@sts/db';

export interface KeyIdentity {
  keyId: string;
  accountId: string;
  plan: PlanName;
}

interface Cached {
  value: KeyIdentity | null;
  expires: number;
}

export interface KeyStore {
  /** the in-process answer while it is fresh: the identity, null (unknown/revoked), or undefined (ask lookup) */
  peek(hash: string): KeyIdentity | null | undefined;
  lookup(hash: string): Promise<KeyIdentity | null>;
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
  maxEntries?: number;
}

export function createKeyStore(opts: KeyStoreOptions): KeyStore {
  const { db, redis, ttlMs } = opts;
  const maxEntries = opts.maxEntries ?? 100_000;
  const resolution = opts.lastUsedResolutionMs ?? 60_000;
  const local = new Map<string, Cached>();
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
      select: { id: true, revokedAt: true, account: { select: { id: true, plan: true, trialEndsAt: true } } },
    });
    const value: KeyIdentity | null =
      row && !row.revokedAt ? { keyId: row.id, accountId: row.account.id, plan: effectivePlan(row.account) } : null;
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
            if (local.size >= maxEntries && !local.has(hash)) local.clear();
            local.set(hash, { value, expires: Date.now() + ttlMs });
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
      const hit = local.get(hash);
      if (!hit) return undefined;
      const left = hit.expires - Date.now();
      if (left <= 0) return undefined;
      // refresh ahead in the second half of the entry's life, so a busy key never waits for it
      if (left < ttlMs / 2 && !inflight.has(hash)) refresh(hash).catch(() => undefined);
      return hit.value;
    },
    async lookup(hash) {
      const hit = local.get(hash);
      if (hit && hit.expires > Date.now()) return hit.value;
      return refresh(hash);
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
