/**
 * The notice store's digest on a real PostgreSQL database: an account with thousands of waiting
 * notices gets one digest listing the 50 oldest and counting the rest, and building it reads no
 * more than those 50 notices from the database (the rest are counted there, not loaded).
 */
import { createDbClient, type Db } from '@sts/db';
import { createTestDatabase, type TestDatabase } from '@sts/testing';
import { MAX_DIGEST_ITEMS } from './digest';
import { createNoticeStore } from './notices';

let testDb: TestDatabase;
let db: Db;

beforeAll(async () => {
  testDb = await createTestDatabase();
  db = createDbClient({ url: testDb.url, poolSize: 2 });
});

afterAll(async () => {
  await db?.$disconnect();
  await testDb?.drop();
});

/** `db` whose transactions count the rows their raw queries bring back */
function counting(): { db: Db; rows: () => number } {
  let rows = 0;
  const countRows = (tx: object) =>
    new Proxy(tx, {
      get(target, prop, receiver) {
        const v = Reflect.get(target, prop, receiver) as unknown;
        if (prop !== '$queryRaw' || typeof v !== 'function') return v;
        return async (...args: unknown[]) => {
          const result = (await (v as (...a: unknown[]) => Promise<unknown>).apply(target, args)) as unknown[];
          rows += result.length;
          return result;
        };
      },
    });
  const wrapped = new Proxy(db, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver) as unknown;
      if (prop !== '$transaction' || typeof v !== 'function') return v;
      return (fn: (tx: object) => Promise<unknown>, options?: unknown) =>
        (v as (f: unknown, o: unknown) => Promise<unknown>).call(target, (tx: object) => fn(countRows(tx)), options);
    },
  });
  return { db: wrapped, rows: () => rows };
}

it('a digest of 3,000 notices lists the 50 oldest and counts the rest, reading only those 50', async () => {
  const account = await db.account.create({
    data: { email: 'many@example.test', passwordHash: 'x', emailVerifiedAt: new Date() },
  });
  const n = 3000;
  const start = Date.now() - 3_600_000;
  await db.$executeRaw`
    INSERT INTO mail_notices (dedup_key, account_id, kind, spec, created_at)
    SELECT 'k' || i, ${account.id}::uuid, 'target',
           jsonb_build_object('kind', 'target', 'status', 'suspended', 'username', 'user' || i,
                              'newUsername', NULL, 'monitors', 1),
           ${new Date(start)}::timestamptz + i * interval '1 millisecond'
    FROM generate_series(1, ${n}) AS i`;
  const { db: observed, rows } = counting();
  const store = createNoticeStore(observed, 'http://dash.example.test');

  await expect(store.digestDue(60_000, 10)).resolves.toBe(1);

  expect(rows()).toBeLessThanOrEqual(MAX_DIGEST_ITEMS + 5);
  const mails = await db.mailOutbox.findMany({ where: { accountId: account.id } });
  expect(mails).toHaveLength(1);
  const text = mails[0]!.textBody;
  const listed = text.split('\n').filter((l) => l.startsWith('- @'));
  expect(listed).toHaveLength(MAX_DIGEST_ITEMS);
  expect(listed[0]).toContain('@user1 ');
  expect(listed[MAX_DIGEST_ITEMS - 1]).toContain(`@user${MAX_DIGEST_ITEMS} `);
  expect(text).toContain(`and ${n - MAX_DIGEST_ITEMS} more.`);
  expect(mails[0]!.subject).toBe(`${n} notices about your Social Timeline account`);
  expect(await db.mailNotice.count({ where: { accountId: account.id, digestedAt: null } })).toBe(0);
  // nothing left to digest: no second mail
  await expect(store.digestDue(60_000, 10)).resolves.toBe(0);
});
