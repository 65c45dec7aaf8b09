/**
 * The webhook dispatcher: takes monitor.hit, monitor.test and webhook.redeliver messages from its
 * own durable queue, decides whether each goes out (plan, monitor, endpoint state), builds the
 * body for the endpoint's kind, signs it with the monitor's current secret, sends it, and writes
 * one delivery_attempts row per attempt. A message is acknowledged only after its attempt row is
 * committed; when the database write fails the handler throws, so the message comes back.
 */
import { createSecretBox, SecretBoxError, UUID_RE as UUID, type SecretBox } from '@sts/core';
import type { Logger } from '@sts/common';
import { signedHeaders } from '@sts/signing';
import client from 'prom-client';
import { buildBody, MAX_BODY_BYTES, type MonitorRef, type WebhookKind, type WebhookPayload } from './domain/payloads';
import { brokenReasonFor, redactWebhookUrl, skipReason } from './domain/policy';
import { createHttpsSender, type HttpsSender, type HttpsSenderOptions } from './adapters/httpsSender';
import {
  isMissingParent,
  isTransientDbError,
  type DispatcherRepository,
  type MonitorContext,
  type NewAttempt,
} from './adapters/repository';
import type {
  ConsumeOutcome,
  DispatcherEnvelope as Envelope,
  DispatcherMessaging,
  DispatcherRoutingKey,
} from './adapters/consumer';

export const DISPATCHER_QUEUE = 'webhook-dispatcher';
export const DISPATCHER_BINDINGS: DispatcherRoutingKey[] = ['monitor.hit', 'monitor.test', 'webhook.redeliver'];

export interface DispatcherOptions {
  repository: DispatcherRepository;
  /** needed by start() only; tests may drive handle() directly */
  messaging?: DispatcherMessaging;
  logger: Logger;
  /** SECRETS_ENCRYPTION_KEY */
  secretsKey: string | Buffer;
  timeoutMs?: number;
  maxConcurrencyPerEndpoint?: number;
  allowPrivateHosts?: readonly string[];
  prefetch?: number;
  queue?: string;
  registry?: client.Registry;
  /** test hooks of the sender (DNS resolution, URL override); see httpsSender.ts */
  senderOverrides?: Pick<HttpsSenderOptions, 'lookup' | 'urlOverride'>;
  now?: () => Date;
  /** when the database is unreachable, wait this long before handing the message back (default 1000) */
  transientRetryDelayMs?: number;
}

export interface Dispatcher {
  /** declares and binds the queue and starts consuming */
  start(): Promise<void>;
  /** handles one message (what the consumer calls) */
  handle(envelope: Envelope): Promise<ConsumeOutcome>;
  /** closes the sender's connections; call after the messaging client stopped (in-flight handlers done) */
  close(): void;
  inFlight(): number;
}

function header(env: Envelope, name: string): string | undefined {
  const v = (env.headers as Record<string, unknown>)[name];
  return typeof v === 'string' && v !== '' ? v : undefined;
}

function keywordsOf(list: readonly string[] | null | undefined): string[] | null {
  return list && list.length > 0 ? [...list] : null;
}

function createMetrics(registry: client.Registry | undefined) {
  const registers = registry ? [registry] : [];
  return {
    attempts: new client.Counter({
      name: 'webhook_delivery_attempts_total',
      help: 'Webhook delivery attempts by event, endpoint kind and outcome',
      labelNames: ['event', 'kind', 'outcome'] as const,
      registers,
    }),
    latency: new client.Histogram({
      name: 'webhook_delivery_duration_seconds',
      help: 'Time from sending a webhook request to the end of its response',
      labelNames: ['outcome'] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15],
      registers,
    }),
    hitAge: new client.Histogram({
      name: 'webhook_hit_age_seconds',
      help: 'Time from a hit being detected to its webhook being answered (live hits only)',
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    }),
    messages: new client.Counter({
      name: 'webhook_dispatcher_messages_total',
      help: 'Messages handled by routing key and result',
      labelNames: ['routing_key', 'result'] as const,
      registers,
    }),
  };
}

export function createDispatcher(options: DispatcherOptions): Dispatcher {
  const { repository: repo, logger } = options;
  const now = options.now ?? (() => new Date());
  const box: SecretBox = createSecretBox(options.secretsKey);
  const sender: HttpsSender = createHttpsSender({
    timeoutMs: options.timeoutMs ?? 15_000,
    maxConcurrencyPerEndpoint: options.maxConcurrencyPerEndpoint ?? 8,
    allowPrivateHosts: options.allowPrivateHosts ?? [],
    ...options.senderOverrides,
  });
  const metrics = createMetrics(options.registry);

  // Decrypting is cheap but not free at 1000/s; the ciphertext changes on every rotation, so a
  // cache keyed by it can never hand out an old secret.
  const secrets = new Map<string, string>();
  function secretFor(monitorId: string, ciphertext: string): string {
    const key = `${monitorId}|${ciphertext}`;
    let s = secrets.get(key);
    if (s === undefined) {
      s = box.decrypt(ciphertext, monitorId);
      if (secrets.size >= 10_000) secrets.clear();
      secrets.set(key, s);
    }
    return s;
  }

  async function record(attempt: NewAttempt, kind: WebhookKind | 'none'): Promise<void> {
    await repo.recordAttempt(attempt);
    metrics.attempts.inc({ event: attempt.event, kind, outcome: attempt.outcome });
    const fields = {
      event: attempt.event,
      deliveryId: attempt.deliveryId,
      monitorId: attempt.monitorId,
      hitId: attempt.hitId,
      outcome: attempt.outcome,
      statusCode: attempt.statusCode,
      latencyMs: attempt.latencyMs,
      error: attempt.error,
      url: attempt.url,
    };
    if (attempt.outcome === 'delivered') logger.verbose('webhook delivered', fields);
    else if (attempt.outcome === 'skipped') logger.info('webhook skipped', fields);
    else logger.warn('webhook delivery failed', fields);
  }

  interface Job {
    event: 'monitor.hit' | 'monitor.test';
    deliveryId: string;
    hitId: string | null;
    monitor: MonitorContext;
    payload: WebhookPayload;
    detectedAt?: string;
  }

  /** skip, or build, sign, send and log one delivery; resolves after the attempt row is committed */
  async function dispatch(job: Job): Promise<void> {
    const { monitor, event } = job;
    const webhook = monitor.webhook;
    const base = {
      monitorId: monitor.id,
      hitId: job.hitId,
      event,
      deliveryId: job.deliveryId,
      url: webhook ? redactWebhookUrl(webhook.url, webhook.kind) : '',
    };
    const skip = skipReason(event, monitor, now());
    if (skip || !webhook) {
      const attempt: NewAttempt = {
        ...base,
        outcome: 'skipped',
        statusCode: null,
        latencyMs: null,
        error: skip ?? 'monitor has no webhook',
        responseSnippet: null,
      };
      return record(attempt, webhook?.kind ?? 'none');
    }
    const failed = (error: string): NewAttempt => ({
      ...base,
      outcome: 'failed',
      statusCode: null,
      latencyMs: null,
      error,
      responseSnippet: null,
    });
    const body = buildBody(webhook.kind, job.payload);
    const size = Buffer.byteLength(body);
    if (size > MAX_BODY_BYTES) {
      return record(failed(`payload is ${size} bytes, more than the ${MAX_BODY_BYTES}-byte limit`), webhook.kind);
    }
    let secret: string;
    try {
      secret = secretFor(monitor.id, webhook.secretCiphertext);
    } catch (err) {
      if (!(err instanceof SecretBoxError)) throw err;
      return record(
        failed('the webhook signing secret cannot be decrypted (was SECRETS_ENCRYPTION_KEY changed?)'),
        webhook.kind,
      );
    }
    const headers = signedHeaders({ secret, event, deliveryId: job.deliveryId, body });
    const result = await sender.send({ url: webhook.url, body, headers });
    metrics.latency.observe({ outcome: result.outcome }, result.latencyMs / 1000);
    if (job.detectedAt && result.outcome === 'delivered') {
      const age = (Date.now() - Date.parse(job.detectedAt)) / 1000;
      if (Number.isFinite(age) && age >= 0) metrics.hitAge.observe(age);
    }
    await record(
      {
        ...base,
        outcome: result.outcome,
        statusCode: result.statusCode,
        latencyMs: result.latencyMs,
        error: result.error,
        responseSnippet: result.responseSnippet,
      },
      webhook.kind,
    );
    const broken = brokenReasonFor(webhook.kind, result.statusCode);
    if (broken) {
      await repo.markBroken(webhook.id, broken);
      logger.warn('webhook endpoint marked broken', { monitorId: monitor.id, url: base.url, reason: broken });
    } else if (result.outcome === 'delivered' && webhook.isBroken) {
      await repo.clearBroken(webhook.id);
      logger.info('webhook endpoint works again', { monitorId: monitor.id, url: base.url });
    }
  }

  /** the monitor of a message, or why the message is dropped */
  async function monitorFor(
    env: Envelope,
    monitorId: unknown,
  ): Promise<{ monitor: MonitorContext } | { outcome: ConsumeOutcome }> {
    const accountId = header(env, 'accountId');
    if (typeof monitorId !== 'string' || !UUID.test(monitorId)) {
      logger.warn('message names no valid monitor id; dead-lettered', {
        messageId: env.messageId,
        routingKey: env.routingKey,
      });
      return { outcome: 'dead-letter' };
    }
    const monitor = await repo.getMonitor(monitorId);
    if (!monitor) {
      // deleted since the event was published: nothing to deliver, nowhere to log an attempt
      logger.info('monitor no longer exists; message dropped', { messageId: env.messageId, monitorId });
      return { outcome: 'ack' };
    }
    if (accountId !== undefined && accountId !== monitor.accountId) {
      logger.warn('message account does not own the monitor; dead-lettered', { messageId: env.messageId, monitorId });
      return { outcome: 'dead-letter' };
    }
    return { monitor };
  }

  async function handleHit(env: Envelope): Promise<ConsumeOutcome> {
    const payload = env.payload as WebhookPayload & { event: 'monitor.hit' };
    const hitId = header(env, 'hitId');
    if (payload?.event !== 'monitor.hit' || !payload.tweet || (hitId !== undefined && !UUID.test(hitId))) {
      logger.warn('malformed monitor.hit message; dead-lettered', { messageId: env.messageId });
      return 'dead-letter';
    }
    if (env.redelivered) {
      // The broker re-sent a message we may have handled already (we stopped before the ack).
      // Its attempt is logged: do not send again (delivered, or failed: no automatic retries).
      // Not logged: it was never sent, or sent but not recorded; send it (at least once).
      const logged = await repo.loggedOutcome(env.messageId);
      if (logged) {
        logger.info('hit already handled; redelivered message acknowledged', {
          deliveryId: env.messageId,
          outcome: logged,
        });
        return 'ack';
      }
    }
    const found = await monitorFor(env, payload.monitor?.id);
    if ('outcome' in found) return found.outcome;
    await dispatch({
      event: 'monitor.hit',
      deliveryId: env.messageId,
      hitId: hitId ?? null,
      monitor: found.monitor,
      payload,
      detectedAt: payload.detectedAt,
    });
    return 'ack';
  }

  async function handleTest(env: Envelope): Promise<ConsumeOutcome> {
    const payload = env.payload as { event?: string; monitor?: MonitorRef };
    if (payload?.event !== 'monitor.test') {
      logger.warn('malformed monitor.test message; dead-lettered', { messageId: env.messageId });
      return 'dead-letter';
    }
    const found = await monitorFor(env, payload.monitor?.id);
    if ('outcome' in found) return found.outcome;
    const m = found.monitor;
    await dispatch({
      event: 'monitor.test',
      deliveryId: env.messageId,
      hitId: null,
      monitor: m,
      payload: {
        event: 'monitor.test',
        monitor: {
          id: m.id,
          targetUsername: payload.monitor?.targetUsername ?? m.targetUsername,
          keywords: keywordsOf(payload.monitor?.keywords ?? m.keywords),
        },
        test: true,
      },
    });
    return 'ack';
  }

  async function handleRedeliver(env: Envelope): Promise<ConsumeOutcome> {
    const attemptId = (env.payload as { attemptId?: unknown } | null)?.attemptId;
    if (typeof attemptId !== 'string' || !UUID.test(attemptId)) {
      logger.warn('malformed webhook.redeliver message; dead-lettered', { messageId: env.messageId });
      return 'dead-letter';
    }
    const attempt = await repo.getAttempt(attemptId);
    if (!attempt) {
      logger.warn('redeliver: no such delivery attempt; dropped', { messageId: env.messageId, attemptId });
      return 'ack';
    }
    const found = await monitorFor(env, attempt.monitorId);
    if ('outcome' in found) return found.outcome;
    const m = found.monitor;
    const monitorRef: MonitorRef = { id: m.id, targetUsername: m.targetUsername, keywords: keywordsOf(m.keywords) };
    if (attempt.event === 'monitor.test') {
      await dispatch({
        event: 'monitor.test',
        deliveryId: attempt.deliveryId,
        hitId: null,
        monitor: m,
        payload: { event: 'monitor.test', monitor: monitorRef, test: true },
      });
      return 'ack';
    }
    const hit = attempt.hitId ? await repo.getHit(attempt.hitId) : null;
    if (!hit) {
      logger.warn('redeliver: the hit of this attempt no longer exists; dropped', { attemptId });
      return 'ack';
    }
    await dispatch({
      event: 'monitor.hit',
      deliveryId: attempt.deliveryId,
      hitId: hit.id,
      monitor: m,
      payload: {
        event: 'monitor.hit',
        monitor: monitorRef,
        tweet: {
          id: hit.tweetId,
          text: hit.tweetText,
          authorUsername: hit.tweetAuthorUsername,
          createdAt: hit.tweetCreatedAt.toISOString(),
        },
        detectedAt: hit.detectedAt.toISOString(),
      },
    });
    return 'ack';
  }

  async function handle(env: Envelope): Promise<ConsumeOutcome> {
    let outcome: ConsumeOutcome;
    try {
      switch (env.routingKey) {
        case 'monitor.hit':
          outcome = await handleHit(env);
          break;
        case 'monitor.test':
          outcome = await handleTest(env);
          break;
        case 'webhook.redeliver':
          outcome = await handleRedeliver(env);
          break;
        default:
          logger.warn('unexpected routing key; dead-lettered', {
            routingKey: env.routingKey,
            messageId: env.messageId,
          });
          outcome = 'dead-letter';
      }
    } catch (err) {
      if (isTransientDbError(err)) {
        // PostgreSQL unreachable: not the message's fault. Hand it back after a pause (no dead
        // letter, no hot loop); it is delivered again, at least once, when the database is back.
        metrics.messages.inc({ routing_key: env.routingKey, result: 'retry' });
        logger.warn('database unavailable; message requeued', {
          messageId: env.messageId,
          routingKey: env.routingKey,
          error: err instanceof Error ? err.message : String(err),
        });
        await new Promise((r) => setTimeout(r, options.transientRetryDelayMs ?? 1000));
        return 'requeue';
      }
      if (isMissingParent(err)) {
        logger.info('monitor or hit deleted during delivery; message dropped', { messageId: env.messageId });
        outcome = 'ack';
      } else {
        metrics.messages.inc({ routing_key: env.routingKey, result: 'error' });
        logger.error('handling failed; message will be retried', {
          messageId: env.messageId,
          routingKey: env.routingKey,
          err,
        });
        throw err;
      }
    }
    metrics.messages.inc({ routing_key: env.routingKey, result: outcome });
    return outcome;
  }

  return {
    async start() {
      if (!options.messaging) throw new Error('createDispatcher: start() needs the messaging client');
      await options.messaging.consume({
        queue: options.queue ?? DISPATCHER_QUEUE,
        bindings: DISPATCHER_BINDINGS,
        prefetch: options.prefetch ?? 256,
        handler: handle,
      });
    },
    handle,
    close: () => sender.close(),
    inFlight: () => sender.inFlight(),
  };
}
