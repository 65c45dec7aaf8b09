/**
 * What the dispatcher's tests on the real broker (main.test.ts, fairness.test.ts) share: a test
 * database, a RabbitMQ vhost with a publisher on it, the secrets key and its box (monitors' webhook
 * secrets), and `publishHit()`, a hit published as the outbox relay publishes it. `close()` stops
 * the publisher and drops the database (vhosts go with the test run).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { Logger } from '@sts/common';
import { createSecretBox, type SecretBox } from '@sts/core';
import { createDbClient, type Db } from '@sts/db';
import { AmqpClient } from '@sts/messaging';
import { createTestDatabase, createTestVhost, type HitFixture, type MonitorFixture } from '@sts/testing';

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
    async close() {
      await publisher.stop();
      await db.$disconnect();
      await testDb.drop();
    },
  };
}
