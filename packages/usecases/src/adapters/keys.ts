/** API keys in PostgreSQL (Prisma). */
import type { Db, Prisma } from '@sts/db';
import type { KeysRepository } from '../repositories/keys';
import type { ApiKeyView } from '../types';

const keySelect = {
  id: true,
  name: true,
  scope: true,
  prefix: true,
  createdAt: true,
  lastUsedAt: true,
  revokedAt: true,
} as const satisfies Prisma.ApiKeySelect satisfies Record<keyof ApiKeyView, true>;

const revocationSelect = { id: true, keyHash: true, revokedAt: true } as const;

export function prismaKeys(db: Db): KeysRepository {
  return {
    countActive: (accountId) => db.apiKey.count({ where: { accountId, revokedAt: null } }),
    create: (data) => db.apiKey.create({ data, select: keySelect }),
    list: (accountId) =>
      db.apiKey.findMany({
        where: { accountId },
        select: keySelect,
        orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
      }),
    get: (id) => db.apiKey.findUnique({ where: { id }, select: { ...keySelect, accountId: true } }),
    findOwned: (accountId, id) => db.apiKey.findFirst({ where: { id, accountId }, select: revocationSelect }),
    findByPrefix: (prefix) => db.apiKey.findUnique({ where: { prefix }, select: revocationSelect }),
    async revoke(id, at) {
      await db.apiKey.updateMany({ where: { id, revokedAt: null }, data: { revokedAt: at } });
    },
  };
}
