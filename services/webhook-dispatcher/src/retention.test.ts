/**
 * Issue 10 item 8 (retention): delivery attempts older than DELIVERY_LOG_RETENTION_DAYS are deleted
 * in batches, on a real PostgreSQL database, also with two replicas running the job at once.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { createLogger } from '@sts/common';
import { createSecretBox } from '@sts/core';
import { createDbClient, type Db } from '@sts/db';
import { createAccount, createMonitor, createTestDatabase } from '@sts/testing';
import { createPrismaRepository } from './adapters/repository';
import { createRetentionJob } from './retention';

const box = createSecretBox(randomBytes(32).toString('base64'));
const logger = createLogger({ service: 'retention-test', level: 'error' });
const DAY = 86_400_000;

describe('delivery log retention', () => {
  let testDb: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;
  let db2: Db;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    db = createDbClient({ url: testDb.url, poolSize: 4 });
    db2 = createDbClient({ url: testDb.url, poolSize: 4 });
  });
  afterAll(async () => {
    await db.$disconnect();
    await db2.$disconnect();
    await testDb.drop();
  });

  async function seed(count: number, ageDays: number, monitorId: string): Promise<void> {
    const createdAt = new Date(Date.now() - ageDays * DAY);
    await db.deliveryAttempt.createMany({
      data: Array.from({ length: count }, () => ({
        monitorId,
        event: 'monitor.test',
        deliveryId: randomUUID(),
        url: 'https://example.com/hook',
        outcome: 'delivered' as const,
        statusCode: 200,
        latencyMs: 5,
        createdAt,
      })),
    });
  }

  it('deletes attempts older than the retention in batches, keeps the rest, with two replicas at once', async () => {
    const account = await createAccount(db, 'starter');
    const monitor = await createMonitor(db, box, { accountId: account.id, url: 'https://example.com/hook' });
    await seed(230, 45, monitor.id);
    await seed(40, 31, monitor.id);
    await seed(25, 29, monitor.id);
    await seed(10, 0, monitor.id);

    const job = (d: Db) =>
      createRetentionJob({
        repository: createPrismaRepository(d),
        logger,
        retentionDays: 30,
        intervalMs: 60_000,
        batchSize: 7,
        pauseMs: 1,
      });
    const [a, b] = await Promise.all([job(db).runOnce(), job(db2).runOnce()]);
    expect(a + b).toBe(270);
    const left = await db.deliveryAttempt.findMany({ select: { createdAt: true } });
    expect(left).toHaveLength(35);
    expect(left.every((r) => r.createdAt.getTime() > Date.now() - 30 * DAY)).toBe(true);
    // nothing left to do
    await expect(job(db).runOnce()).resolves.toBe(0);
  });
});
