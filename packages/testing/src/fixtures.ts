/**
 * Rows and messages for tests and benchmarks: accounts on a plan (with an API key), monitors with
 * webhooks (secrets encrypted as the CLI stores them), hits, and the envelopes the services
 * consume (the monitor.hit message the poller's outbox relay publishes for a hit, …).
 */
import { randomUUID } from 'node:crypto';
import { classifyWebhookUrl, generateApiKey, generateWebhookSecret, snowflakeId, type SecretBox } from '@sts/core';
import type { Db } from '@sts/db';
import { monitorHitPayload, monitorRef, monitorTestPayload, type Envelope, type MonitorHitEvent } from '@sts/messaging';

export async function createAccount(
  db: Db,
  plan: 'free' | 'starter',
  trialEndsAt: Date | null = null,
): Promise<{ id: string }> {
  return db.account.create({
    data: { email: `${randomUUID()}@example.test`, plan, trialEndsAt },
    select: { id: true },
  });
}

/** An account on `plan` with one API key; `key` is the plaintext the client sends. */
export async function createAccountWithKey(
  db: Db,
  plan: 'free' | 'starter' = 'starter',
): Promise<{ accountId: string; key: string; prefix: string }> {
  const account = await createAccount(db, plan);
  const k = generateApiKey();
  await db.apiKey.create({ data: { accountId: account.id, keyHash: k.hash, prefix: k.prefix } });
  return { accountId: account.id, key: k.key, prefix: k.prefix };
}

export interface MonitorFixture {
  id: string;
  accountId: string;
  targetUsername: string;
  keywords: string[];
  secret: string | null;
}

export async function createMonitor(
  db: Db,
  box: SecretBox,
  options: { accountId: string; url?: string; targetUsername?: string; keywords?: string[]; isActive?: boolean },
): Promise<MonitorFixture> {
  const id = randomUUID();
  const targetUsername = options.targetUsername ?? 'NASA';
  const keywords = options.keywords ?? [];
  const secret = options.url ? generateWebhookSecret() : null;
  const hook = options.url ? classifyWebhookUrl(options.url) : null;
  await db.monitor.create({
    data: {
      id,
      accountId: options.accountId,
      targetUsername,
      targetKey: targetUsername.toLowerCase(),
      keywords,
      isActive: options.isActive ?? true,
      ...(hook && secret
        ? { webhook: { create: { url: hook.url, kind: hook.kind, secretCiphertext: box.encrypt(secret, id) } } }
        : {}),
    },
  });
  return { id, accountId: options.accountId, targetUsername, keywords, secret };
}

export interface HitFixture {
  id: string;
  payload: MonitorHitEvent;
}

/** `db` may be a transaction's client (a hit written in a transaction the test holds open) */
export async function createHit(
  db: Pick<Db, 'hit'>,
  monitor: MonitorFixture,
  text = 'We have liftoff! #launch',
  detectedAt = new Date(),
): Promise<HitFixture> {
  const tweetId = snowflakeId();
  const createdAt = new Date(detectedAt.getTime() - 1000);
  const row = await db.hit.create({
    data: {
      monitorId: monitor.id,
      tweetId,
      tweetText: text,
      tweetAuthorId: '11348282',
      tweetAuthorUsername: monitor.targetUsername,
      tweetCreatedAt: createdAt,
      detectedAt,
    },
    select: { id: true },
  });
  return { id: row.id, payload: hitPayload(monitor, tweetId, text, createdAt, detectedAt) };
}

export function hitPayload(
  monitor: Pick<MonitorFixture, 'id' | 'targetUsername' | 'keywords'>,
  tweetId: string,
  text: string,
  createdAt: Date,
  detectedAt: Date,
): MonitorHitEvent {
  return monitorHitPayload(
    monitorRef(monitor),
    { id: tweetId, text, authorUsername: monitor.targetUsername, createdAt: createdAt.toISOString() },
    detectedAt.toISOString(),
  );
}

export function hitEnvelope(
  monitor: MonitorFixture,
  hit: HitFixture,
  messageId: string = randomUUID(),
  redelivered = false,
): Envelope<'monitor.hit'> {
  return {
    routingKey: 'monitor.hit',
    messageId,
    payload: hit.payload,
    headers: { accountId: monitor.accountId, hitId: hit.id },
    redelivered,
    publishedAt: new Date(),
  };
}

export function testEnvelope(monitor: MonitorFixture, messageId: string = randomUUID()): Envelope<'monitor.test'> {
  return {
    routingKey: 'monitor.test',
    messageId,
    payload: monitorTestPayload(monitorRef(monitor)),
    headers: { accountId: monitor.accountId },
    redelivered: false,
    publishedAt: new Date(),
  };
}

export function redeliverEnvelope(
  accountId: string,
  attemptId: string,
  messageId: string = randomUUID(),
): Envelope<'webhook.redeliver'> {
  return {
    routingKey: 'webhook.redeliver',
    messageId,
    payload: { attemptId },
    headers: { accountId },
    redelivered: false,
    publishedAt: new Date(),
  };
}
