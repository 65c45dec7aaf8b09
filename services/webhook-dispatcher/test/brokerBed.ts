/**
 * What the dispatcher's tests on the real broker (main, fairness, broker.disruptive) share: a test
 * database, a RabbitMQ vhost with a publisher on it, the secrets key and its box (monitors' webhook
 * secrets), and `publishHit()`, a hit published as the outbox relay publishes it. `close()` stops
 * the publisher and drops the database (vhosts go with the test run).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { Logger } from '@sts/common';
import { createSecretBox, type SecretBox } from '@sts/core';
import { createDbClient, type Db } from '@sts/db';
import { AmqpClient } from '@sts/messaging';
import { createTestDatabase, createTestVhost, waitFor, type HitFixture, type MonitorFixture } from '@sts/testing';

export interface BrokerBed {
  db: Db;
  dbUrl: string;
  amqpUrl: string;
  publisher: AmqpClient;
  /** SECRETS_ENCRYPTION_KEY, and the box that seals monitors' secrets with it */
  key: string;
  box: SecretBox;
  /** publishes `hit` of `m` as monitor.hit; resolves to its message id */
  publishHit(m: MonitorFixture, hit: HitFixture): Promise<string>;
  /** the environment of a dispatcher process on this bed (spawnDispatcher) */
  dispatcherEnv(): Record<string, string>;
  /** waits until each of `deliveryIds` has a delivered attempt in the log */
  allDelivered(deliveryIds: Iterable<string>, timeoutMs: number): Promise<void>;
  close(): Promise<void>;
}

export async function openBrokerBed(opts: { poolSize: number; logger: Logger; name: string }): Promise<BrokerBed> {
  const key = randomBytes(32).toString('base64');
  const testDb = await createTestDatabase();
  const db = createDbClient({ url: testDb.url, poolSize: opts.poolSize });
  const amqpUrl = (await createTestVhost()).url;
  const publisher = new AmqpClient({ url: amqpUrl, logger: opts.logger, name: opts.name });
  await publisher.start();
  return {
    db,
    dbUrl: testDb.url,
    amqpUrl,
    publisher,
    key,
    box: createSecretBox(key),
    async publishHit(m, hit) {
      const messageId = randomUUID();
      await publisher.publish('monitor.hit', hit.payload, {
        messageId,
        headers: { accountId: m.accountId, hitId: hit.id },
      });
      return messageId;
    },
    dispatcherEnv: () => ({
      DATABASE_URL: testDb.url,
      AMQP_URL: amqpUrl,
      SECRETS_ENCRYPTION_KEY: key,
      WEBHOOK_ALLOW_PRIVATE_HOSTS: 'localhost',
      LOG_LEVEL: 'info',
    }),
    async allDelivered(deliveryIds, timeoutMs) {
      const ids = [...new Set(deliveryIds)];
      await waitFor(async () => {
        const rows = await db.deliveryAttempt.findMany({
          where: { deliveryId: { in: ids }, outcome: 'delivered' },
          select: { deliveryId: true },
        });
        return new Set(rows.map((r) => r.deliveryId)).size === ids.length;
      }, timeoutMs);
    },
    async close() {
      try {
        await publisher.stop();
      } finally {
        await db.$disconnect();
        await testDb.drop();
      }
    },
  };
}
