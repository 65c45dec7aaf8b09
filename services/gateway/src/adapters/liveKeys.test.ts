/**
 * The live-key filter against real PostgreSQL: built from the unrevoked keys, it learns a key
 * inserted without an event (a seed, a lost message) at the next sync, and a rebuild sheds a
 * revoked one.
 */
import { hashApiKey } from '@sts/core';
import { createDbClient, type Db } from '@sts/db';
import { createLogger } from '@sts/common';
import { createAccountWithKey, createTestDatabase } from '@sts/testing';
import { createLiveKeys } from './liveKeys';

let dbHandle: Awaited<ReturnType<typeof createTestDatabase>>;
let db: Db;

beforeAll(async () => {
  dbHandle = await createTestDatabase();
  db = createDbClient({ url: dbHandle.url, poolSize: 2 });
});

afterAll(async () => {
  await db?.$disconnect();
  await dbHandle?.drop();
});

it('builds from PostgreSQL, syncs keys inserted without an event, and sheds revoked keys on rebuild', async () => {
  const before = await createAccountWithKey(db, 'free');
  const live = createLiveKeys({ db, logger: createLogger({ service: 'live-keys-test', level: 'error' }) });
  expect(live.mightExist(hashApiKey(before.key))).toBeUndefined();
  await live.rebuild();
  expect(live.mightExist(hashApiKey(before.key))).toBe(true);
  const seeded = await createAccountWithKey(db, 'starter');
  expect(live.mightExist(hashApiKey(seeded.key))).toBe(false);
  await live.sync();
  expect(live.mightExist(hashApiKey(seeded.key))).toBe(true);
  await db.apiKey.updateMany({ where: { accountId: before.accountId }, data: { revokedAt: new Date() } });
  await live.rebuild();
  expect(live.mightExist(hashApiKey(before.key))).toBe(false);
  expect(live.size).toBe(1);
});
