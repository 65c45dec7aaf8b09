/**
 * API keys: the plaintext is returned once at creation; only its SHA-256 and a display prefix are
 * stored. A revocation evicts the key's cached lookup when `evictApiKey` is given; either way the
 * gateways' key cache TTL bounds how long a revoked key still works. Creation and revocation are
 * announced to the gateways (apikey.changed: their filter of live keys, their caches) when a
 * publisher is given; best effort, as the gateways also rebuild the filter from PostgreSQL.
 */
import { evictCachedApiKey } from '@sts/common';
import { generateApiKey, isApiKeyScope, type ApiKeyScope } from '@sts/core';
import { idOrNotFound, loadAccount, requireVerified, type Ctx } from './context';
import { NotFoundError, ValidationError } from './errors';
import type { KeyRevocation } from './repositories/keys';
import type { ApiKeyView, CreatedApiKey } from './types';

const KEY_NAME_MAX = 60;
/** live (unrevoked) keys per account: enough for rotation across environments, bounded against abuse */
export const MAX_ACTIVE_KEYS = 20;

export interface RevokedApiKey extends ApiKeyView {
  revokedAt: Date;
  /** false: the cache was not reachable, so the key stops working within the 5 s TTL instead */
  cacheEvicted: boolean;
}

export interface KeyUseCases {
  /** `scope`: 'read' (default) or 'manage'; anything else is a ValidationError on `scope` */
  create(accountId: string, input?: { name?: string; scope?: string }): Promise<CreatedApiKey>;
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

function keyScope(raw: string | undefined): ApiKeyScope {
  if (raw === undefined || raw === '') return 'read';
  const scope = raw.trim().toLowerCase();
  if (!isApiKeyScope(scope)) throw new ValidationError('scope', 'must be read or manage');
  return scope;
}

export function keyUseCases(ctx: Ctx): { keys: KeyUseCases; admin: KeyAdminUseCases } {
  const repo = ctx.repos.keys;

  /** tells the gateways; a broker failure never fails the change (they resynchronise from PostgreSQL) */
  async function announce(accountId: string, keyHash: string, change: 'created' | 'revoked'): Promise<void> {
    if (!ctx.opts.publisher) return;
    await ctx
      .publish(
        'apikey.changed',
        { keyHash, change, occurredAt: ctx.now().toISOString() },
        { accountId },
        { limited: false },
      )
      .catch(() => undefined);
  }

  async function revokeRow(row: KeyRevocation): Promise<RevokedApiKey & { accountId: string }> {
    let revokedAt = row.revokedAt;
    if (!revokedAt) {
      revokedAt = ctx.now();
      // only the first revocation sets the time
      await repo.revoke(row.id, revokedAt);
    }
    const cacheEvicted = ctx.opts.evictApiKey ? await ctx.opts.evictApiKey(row.keyHash).catch(() => false) : false;
    const fresh = await repo.get(row.id);
    if (!fresh) throw new NotFoundError('apiKey', `no API key with id ${row.id}`);
    await announce(fresh.accountId, row.keyHash, 'revoked');
    return { ...fresh, revokedAt: fresh.revokedAt ?? revokedAt, cacheEvicted };
  }

  const keys: KeyUseCases = {
    async create(accountId, input) {
      const name = keyName(input?.name);
      const scope = keyScope(input?.scope);
      const account = await loadAccount(ctx, accountId);
      requireVerified(ctx, account, 'create API keys');
      const active = await repo.countActive(account.id);
      if (active >= MAX_ACTIVE_KEYS) {
        throw new ValidationError('name', `an account can have ${MAX_ACTIVE_KEYS} active keys; revoke one first`);
      }
      const k = generateApiKey();
      const row = await repo.create({ accountId: account.id, keyHash: k.hash, prefix: k.prefix, name, scope });
      await announce(account.id, k.hash, 'created');
      return { ...row, key: k.key };
    },

    async list(accountId) {
      const account = await loadAccount(ctx, accountId);
      return repo.list(account.id);
    },

    async revoke(accountId, keyId) {
      const message = `no API key with id ${keyId}`;
      const id = idOrNotFound(keyId, 'apiKey', message);
      const row = await repo.findOwned(idOrNotFound(accountId, 'apiKey', message), id);
      if (!row) throw new NotFoundError('apiKey', message);
      const { accountId: _owner, ...view } = await revokeRow(row);
      return view;
    },
  };

  const admin: KeyAdminUseCases = {
    async revokeKeyByPrefix(prefix) {
      const row = await repo.findByPrefix(prefix.trim());
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
