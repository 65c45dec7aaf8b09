/**
 * A flood of well-formed unknown API keys (the checksum is a public
 * CRC32) is limited per client address (then unknown without a database query), and never
 * evicts a valid key from the gateway's key cache. Real PostgreSQL and Redis.
 */
import { apiKeyCacheKey, createRedis } from '@sts/common';
import { generateApiKey, hashApiKey } from '@sts/core';
import { createDbClient, type Db } from '@sts/db';
import { createAccountWithKey, createTestDatabase, createTestRedis } from '@sts/testing';
import { KeyFilter } from '../domain/keyFilter';
import { createKeyStore } from './keys';
import { clientAddress } from '../http/proxy';

let dbHandle: { url: string; drop(): Promise<void> };
let redisHandle: { url: string; prefix: string; cleanup(): Promise<void> };
let db: Db;
let redis: ReturnType<typeof createRedis>;

beforeAll(async () => {
  dbHandle = await createTestDatabase();
  redisHandle = createTestRedis();
  db = createDbClient({ url: dbHandle.url, poolSize: 2 });
  redis = createRedis({ REDIS_URL: redisHandle.url, REDIS_MODE: 'standalone', REDIS_KEY_PREFIX: redisHandle.prefix });
});

afterAll(async () => {
  redis?.disconnect();
  await db?.$disconnect();
  await redisHandle?.cleanup();
  await dbHandle?.drop();
});

/** the db with its key lookups counted */
function counted(): { db: Db; queries: () => number } {
  let n = 0;
  const apiKey = new Proxy(db.apiKey, {
    get(target, prop, receiver) {
      if (prop === 'findUnique')
        return (...args: Parameters<Db['apiKey']['findUnique']>) => {
          n++;
          return target.findUnique(...args);
        };
      return Reflect.get(target, prop, receiver) as unknown;
    },
  });
  const wrapped = new Proxy(db, {
    get: (target, prop, receiver) => (prop === 'apiKey' ? apiKey : (Reflect.get(target, prop, receiver) as unknown)),
  });
  return { db: wrapped, queries: () => n };
}

const unknownHash = () => hashApiKey(generateApiKey().key);

describe('gateway key store under an unknown-key flood', () => {
  it('limits unknown-key lookups per client address, then answers unknown without a query', async () => {
    const c = counted();
    const store = createKeyStore({ db: c.db, redis, ttlMs: 2000, unknownPerMinute: 5 });
    for (let i = 0; i < 5; i++) expect(await store.lookup(unknownHash(), '198.51.100.1')).toBeNull();
    expect(c.queries()).toBe(5);
    for (let i = 0; i < 200; i++) expect(await store.lookup(unknownHash(), '198.51.100.1')).toBeNull();
    expect(c.queries()).toBe(5); // no database query past the limit
    // another address is not affected, and a valid key from it is found
    const valid = await createAccountWithKey(db, 'starter');
    const found = await store.lookup(hashApiKey(valid.key), '198.51.100.2');
    expect(found?.accountId).toBe(valid.accountId);
    expect(await store.lookup(unknownHash(), '198.51.100.2')).toBeNull();
    expect(c.queries()).toBe(7);
  });

  it('with a live-key filter: unknown keys cost no query, and a flooding address still gets its valid key', async () => {
    const c = counted();
    const valid = await createAccountWithKey(db, 'starter');
    const live = KeyFilter.of([hashApiKey(valid.key)], 10);
    const store = createKeyStore({
      db: c.db,
      redis,
      ttlMs: 2000,
      unknownPerMinute: 5,
      filter: { mightExist: (h) => live.mightContain(h) },
    });
    for (let i = 0; i < 500; i++) expect(await store.lookup(unknownHash(), '198.51.100.7')).toBeNull();
    expect(c.queries()).toBe(0);
    // past the per-address count, a live key from that address is still answered
    expect((await store.lookup(hashApiKey(valid.key), '198.51.100.7'))?.accountId).toBe(valid.accountId);
    expect(c.queries()).toBe(1);
    // a revoked key's answer is dropped on evict(): the next lookup asks again
    await db.apiKey.updateMany({ where: { accountId: valid.accountId }, data: { revokedAt: new Date() } });
    await redis.del(apiKeyCacheKey(hashApiKey(valid.key)));
    store.evict(hashApiKey(valid.key));
    expect(await store.lookup(hashApiKey(valid.key), '198.51.100.7')).toBeNull();
  });

  it('never evicts a valid key for unknown ones (separate bounded caches)', async () => {
    const c = counted();
    const store = createKeyStore({
      db: c.db,
      redis,
      // long enough that the entry cannot simply expire during the flood on a slow machine
      ttlMs: 120_000,
      maxEntries: 10,
      maxUnknownEntries: 50,
      unknownPerMinute: 1000,
    });
    const valid = await createAccountWithKey(db, 'free');
    const hash = hashApiKey(valid.key);
    expect((await store.lookup(hash, '203.0.113.1'))?.keyId).toBeDefined();
    for (let i = 0; i < 300; i++) await store.lookup(unknownHash(), `192.0.2.${i % 250}`);
    // still answered from the process: no lookup needed
    expect(store.peek(hash)?.accountId).toBe(valid.accountId);
  });

  it('takes the client address from the socket, or from X-Forwarded-For behind trusted proxies', () => {
    const req = (xff?: string) => ({
      method: 'GET',
      target: '/',
      path: '/',
      headers: (xff ? { 'x-forwarded-for': xff } : {}) as Record<string, string>,
      body: null,
      requestId: 'r',
      remoteAddress: '10.0.0.9',
    });
    expect(clientAddress(req('1.2.3.4'), 0)).toBe('10.0.0.9');
    expect(clientAddress(req('6.6.6.6, 1.2.3.4'), 1)).toBe('1.2.3.4'); // a forged left entry is ignored
    expect(clientAddress(req(), 1)).toBe('10.0.0.9');
  });
});
