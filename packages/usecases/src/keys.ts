/**
 * API keys: the plaintext is returned once at creation; only its SHA-256 and a display prefix are
 * stored. A revocation evicts the key's cached lookup when `evictApiKey` is given; either way the
 * gateways' key cache TTL (5 s) bounds how long a revoked key still works.
 */
import { evictCachedApiKey } from '@sts/common';
import { generateApiKey } from '@sts/core';
import { idOrNotFound, loadAccount, requireVerified, type Ctx } from './context';
import { NotFoundError, ValidationError } from './errors';
import type { ApiKeyView, CreatedApiKey } from './types';

const KEY_NAME_MAX = 60;
/** live (unrevoked) keys per account: enough for rotation across environments, bounded against abuse */
export const MAX_ACTIVE_KEYS = 20;

const keySelect = {
  id: true,
  name: true,
  prefix: true,
  createdAt: true,
  lastUsedAt: true,
  revokedAt: true,
} as const;

export interface RevokedApiKey extends ApiKeyView {
  revokedAt: Date;
  /** false: the cache was not reachable, so the key stops working within the 5 s TTL instead */
  cacheEvicted: boolean;
}

export interface KeyUseCases {
  create(accountId: string, input?: { name?: string }): Promise<CreatedApiKey>;
  /** newest first, revoked ones included (with revokedAt) */
  list(accountId: string): Promise<ApiKeyView[]>;
  /** idempotent; another account's key id is NotFound */
  revoke(accountId: string, keyId: string): Promise<RevokedApiKey>;
}

export interface KeyAdminUseCases {
  /** `key revoke --prefix`: the admin's way, across accounts */
  revokeKeyByPrefix(prefix: string): Promise<RevokedApiKey & { accountId: string }>;
}

function keyName(raw: string | undefined): string {
  if (raw === undefined) return 'default';
  const name = raw.trim().replace(/\s+/g, ' ');
  if (name === '') return 'default';
  if (name.length > KEY_NAME_MAX) throw new ValidationError('name', `must be at most ${KEY_NAME_MAX} characters`);
  if (/\p{Cc}/u.test(name)) throw new ValidationError('name', 'must not contain control characters');
  return name;
}

export function keyUseCases(ctx: Ctx): { keys: KeyUseCases; admin: KeyAdminUseCases } {
  const { db } = ctx;

  async function revokeRow(row: { id: string; keyHash: string; revokedAt: Date | null }) {
    let revokedAt = row.revokedAt;
    if (!revokedAt) {
      revokedAt = ctx.now();
      // only the first revocation sets the time
      await db.apiKey.updateMany({ where: { id: row.id, revokedAt: null }, data: { revokedAt } });
    }
    const cacheEvicted = ctx.opts.evictApiKey ? await ctx.opts.evictApiKey(row.keyHash).catch(() => false) : false;
    const fresh = await db.apiKey.findUniqueOrThrow({
      where: { id: row.id },
      select: { ...keySelect, accountId: true },
    });
    return { ...fresh, revokedAt: fresh.revokedAt ?? revokedAt, cacheEvicted };
  }

  const keys: KeyUseCases = {
    async create(accountId, input) {
      const name = keyName(input?.name);
      const account = await loadAccount(ctx, accountId);
      requireVerified(ctx, account, 'create API keys');
      const active = await db.apiKey.count({ where: { accountId: account.id, revokedAt: null } });
      if (active >= MAX_ACTIVE_KEYS) {
        throw new ValidationError('name', `an account can have ${MAX_ACTIVE_KEYS} active keys; revoke one first`);
      }
      const k = generateApiKey();
      const row = await db.apiKey.create({
        data: { accountId: account.id, keyHash: k.hash, prefix: k.prefix, name },
        select: keySelect,
      });
      return { ...row, key: k.key };
    },

    async list(accountId) {
      const account = await loadAccount(ctx, accountId);
      return db.apiKey.findMany({
        where: { accountId: account.id },
        select: keySelect,
        orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
      });
    },

    async revoke(accountId, keyId) {
      const message = `no API key with id ${keyId}`;
      const id = idOrNotFound(keyId, 'apiKey', message);
      const row = await db.apiKey.findFirst({
        where: { id, accountId: idOrNotFound(accountId, 'apiKey', message) },
        select: { id: true, keyHash: true, revokedAt: true },
      });
      if (!row) throw new NotFoundError('apiKey', message);
      const { accountId: _owner, ...view } = await revokeRow(row);
      return view;
    },
  };

  const admin: KeyAdminUseCases = {
    async revokeKeyByPrefix(prefix) {
      const row = await db.apiKey.findUnique({
        where: { prefix: prefix.trim() },
        select: { id: true, keyHash: true, revokedAt: true },
      });
      if (!row) throw new NotFoundError('apiKey', `no API key with prefix ${prefix}`);
      return revokeRow(row);
    },
  };

  return { keys, admin };
}

/** An `evictApiKey` over a Redis client whose keyPrefix is the gateways' (REDIS_KEY_PREFIX). */
export function evictApiKeyVia(redis: { del(key: string): Promise<number> }): (keyHash: string) => Promise<boolean> {
  return (keyHash) => evictCachedApiKey(redis, keyHash);
}
