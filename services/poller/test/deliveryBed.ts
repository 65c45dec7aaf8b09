/**
 * The delivery side of a poller test: the real webhook-dispatcher process, an outbox relay feeding
 * it, and an HTTPS receiver; `monitor()` makes a monitor whose webhook points at the receiver and
 * keeps its signing secret, `signedBy()` checks a received request's signature with it.
 */
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import type { Logger } from '@sts/common';
import { classifyWebhookUrl, createSecretBox, generateWebhookSecret } from '@sts/core';
import { AmqpClient } from '@sts/messaging';
import {
  createTestVhost,
  spawnService,
  startHttpsReceiver,
  type HttpsReceiver,
  type ReceivedRequest,
  type ServiceProcess,
  type TestStore,
} from '@sts/testing';
import { createOutboxRelay, type OutboxRelay } from '../src/relay/relay';

export interface DeliveryBed {
  receiver: HttpsReceiver;
  /** a Starter account made with the bed (`<name>@example.com`) */
  accountId: string;
  /** a monitor of `accountId` on `target` whose webhook is the receiver's `/<path>` */
  monitor(accountId: string, target: string, path: string, events?: string[]): Promise<string>;
  /** a monitor of the bed's account (monitor() with `accountId`) */
  watch(target: string, path: string, events?: string[]): Promise<string>;
  /** whether `req` carries a valid signature by the monitor's secret */
  signedBy(req: ReceivedRequest, monitorId: string): boolean;
  /** the requests of this event kind; with `path`, only those to the receiver's `/<path>` */
  delivered(event: string, path?: string): ReceivedRequest[];
  /** the requests of this event kind to a path under the receiver's `/<prefix>` */
  deliveredUnder(event: string, prefix: string): ReceivedRequest[];
  close(): Promise<void>;
}

/** `o`: the store the poller under test records into (a store bed, or an X bed built on one) */
export async function openDeliveryBed(
  o: Pick<TestStore, 'db' | 'dbUrl' | 'dbDirectUrl'> & { logger: Logger; name: string },
): Promise<DeliveryBed> {
  const key = randomBytes(32).toString('base64');
  const amqpUrl = (await createTestVhost()).url;
  const receiver = await startHttpsReceiver();
  const dispatcher: ServiceProcess = spawnService('services/webhook-dispatcher/src/main.ts', {
    DATABASE_URL: o.dbUrl,
    AMQP_URL: amqpUrl,
    SECRETS_ENCRYPTION_KEY: key,
    WEBHOOK_ALLOW_PRIVATE_HOSTS: 'localhost',
    LOG_LEVEL: 'error',
    NODE_EXTRA_CA_CERTS: process.env.NODE_EXTRA_CA_CERTS ?? '',
  });
  await dispatcher.waitForLine(/webhook-dispatcher started/, 60_000);
  const publisher = new AmqpClient({ url: amqpUrl, logger: o.logger, name: `${o.name}-relay` });
  await publisher.start();
  const relay: OutboxRelay = createOutboxRelay({ db: o.db, publisher, logger: o.logger, databaseUrl: o.dbDirectUrl });
  await relay.start();
  const secrets = new Map<string, string>();
  const accountId = (await o.db.account.create({ data: { email: `${o.name}@example.com`, plan: 'starter' } })).id;
  const ofEvent = (event: string) => receiver.requests.filter((r) => r.headers['x-service-event'] === event);
  const bed: DeliveryBed = {
    receiver,
    accountId,
    watch: (target, path, events) => bed.monitor(accountId, target, path, events),
    async monitor(accountId, target, path, events) {
      const id = randomUUID();
      const secret = generateWebhookSecret();
      secrets.set(id, secret);
      const hook = classifyWebhookUrl(`${receiver.url}/${path}`);
      const secretCiphertext = createSecretBox(key).encrypt(secret, id);
      await o.db.monitor.create({
        data: {
          id,
          accountId,
          targetUsername: target,
          targetKey: target.toLowerCase(),
          ...(events ? { events } : {}),
          webhook: { create: { url: hook.url, kind: hook.kind, secretCiphertext } },
        },
      });
      return id;
    },
    signedBy(req, monitorId) {
      const ts = String(req.headers['x-service-timestamp']);
      const mac = createHmac('sha256', secrets.get(monitorId) ?? '')
        .update(`${ts}.`)
        .update(req.rawBody)
        .digest('hex');
      return req.headers['x-service-signature'] === `sha256=${mac}`;
    },
    delivered: (event, path) => ofEvent(event).filter((r) => path === undefined || r.path === `/${path}`),
    deliveredUnder: (event, prefix) => ofEvent(event).filter((r) => r.path.startsWith(`/${prefix}`)),
    async close() {
      await relay.stop();
      await publisher.stop();
      dispatcher.child.kill('SIGTERM');
      await dispatcher.exited;
      await receiver.close();
    },
  };
  return bed;
}
