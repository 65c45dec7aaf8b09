/**
 * The repository's raw-SQL hot path against a real PostgreSQL database: the monitor look-up
 * returns what the Prisma model query returned, batched attempt writes resolve only once their
 * rows are committed (lingering ones too), and a bad row or a refused write fails only its own callers;
 * the claim of due deliveries keeps its rules with a backlog behind them.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { createSecretBox } from '@sts/core';
import { createDbClient, type Db } from '@sts/db';
import { createAccount, createHit, createMonitor, createTestDatabase, type MonitorFixture } from '@sts/testing';
import { isMissingParent, isTransientDbError, recordFillMark, type NewAttempt } from './attemptWriter';
import { createPrismaRepository, type DispatcherRepository } from './repository';

const box = createSecretBox(randomBytes(32));

describe('dispatcher repository (raw SQL hot path)', () => {
  let testDb: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;
  let repo: DispatcherRepository;
  let monitor: MonitorFixture;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    db = createDbClient({ url: testDb.url, poolSize: 4 });
    repo = createPrismaRepository(db);
    const account = await createAccount(db, 'starter');
    monitor = await createMonitor(db, box, { accountId: account.id, url: 'https://hooks.example.com/in' });
  });

  afterAll(async () => {
    await db.$disconnect();
    await testDb.drop();
  });

  function attempt(overrides: Partial<NewAttempt> = {}): NewAttempt {
    return {
      monitorId: monitor.id,
      hitId: null,
      event: 'monitor.hit',
      deliveryId: randomUUID(),
      url: 'https://hooks.example.com/in',
      outcome: 'delivered',
      statusCode: 200,
      latencyMs: 12,
      error: null,
      responseSnippet: '{"ok":true}',
      ...overrides,
    };
  }

  it('getMonitor returns the monitor, plan, trial and webhook exactly as the model query does', async () => {
    const trialEnds = new Date('2031-05-06T07:08:09.123Z');
    const free = await createAccount(db, 'free', trialEnds);
    const discord = await createMonitor(db, box, {
      accountId: free.id,
      url: 'https://discord.com/api/webhooks/123/abc',
      keywords: ['launch', 'año'],
      isActive: false,
    });
    await db.webhookEndpoint.updateMany({
      where: { monitorId: discord.id },
      data: {
        isBroken: true,
        brokenReason: 'Discord answered 404',
        consecutiveFailures: 9,
        firstFailureAt: new Date('2026-11-20T01:02:03.456Z'),
        disabledAt: new Date('2026-11-23T01:02:03.456Z'),
        // an overlapped rotation: the old secret still signs until then
        previousSecretCiphertext: 'v1.previous-secret-ciphertext',
        previousSecretUntil: new Date('2026-11-25T10:00:00Z'),
      },
    });
    const bare = await createMonitor(db, box, { accountId: free.id });
    const [a, b, c, missing] = await Promise.all([
      repo.getMonitor(discord.id),
      repo.getMonitor(bare.id),
      repo.getMonitor(monitor.id),
      repo.getMonitor(randomUUID()),
    ]);
    const viaModel = async (id: string) => {
      const r = await db.monitor.findUniqueOrThrow({
        where: { id },
        select: {
          id: true,
          accountId: true,
          targetUsername: true,
          keywords: true,
          isActive: true,
          account: { select: { plan: true, trialEndsAt: true } },
          webhook: {
            select: {
              id: true,
              url: true,
              kind: true,
              secretCiphertext: true,
              previousSecretCiphertext: true,
              previousSecretUntil: true,
              isBroken: true,
              brokenReason: true,
              consecutiveFailures: true,
              firstFailureAt: true,
              disabledAt: true,
              retryPolicy: true,
              ordering: true,
              heldCount: true,
            },
          },
        },
      });
      const { account, ...rest } = r;
      return { ...rest, plan: account.plan, trialEndsAt: account.trialEndsAt };
    };
    expect(a).toEqual(await viaModel(discord.id));
    expect(a).toMatchObject({
      plan: 'free',
      trialEndsAt: trialEnds,
      keywords: ['launch', 'año'],
      isActive: false,
      webhook: { kind: 'discord', isBroken: true, brokenReason: 'Discord answered 404' },
    });
    expect(a!.trialEndsAt).toBeInstanceOf(Date);
    expect(b).toEqual(await viaModel(bare.id));
    expect(b!.webhook).toBeNull();
    expect(c).toEqual(await viaModel(monitor.id));
    expect(c).toMatchObject({ plan: 'starter', trialEndsAt: null, webhook: { kind: 'native', isBroken: false } });
    expect(missing).toBeNull();
  });

  it('each recordAttempt resolves only once its row is committed; concurrent ones share statements', async () => {
    const hit = await createHit(db, monitor);
    const rows = Array.from({ length: 60 }, (_, i) =>
      attempt({
        hitId: i % 2 ? hit.id : null,
        outcome: i % 3 ? 'delivered' : 'failed',
        statusCode: i % 3 ? 200 : null,
        latencyMs: i % 5 ? i : null,
        error: i % 3 ? null : `receiver answered HTTP 500 ${i}`,
        responseSnippet: i % 4 ? `snippet ${i} ✓` : null,
      }),
    );
    // the moment each call resolves, its row must be visible to another connection
    const other = createDbClient({ url: testDb.url, poolSize: 1 });
    try {
      const seen = await Promise.all(
        rows.map(async (row) => {
          await repo.recordAttempt(row);
          return other.deliveryAttempt.count({ where: { deliveryId: row.deliveryId } });
        }),
      );
      expect(seen.every((n) => n === 1)).toBe(true);
    } finally {
      await other.$disconnect();
    }
    const stored = await db.deliveryAttempt.findMany({ where: { deliveryId: { in: rows.map((r) => r.deliveryId) } } });
    const byDelivery = new Map(stored.map((s) => [s.deliveryId, s]));
    for (const row of rows) expect(byDelivery.get(row.deliveryId)).toMatchObject(row);
    // several rows per statement: fewer distinct commit times than rows
    expect(new Set(stored.map((s) => s.createdAt.getTime())).size).toBeLessThan(rows.length);
  });

  it('with a record linger, attempts recorded one by one share one insert, each resolving once committed', async () => {
    const lingering = createPrismaRepository(db, { recordLingerMs: 300 });
    const rows = [attempt(), attempt(), attempt()];
    const other = createDbClient({ url: testDb.url, poolSize: 1 });
    try {
      const done: Promise<number>[] = [];
      for (const row of rows) {
        done.push(
          lingering
            .recordAttempt(row)
            .then(() => other.deliveryAttempt.count({ where: { deliveryId: row.deliveryId } })),
        );
        await new Promise((r) => setTimeout(r, 10));
      }
      expect(await Promise.all(done)).toEqual([1, 1, 1]);
    } finally {
      await other.$disconnect();
    }
    const stored = await db.deliveryAttempt.findMany({ where: { deliveryId: { in: rows.map((r) => r.deliveryId) } } });
    // one statement, one transaction: one commit time (without the linger each row goes alone)
    expect(stored).toHaveLength(3);
    expect(new Set(stored.map((s) => s.createdAt.getTime())).size).toBe(1);
  });

  it('the fill mark of the record linger is 64 rows, at most a quarter of the prefetch, at least 1', () => {
    expect([10_000, 256, 255, 40, 7, 4, 3, 1].map(recordFillMark)).toEqual([64, 64, 63, 10, 1, 1, 1, 1]);
  });

  it('writes each row of a batch with its own attempt detail (headers as pairs, body bytes), or none', async () => {
    const bytes = Buffer.from([0, 1, 0xff, 0xfe, 0x7b]);
    const rows = [
      attempt({
        requestHeaders: [
          ['X-Service-Event', 'monitor.hit'],
          ['Content-Length', '2'],
        ],
        requestBody: '{"a":"\\u0000 ✓"}',
        responseHeaders: [
          ['set-cookie', 'a=1'],
          ['set-cookie', 'b=2'],
        ],
        responseBody: bytes,
      }),
      attempt({ outcome: 'skipped', statusCode: null, responseSnippet: null }),
      attempt({ requestHeaders: [], requestBody: '', responseHeaders: [], responseBody: Buffer.alloc(0) }),
    ];
    await Promise.all(rows.map((r) => repo.recordAttempt(r)));
    const stored = await db.deliveryAttempt.findMany({
      where: { deliveryId: { in: rows.map((r) => r.deliveryId) } },
      select: { deliveryId: true, requestHeaders: true, requestBody: true, responseHeaders: true, responseBody: true },
    });
    const by = new Map(stored.map((r) => [r.deliveryId, r]));
    const [full, none, empty] = rows.map((r) => by.get(r.deliveryId)!);
    expect(full!.requestHeaders).toEqual(rows[0]!.requestHeaders);
    expect(full!.requestBody).toBe(rows[0]!.requestBody);
    expect(full!.responseHeaders).toEqual([
      ['set-cookie', 'a=1'],
      ['set-cookie', 'b=2'],
    ]);
    expect(Buffer.from(full!.responseBody!).equals(bytes)).toBe(true);
    expect(none).toMatchObject({ requestHeaders: null, requestBody: null, responseHeaders: null, responseBody: null });
    expect(empty).toMatchObject({ requestHeaders: [], requestBody: '', responseHeaders: [] });
    expect(Buffer.from(empty!.responseBody!).length).toBe(0);
  });

  it('a row whose monitor was deleted fails alone (missing parent); the rest of its batch is written', async () => {
    const account = await createAccount(db, 'starter');
    const gone = await createMonitor(db, box, { accountId: account.id, url: 'https://hooks.example.com/gone' });
    await db.monitor.delete({ where: { id: gone.id } });
    const good = [attempt(), attempt(), attempt()];
    const bad = attempt({ monitorId: gone.id });
    const results = await Promise.allSettled([good[0]!, bad, good[1]!, good[2]!].map((r) => repo.recordAttempt(r)));
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    const reason = (results[1] as PromiseRejectedResult).reason;
    expect(isMissingParent(reason)).toBe(true);
    expect(isTransientDbError(reason)).toBe(false);
    expect(await db.deliveryAttempt.count({ where: { deliveryId: { in: good.map((g) => g.deliveryId) } } })).toBe(3);
    expect(await db.deliveryAttempt.count({ where: { deliveryId: bad.deliveryId } })).toBe(0);
  });

  it('a refused write rejects every caller whose row it refused, with the database message; nothing half-written', async () => {
    await db.$executeRawUnsafe(`CREATE FUNCTION refuse_some() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.error = 'refuse me' THEN RAISE EXCEPTION 'attempt refused by trigger'; END IF; RETURN NEW; END $$`);
    await db.$executeRawUnsafe(
      'CREATE TRIGGER refuse_some BEFORE INSERT ON delivery_attempts FOR EACH ROW EXECUTE FUNCTION refuse_some()',
    );
    try {
      const rows = [attempt(), attempt({ outcome: 'failed', error: 'refuse me' }), attempt()];
      const results = await Promise.allSettled(rows.map((r) => repo.recordAttempt(r)));
      expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
      expect(String((results[1] as PromiseRejectedResult).reason)).toMatch(/attempt refused by trigger/);
      expect(await db.deliveryAttempt.count({ where: { deliveryId: rows[1]!.deliveryId } })).toBe(0);
      expect(
        await db.deliveryAttempt.count({ where: { deliveryId: { in: [rows[0]!.deliveryId, rows[2]!.deliveryId] } } }),
      ).toBe(2);
    } finally {
      await db.$executeRawUnsafe('DROP TRIGGER IF EXISTS refuse_some ON delivery_attempts');
    }
  });

  it('an unreachable database rejects the whole batch as transient (the messages are handed back)', async () => {
    const down = createDbClient({ url: 'postgresql://postgres@127.0.0.1:1/nothing_here', poolSize: 1 });
    try {
      const offline = createPrismaRepository(down);
      const results = await Promise.allSettled([offline.recordAttempt(attempt()), offline.recordAttempt(attempt())]);
      for (const r of results) {
        expect(r.status).toBe('rejected');
        expect(isTransientDbError((r as PromiseRejectedResult).reason)).toBe(true);
      }
      const lookUp = await offline.getMonitor(monitor.id).then(
        () => null,
        (err: unknown) => err,
      );
      expect(isTransientDbError(lookUp)).toBe(true);
    } finally {
      await down.$disconnect();
    }
  });

  describe('claimDue', () => {
    const past = (s: number) => new Date(Date.now() - s * 1000);
    const claim = (over: { limit?: number; busyWebhooks?: string[] } = {}) =>
      repo.claimDue({ limit: over.limit ?? 64, perWebhook: 3, busyWebhooks: over.busyWebhooks ?? [], leaseMs: 60_000 });

    /** a webhook with its rules; its id and monitor */
    async function webhook(ordering: 'fifo' | 'unordered') {
      const account = await createAccount(db, 'starter');
      const m = await createMonitor(db, box, { accountId: account.id, url: 'https://hooks.example.com/due' });
      const w = await db.webhookEndpoint.update({
        where: { monitorId: m.id },
        data: { retryPolicy: 'standard', ordering },
      });
      return { id: w.id, monitorId: m.id };
    }

    /** a due row; its delivery id */
    async function due(w: { id: string; monitorId: string }, dueAt: Date, sequence: number): Promise<string> {
      const deliveryId = randomUUID();
      await repo.enqueueDue({
        deliveryId,
        monitorId: w.monitorId,
        webhookId: w.id,
        event: 'monitor.hit',
        hitId: null,
        payload: { sequence },
        attempt: 1,
        dueAt,
      });
      return deliveryId;
    }

    beforeEach(() => db.webhookDeliveryDue.deleteMany({}));

    it('at most perWebhook of an unordered webhook, earliest due first, none not yet due, busy webhooks left out', async () => {
      const a = await webhook('unordered');
      const b = await webhook('unordered');
      const aIds: string[] = [];
      for (let i = 0; i < 200; i++) aIds.push(await due(a, past(300 - i), i + 1));
      await due(a, new Date(Date.now() + 60_000), 999); // not yet due
      const bId = await due(b, past(1), 1);

      const first = await claim({ busyWebhooks: [b.id] });
      expect(first.map((c) => c.deliveryId)).toEqual(expect.arrayContaining(aIds.slice(0, 3)));
      expect(first).toHaveLength(3);
      const second = await claim();
      expect(second.map((c) => c.deliveryId).sort()).toEqual([...aIds.slice(3, 6), bId].sort());
      // the overall limit takes the earliest due across webhooks
      await db.webhookDeliveryDue.updateMany({ data: { claimedUntil: null } });
      expect((await claim({ limit: 2 })).map((c) => c.deliveryId).sort()).toEqual(aIds.slice(0, 2).sort());
    });

    it('a fifo webhook: only its head by sequence, none while one of its rows is claimed, a head not yet due holds the rest', async () => {
      const f = await webhook('fifo');
      const ids: string[] = [];
      for (let i = 0; i < 100; i++) ids.push(await due(f, past(100 - i), i + 10));
      const lower = await due(f, past(1), 5); // queued later with a lower sequence: the head

      expect((await claim()).map((c) => c.deliveryId)).toEqual([lower]);
      expect(await claim()).toEqual([]); // its head is in flight
      // the claim ran out: taken again
      await db.webhookDeliveryDue.update({ where: { deliveryId: lower }, data: { claimedUntil: past(1) } });
      expect((await claim()).map((c) => c.deliveryId)).toEqual([lower]);
      await db.webhookDeliveryDue.delete({ where: { deliveryId: lower } });
      expect((await claim()).map((c) => c.deliveryId)).toEqual([ids[0]]);
      // the head waits for its retry an hour from now: nothing behind it goes
      await db.webhookDeliveryDue.update({
        where: { deliveryId: ids[0]! },
        data: { claimedUntil: null, dueAt: new Date(Date.now() + 3_600_000) },
      });
      expect(await claim()).toEqual([]);
    });
  });
});
