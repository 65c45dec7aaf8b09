/** API keys as stored: the SHA-256 and a display prefix, never the key. */
import type { ApiKeyScope } from '@sts/core';
import type { ApiKeyView } from '../types';

type ApiKeyRecord = ApiKeyView & { accountId: string };

/** what a revocation needs of a key */
export interface KeyRevocation {
  id: string;
  keyHash: string;
  revokedAt: Date | null;
}

export interface KeysRepository {
  /** unrevoked keys of the account */
  countActive(accountId: string): Promise<number>;
  create(key: {
    accountId: string;
    keyHash: string;
    prefix: string;
    name: string;
    scope: ApiKeyScope;
  }): Promise<ApiKeyView>;
  /** newest first (createdAt, then id), revoked ones included */
  list(accountId: string): Promise<ApiKeyView[]>;
  get(id: string): Promise<ApiKeyRecord | null>;
  findOwned(accountId: string, id: string): Promise<KeyRevocation | null>;
  findByPrefix(prefix: string): Promise<KeyRevocation | null>;
  /** sets revokedAt when it is not set yet (only the first revocation sets the time) */
  revoke(id: string, at: Date): Promise<void>;
}
