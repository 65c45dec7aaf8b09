/**
 * Idempotency-Key records in Redis (`idem:<account>:<sha256 of the key>`, 24 h): the first call
 * with a key claims it (SET NX, "pending" with the request's fingerprint); when it has answered,
 * the answer is kept under the same key and replayed to every later call with the same key and the
 * same request. Keys are per account, so one customer's keys never meet another's.
 *
 * Concurrent duplicates: only the SET NX winner acts; the others wait (bounded) for its answer and
 * replay it, or get 409 IDEMPOTENCY_KEY_IN_USE when it takes longer than the wait.
 *
 * A kept answer may hold webhook signing secrets (create, set, rotate), so it rests in Redis only
 * sealed by the secret box (SECRETS_ENCRYPTION_KEY), with the Redis key as associated data: a
 * sealed answer copied under another account's or key's entry does not open. The box is asked for
 * before the claim, so a read-api without the key refuses (503) before acting, never after.
 */
import { createHash } from 'node:crypto';
import type { RedisClient } from '@sts/common';
import type { SecretBox } from '@sts/core';

interface StoredAnswer {
  status: number;
  json: string;
}

type Claim =
  /** this call owns the key: act, then complete() or release() */
  | { kind: 'claimed' }
  /** an earlier call with this key and request answered: send this again */
  | { kind: 'replay'; answer: StoredAnswer }
  /** the key was used for another request */
  | { kind: 'mismatch' }
  /** an earlier call with this key is still running */
  | { kind: 'in_progress' }
  /** the kept answer no longer opens (its encryption key is gone from the keyring) */
  | { kind: 'unreadable' };

export interface IdempotencyStore {
  claim(accountId: string, key: string, fingerprint: string): Promise<Claim>;
  complete(accountId: string, key: string, fingerprint: string, answer: StoredAnswer): Promise<void>;
  /** gives the key up (the call failed in a way a retry should act on) */
  release(accountId: string, key: string): Promise<void>;
}

interface Entry {
  fp: string;
  /** the answer as JSON, sealed by the secret box under the entry's Redis key */
  sealed?: string;
  /** an answer kept unsealed: never replayed (it counts as unreadable) */
  answer?: unknown;
}

export interface IdempotencyOptions {
  /** how long an answer is kept and replayed */
  ttlSec: number;
  /** seals kept answers (throws NotConfiguredError without SECRETS_ENCRYPTION_KEY) */
  box: () => SecretBox;
  /**
   * how long a claim without an answer holds the key (a read-api that died mid-call must not block
   * the key for the whole day); default 120 s, above the longest call (the gateway gives up at 10 s)
   */
  pendingTtlSec?: number;
  /** how long a duplicate waits for the first call's answer; default 5 s */
  waitMs?: number;
  pollMs?: number;
}

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

export function createIdempotencyStore(redis: RedisClient, opts: IdempotencyOptions): IdempotencyStore {
  const waitMs = opts.waitMs ?? 5000;
  const pollMs = opts.pollMs ?? 50;
  const pendingTtlSec = opts.pendingTtlSec ?? 120;
  const keyOf = (accountId: string, key: string) => `idem:${accountId}:${sha256(key)}`;

  async function read(k: string): Promise<Entry | null> {
    const raw = await redis.get(k);
    return raw === null ? null : (JSON.parse(raw) as Entry);
  }

  function open(k: string, sealed: string): Claim {
    try {
      return { kind: 'replay', answer: JSON.parse(opts.box().decrypt(sealed, k)) as StoredAnswer };
    } catch {
      return { kind: 'unreadable' };
    }
  }

  return {
    async claim(accountId, key, fingerprint) {
      opts.box();
      const k = keyOf(accountId, key);
      const deadline = Date.now() + waitMs;
      for (;;) {
        const set = await redis.set(k, JSON.stringify({ fp: fingerprint } satisfies Entry), 'EX', pendingTtlSec, 'NX');
        if (set === 'OK') return { kind: 'claimed' };
        const entry = await read(k);
        if (entry === null) continue; // released or expired between the two calls: try again
        if (entry.fp !== fingerprint) return { kind: 'mismatch' };
        if (entry.sealed !== undefined) return open(k, entry.sealed);
        if (entry.answer !== undefined) return { kind: 'unreadable' };
        if (Date.now() >= deadline) return { kind: 'in_progress' };
        await new Promise((r) => setTimeout(r, pollMs));
      }
    },
    async complete(accountId, key, fingerprint, answer) {
      const k = keyOf(accountId, key);
      const sealed = opts.box().encrypt(JSON.stringify(answer), k);
      await redis.set(k, JSON.stringify({ fp: fingerprint, sealed } satisfies Entry), 'EX', opts.ttlSec);
    },
    async release(accountId, key) {
      await redis.del(keyOf(accountId, key));
    },
  };
}
