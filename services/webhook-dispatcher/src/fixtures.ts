/**
 * Rows and messages for the dispatcher's tests and benchmark: accounts on a plan, monitors with
 * webhooks (secrets encrypted as the CLI stores them), hits, and the monitor.hit message the
 * poller's outbox relay publishes for a hit. Not used by the service itself.
 */
import { randomUUID } from 'node:crypto';
import { classifyWebhookUrl, generateWebhookSecret, snowflakeId, type SecretBox } from '@sts/core';
import type { Db } from '@sts/db';
import type { Envelope } from '@sts/messaging';
import type { HitPayload } from './domain/payloads';

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
  payload: HitPayload;
}

export async function createHit(
  db: Db,
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
): HitPayload {
  return {
    event: 'monitor.hit',
    monitor: {
      id: monitor.id,
      targetUsername: monitor.targetUsername,
      keywords: monitor.keywords.length ? monitor.keywords : null,
    },
    tweet: { id: tweetId, text, authorUsername: monitor.targetUsername, createdAt: createdAt.toISOString() },
    detectedAt: detectedAt.toISOString(),
  };
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
    payload: {
      event: 'monitor.test' as const,
      monitor: {
        id: monitor.id,
        targetUsername: monitor.targetUsername,
        keywords: monitor.keywords.length ? monitor.keywords : null,
      },
      test: true as const,
    },
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
