/**
 * API-key lookups: in-process cache → Redis (`apikey:<sha256>`) → PostgreSQL. Each level trusts
 * an answer for at most `ttlMs`, so a revoked key stops working everywhere within 2 × ttlMs
 * (≤ 5 s); `key revoke` also deletes the Redis entry at once. Unknown keys are cached too, so a
 * flood of bad keys does not reach the database. last_used_at is written in batches.
 */
import type { Redis } from 'ioredis';
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

export const apiKeyCacheKey = (hash: string): string => `apikey:${hash}`;

export function createKeyStore(opts: { db: Db; redis: Redis; ttlMs: number; maxEntries?: number }): KeyStore {
  const { db, redis, ttlMs } = opts;
  const maxEntries = opts.maxEntries ?? 100_000;
  const local = new Map<string, Cached>();
  const inflight = new Map<string, Promise<KeyIdentity | null>>();
  let used = new Set<string>();

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

  return {
    peek(hash) {
      const hit = local.get(hash);
      return hit && hit.expires > Date.now() ? hit.value : undefined;
    },
    async lookup(hash) {
      const now = Date.now();
      const hit = local.get(hash);
      if (hit && hit.expires > now) return hit.value;
      let p = inflight.get(hash);
      if (!p) {
        p = load(hash).finally(() => inflight.delete(hash));
        inflight.set(hash, p);
      }
      const value = await p;
      if (ttlMs > 0) {
        if (local.size >= maxEntries) local.clear();
        local.set(hash, { value, expires: Date.now() + ttlMs });
      }
      return value;
    },
    touch(keyId) {
      used.add(keyId);
    },
    async flush() {
      if (used.size === 0) return;
      const ids = [...used];
      used = new Set();
      await db.apiKey.updateMany({ where: { id: { in: ids } }, data: { lastUsedAt: new Date() } });
    },
  };
}
