/**
 * Each account sees its own plan's window of hits (by the post's time) and of the delivery log,
 * whatever storage still holds; a redelivery of an attempt whose hit was dropped is `hit_gone`.
 */
import {
  createSecretBox,
  DEFAULT_PLAN_RETENTION,
  monitorLimitsFromEnv,
  planEnv,
  planMonitorEnv,
  plansFromEnv,
} from '@sts/core';
import { createDbClient, type Db } from '@sts/db';
import { createTestDatabase } from '@sts/testing';
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { ConflictError, createUseCases, type UseCases } from './index';

const DAY = 86_400_000;

describe('plan retention windows (real PostgreSQL)', () => {
  let handle: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Db;
  let uc: UseCases;
  let accountId: string;
  let monitorId: string;
  const attemptIds: Record<string, string> = {};

  beforeAll(async () => {
    handle = await createTestDatabase();
    db = createDbClient({ url: handle.url, poolSize: 2 });
    const env = z.object({ ...planEnv, ...planMonitorEnv }).parse({});
    uc = createUseCases({
      db,
      plans: plansFromEnv(env),
      monitorLimits: monitorLimitsFromEnv(env),
      retention: DEFAULT_PLAN_RETENTION,
      secretBox: createSecretBox(randomBytes(32).toString('hex')),
      publisher: { publish: () => Promise.resolve() },
    });
    accountId = (await db.account.create({ data: { email: 'window@example.com' } })).id;
    monitorId = (
      await db.monitor.create({ data: { accountId, targetUsername: 'win', targetKey: 'win', keywords: [] } })
    ).id;
    for (const days of [20, 40]) {
      const hit = await db.hit.create({
        data: {
          monitorId,
          tweetId: `t${days}`,
          tweetText: 'x',
          tweetAuthorId: '1',
          tweetAuthorUsername: 'win',
          tweetCreatedAt: new Date(Date.now() - days * DAY),
        },
      });
      const a = await db.deliveryAttempt.create({
        data: {
          monitorId,
          hitId: hit.id,
          event: 'monitor.hit',
          deliveryId: `d${days}`,
          url: 'https://example.com/hook',
          outcome: 'failed',
          createdAt: new Date(Date.now() - (days / 4) * DAY), // 5 and 10 days ago
        },
      });
      attemptIds[days] = a.id;
    }
  });
  afterAll(async () => {
    await db.$disconnect();
    await handle.drop();
  });

  const hits = async () => (await uc.hits.list(accountId, monitorId)).items.map((h) => h.tweetId);
  const deliveries = async () => (await uc.deliveries.list(accountId, monitorId)).items.map((d) => d.deliveryId);

  it('Free: 30 days of hits, 7 of the delivery log; Starter: 90 and 30', async () => {
    expect(await hits()).toEqual(['t20']);
    expect(await deliveries()).toEqual(['d20']);
    await db.account.update({ where: { id: accountId }, data: { plan: 'starter' } });
    expect((await hits()).sort()).toEqual(['t20', 't40']);
    expect((await deliveries()).sort()).toEqual(['d20', 'd40']);
    await db.account.update({ where: { id: accountId }, data: { plan: 'free' } });
  });

  it('redeliver: an attempt whose hit storage dropped is hit_gone, nothing published', async () => {
    await db.hit.deleteMany({ where: { tweetId: 't40' } }); // as dropping its week would
    await expect(uc.deliveries.redeliver(accountId, attemptIds[40]!)).rejects.toMatchObject({
      code: 'conflict',
      reason: 'hit_gone',
    });
    await expect(uc.deliveries.redeliver(accountId, attemptIds[40]!)).rejects.toBeInstanceOf(ConflictError);
  });
});
