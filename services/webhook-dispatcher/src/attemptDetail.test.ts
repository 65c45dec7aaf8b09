/**
 * Attempt detail, end to end through the dispatcher and a real HTTPS receiver: the
 * attempt row keeps the request exactly as the receiver got it (headers including both signature
 * schemes, the body byte for byte) and the response (status, headers as sent, the first 4 KiB of
 * the body byte for byte), with the header count bounded.
 */
import { randomBytes } from 'node:crypto';
import { createSecretBox } from '@sts/core';
import type { Db } from '@sts/db';
import { createAccount, createHit, createMonitor, hitEnvelope, type HttpsReceiver } from '@sts/testing';
import type { Dispatcher } from './app';
import { startInProcessDispatcher, type InProcessDispatcher } from '../test/dispatcher';
import { DETAIL_MAX_HEADERS, DETAIL_RESPONSE_BODY_BYTES } from './domain/attemptDetail';

const KEY = randomBytes(32).toString('base64');
const box = createSecretBox(KEY);

describe('attempt detail', () => {
  let harness: InProcessDispatcher;
  let db: Db;
  let receiver: HttpsReceiver;
  let dispatcher: Dispatcher;

  beforeAll(async () => {
    harness = await startInProcessDispatcher('dispatcher-detail-test', KEY);
    ({ db, receiver, dispatcher } = harness);
  });

  afterAll(() => harness.close());

  async function deliverOnce(url: string) {
    const account = await createAccount(db, 'starter');
    const monitor = await createMonitor(db, box, { accountId: account.id, url, keywords: [] });
    const hit = await createHit(db, monitor, 'détail <b>&amp;</b> "quoted" ✓ 🎉\nsecond line');
    const env = hitEnvelope(monitor, hit);
    await expect(dispatcher.handle(env)).resolves.toBe('ack');
    return db.deliveryAttempt.findFirstOrThrow({ where: { deliveryId: env.messageId } });
  }

  it('keeps the request exactly as the receiver got it and the first 4 KiB of the answer', async () => {
    // a 6 KiB answer with multi-byte characters straddling the 4 KiB cut, and bytes that are not text
    const answer = Buffer.concat([Buffer.from('é'.repeat(2047) + 'x€', 'utf8'), randomBytes(2000)]);
    receiver.setResponder(() => ({
      status: 202,
      headers: { 'X-Receiver-Trace': 'abc  "def"', 'Content-Type': 'application/octet-stream' },
      body: answer,
    }));
    const before = receiver.requests.length;
    const row = await deliverOnce(`${receiver.url}/hook?x=1`);
    const got = receiver.requests[before]!;

    // the body, byte for byte
    expect(Buffer.from(row.requestBody!, 'utf8').equals(got.rawBody)).toBe(true);
    // every header recorded is the one received, and both signature schemes are there
    const sent = row.requestHeaders as [string, string][];
    const names = sent.map(([n]) => n.toLowerCase());
    for (const h of ['x-service-signature', 'x-service-delivery', 'webhook-signature', 'webhook-id', 'content-length'])
      expect(names).toContain(h);
    for (const [name, value] of sent) expect(got.headers[name.toLowerCase()]).toBe(value);
    // the URL as logged: the query (which may carry a token) redacted, as in the delivery log
    expect(got.path).toBe('/hook?x=1');
    expect(row.url).toBe(`${receiver.url}/hook?[REDACTED]`);

    // the answer: status, headers in the order sent, the first 4 KiB byte for byte
    expect(row.statusCode).toBe(202);
    const answered = row.responseHeaders as [string, string][];
    expect(answered).toContainEqual(['X-Receiver-Trace', 'abc  "def"']);
    expect(answered).toContainEqual(['Content-Type', 'application/octet-stream']);
    expect(Buffer.from(row.responseBody!).equals(answer.subarray(0, DETAIL_RESPONSE_BODY_BYTES))).toBe(true);
  });

  it('bounds the response headers kept and keeps no answer when none came', async () => {
    const many = Object.fromEntries(Array.from({ length: 150 }, (_, i) => [`x-h-${i}`, `v${i}`]));
    receiver.setResponder(() => ({ status: 500, headers: many, body: '' }));
    const row = await deliverOnce(`${receiver.url}/h`);
    const answered = row.responseHeaders as [string, string][];
    expect(answered).toHaveLength(DETAIL_MAX_HEADERS);
    expect(answered).toContainEqual(['x-h-0', 'v0']);
    expect(answered).not.toContainEqual(['x-h-149', 'v149']); // the first ones, in the order received
    expect(Buffer.from(row.responseBody!).length).toBe(0);

    // nothing listens there: the request is kept (it was sent), no answer
    const dead = await deliverOnce('https://localhost:1/h');
    expect(dead.outcome).toBe('failed');
    expect(dead.requestBody).not.toBeNull();
    expect(dead.responseHeaders).toBeNull();
    expect(dead.responseBody).toBeNull();
  });
});
