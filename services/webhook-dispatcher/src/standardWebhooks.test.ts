/**
 * Standard Webhooks headers and overlapped rotation, end to end through the dispatcher (issue
 * 22): a receiver on the official `standardwebhooks` package verifies every delivery, across an
 * overlapped rotation, while a receiver on the X-Service-* headers (docs/webhooks.md) with the old secret keeps
 * working until the switch ("use the new secret now") or the overlap's end.
 */
import { randomBytes } from 'node:crypto';
import { createSecretBox, generateWebhookSecret } from '@sts/core';
import type { Db } from '@sts/db';
import { standardWebhookSecret, verify } from '@sts/signing';
import {
  createAccount,
  createHit,
  createMonitor,
  hitEnvelope,
  type HttpsReceiver,
  type ReceivedRequest,
} from '@sts/testing';
import { Webhook } from 'standardwebhooks';
import type { Dispatcher } from './app';
import { startInProcessDispatcher, type InProcessDispatcher } from '../test/dispatcher';

const KEY = randomBytes(32).toString('base64');
const box = createSecretBox(KEY);

/** A receiver on the X-Service-* headers. */
function specVerifies(req: ReceivedRequest, secret: string): boolean {
  try {
    verify({ secret, body: req.rawBody, headers: req.headers });
    return true;
  } catch {
    return false;
  }
}

/** A receiver on the standardwebhooks package, holding the secret in its whsec_ form. */
function standardVerifies(req: ReceivedRequest, secret: string): boolean {
  const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]));
  try {
    new Webhook(standardWebhookSecret(secret)).verify(req.rawBody, headers);
    return true;
  } catch {
    return false;
  }
}

describe('Standard Webhooks headers across an overlapped rotation', () => {
  let harness: InProcessDispatcher;
  let db: Db;
  let receiver: HttpsReceiver;
  let dispatcher: Dispatcher;

  beforeAll(async () => {
    harness = await startInProcessDispatcher('dispatcher-std-test', KEY);
    ({ db, receiver, dispatcher } = harness);
  });

  afterAll(() => harness.close());

  it('every delivery verifies with the standardwebhooks package; X-Service-* receivers switch when the customer says so', async () => {
    receiver.setResponder(() => ({ status: 200, body: 'ok' }));
    const account = await createAccount(db, 'starter');
    const monitor = await createMonitor(db, box, { accountId: account.id, url: `${receiver.url}/h`, keywords: [] });
    const oldSecret = monitor.secret!;
    const deliver = async () => {
      const env = hitEnvelope(monitor, await createHit(db, monitor));
      await expect(dispatcher.handle(env)).resolves.toBe('ack');
      const req = receiver.requests[receiver.requests.length - 1]!;
      // webhook-id is the X-Service-Delivery value, webhook-timestamp the X-Service-Timestamp value
      expect(req.headers['webhook-id']).toBe(env.messageId);
      expect(req.headers['webhook-id']).toBe(req.headers['x-service-delivery']);
      expect(req.headers['webhook-timestamp']).toBe(req.headers['x-service-timestamp']);
      return req;
    };
    /** an overlapped rotation as the endpoint row holds it: `secret` signs, `previous` too until `until` */
    const rotate = (secret: string, previous: string, until: Date, extra: { secretRotatedAt?: Date } = {}) =>
      db.webhookEndpoint.update({
        where: { monitorId: monitor.id },
        data: {
          secretCiphertext: box.encrypt(secret, monitor.id),
          previousSecretCiphertext: box.encrypt(previous, monitor.id),
          previousSecretUntil: until,
          ...extra,
        },
      });

    // before any rotation
    const r1 = await deliver();
    expect([standardVerifies(r1, oldSecret), specVerifies(r1, oldSecret)]).toEqual([true, true]);

    // "Rotate" with the default overlap: what webhooks.rotate() writes
    const newSecret = generateWebhookSecret();
    await rotate(newSecret, oldSecret, new Date(Date.now() + 24 * 3600_000), { secretRotatedAt: new Date() });
    const r2 = await deliver();
    expect(String(r2.headers['webhook-signature']).split(' ')).toHaveLength(2);
    expect(standardVerifies(r2, newSecret)).toBe(true);
    expect(standardVerifies(r2, oldSecret)).toBe(true);
    expect(specVerifies(r2, oldSecret)).toBe(true); // the X-Service-* receiver has not changed anything yet
    expect(specVerifies(r2, newSecret)).toBe(false);

    // "use the new secret now"
    await db.webhookEndpoint.update({
      where: { monitorId: monitor.id },
      data: { previousSecretCiphertext: null, previousSecretUntil: null },
    });
    const r3 = await deliver();
    expect(String(r3.headers['webhook-signature']).split(' ')).toHaveLength(1);
    expect([standardVerifies(r3, newSecret), specVerifies(r3, newSecret)]).toEqual([true, true]);
    expect([standardVerifies(r3, oldSecret), specVerifies(r3, oldSecret)]).toEqual([false, false]);

    // another overlapped rotation whose overlap has ended: the new secret everywhere
    const third = generateWebhookSecret();
    await rotate(third, newSecret, new Date(Date.now() - 1000));
    const r4 = await deliver();
    expect([standardVerifies(r4, third), specVerifies(r4, third)]).toEqual([true, true]);
    expect([standardVerifies(r4, newSecret), specVerifies(r4, newSecret)]).toEqual([false, false]);
  });
});
