/**
 * One delivery: decide whether it goes out (skip reasons), build and sign the body, send it, log
 * every attempt, and keep the endpoint's broken flag current. Discord and Slack 429 answers are
 * the platform's flow control: the same delivery (same X-Service-Delivery, fresh timestamp and
 * signature) is sent again after the wait the platform names, at most RATE_LIMIT_MAX_WAITS times
 * and RATE_LIMIT_MAX_TOTAL_MS in all, each attempt logged.
 */
import { inSpan, SpanKind } from '@sts/telemetry';
import { createSecretBox, SecretBoxError, type SecretBox } from '@sts/core';
import type { Logger } from '@sts/common';
import { signedHeaders } from '@sts/signing';
import { buildBody, MAX_BODY_BYTES, type WebhookKind, type WebhookPayload } from './domain/payloads';
import { brokenReasonFor, redactWebhookUrl, skipReason } from './domain/policy';
import { requestHeaderPairs } from './domain/attemptDetail';
import { healthNeedsUpdate } from './domain/health';
import {
  laneKey,
  RATE_LIMIT_DEFAULT_WAIT_MS,
  RATE_LIMIT_MAX_TOTAL_MS,
  RATE_LIMIT_MAX_WAITS,
  retryAfterMs,
} from './domain/pacing';
import type { HttpsSender, SendResult } from './adapters/httpsSender';
import type { DispatcherRepository, MonitorContext, NewAttempt } from './adapters/repository';
import type { LaneControl } from './lanes';
import type { DispatcherMetrics } from './metrics';

interface SentRequest {
  headers: Record<string, string>;
  body: string;
}

export interface Job {
  event: 'monitor.hit' | 'monitor.test';
  deliveryId: string;
  hitId: string | null;
  monitor: MonitorContext;
  payload: WebhookPayload;
  detectedAt?: string;
}

/** A job that goes out: its monitor has a webhook and no skip reason. */
export type SendableJob = Job & { monitor: MonitorContext & { webhook: NonNullable<MonitorContext['webhook']> } };

/** A stored secret cannot be decrypted: a server-side fault (wrong SECRETS_ENCRYPTION_KEY), not the message's. */
export class SecretsUnavailableError extends Error {
  override name = 'SecretsUnavailableError';
}

/** The dispatcher is stopping and this delivery did not finish within the grace period; nothing was logged. */
export class DrainAbortError extends Error {
  override name = 'DrainAbortError';
}

export interface DelivererOptions {
  repository: DispatcherRepository;
  sender: HttpsSender;
  logger: Logger;
  metrics: DispatcherMetrics;
  secretsKey: string | Buffer;
  now: () => Date;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

/**
 * A factory of small closures (each under 60 lines) sharing the secret cache, the repository and
 * the metrics; its length is the sum of those, not one long procedure.
 */
// eslint-disable-next-line max-lines-per-function -- a factory of small closures, see the comment above
export function createDeliverer(options: DelivererOptions) {
  const { repository: repo, sender, logger, metrics } = options;
  const box: SecretBox = createSecretBox(options.secretsKey);

  // Decrypting is cheap but not free at 1000/s; the ciphertext changes on every rotation, so a
  // cache keyed by it can never hand out an old secret.
  const secrets = new Map<string, string>();
  function secretFor(monitorId: string, ciphertext: string): string {
    const key = `${monitorId}|${ciphertext}`;
    let s = secrets.get(key);
    if (s === undefined) {
      try {
        s = box.decrypt(ciphertext, monitorId);
      } catch (err) {
        if (err instanceof SecretBoxError) {
          throw new SecretsUnavailableError(
            'a stored webhook signing secret cannot be decrypted: SECRETS_ENCRYPTION_KEY is not the key the secrets were stored with',
          );
        }
        throw err;
      }
      if (secrets.size >= 10_000) secrets.clear();
      secrets.set(key, s);
    }
    return s;
  }

  async function record(attempt: NewAttempt, kind: WebhookKind | 'none'): Promise<void> {
    await repo.recordAttempt(attempt);
    metrics.attempts.inc({ event: attempt.event, kind, outcome: attempt.outcome });
    // winston formats (timestamp, redaction, JSON) every entry before the transport drops the ones
    // below its level: at `info` the per-delivery line would cost that for nothing
    if (attempt.outcome === 'delivered' && !logger.isLevelEnabled('verbose')) return;
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

  function base(job: Job) {
    const webhook = job.monitor.webhook;
    return {
      monitorId: job.monitor.id,
      hitId: job.hitId,
      event: job.event,
      deliveryId: job.deliveryId,
      url: webhook ? redactWebhookUrl(webhook.url, webhook.kind) : '',
    };
  }

  /** the job as one that goes out, or null when it is skipped (then log it with recordSkip) */
  function sendable(job: Job): SendableJob | null {
    const webhook = job.monitor.webhook;
    if (!webhook || skipReason(job.event, job.monitor, options.now())) return null;
    return { ...job, monitor: { ...job.monitor, webhook } };
  }

  /** logs why a job does not go out */
  async function recordSkip(job: Job): Promise<void> {
    const webhook = job.monitor.webhook;
    const error = skipReason(job.event, job.monitor, options.now()) ?? 'monitor has no webhook';
    await record(
      { ...base(job), outcome: 'skipped', statusCode: null, latencyMs: null, error, responseSnippet: null },
      webhook?.kind ?? 'none',
    );
  }

  /** the attempt row, with its detail: the request as sent and what came back */
  function attemptOf(job: Job, result: SendResult, error: string | null, sent: SentRequest): NewAttempt {
    return {
      ...base(job),
      outcome: result.outcome,
      statusCode: result.statusCode,
      latencyMs: result.latencyMs,
      error,
      responseSnippet: result.responseSnippet,
      requestHeaders: requestHeaderPairs(sent.headers, sent.body),
      requestBody: sent.body,
      responseHeaders: result.statusCode === null ? null : result.responseHeaders,
      responseBody: result.responseBody,
    };
  }

  /**
   * The secrets of a delivery. During an overlapped rotation X-Service-Signature stays on the old
   * secret and webhook-signature carries the new one and the old one; afterwards only the new.
   */
  function signingKeys(job: SendableJob): { secret: string; standardSecrets: string[] } {
    const webhook = job.monitor.webhook;
    const current = secretFor(job.monitor.id, webhook.secretCiphertext);
    const until = webhook.previousSecretUntil;
    if (!webhook.previousSecretCiphertext || !until || until.getTime() <= options.now().getTime()) {
      return { secret: current, standardSecrets: [current] };
    }
    const previous = secretFor(job.monitor.id, webhook.previousSecretCiphertext);
    return { secret: previous, standardSecrets: [current, previous] };
  }

  async function updateBrokenFlag(job: SendableJob, result: SendResult): Promise<void> {
    const webhook = job.monitor.webhook;
    const broken = brokenReasonFor(webhook.kind, result.statusCode);
    const url = redactWebhookUrl(webhook.url, webhook.kind);
    if (broken) {
      await repo.markBroken(webhook.id, broken);
      logger.warn('webhook endpoint marked broken', { monitorId: job.monitor.id, url, reason: broken });
    } else if (result.outcome === 'delivered' && webhook.isBroken) {
      await repo.clearBroken(webhook.id);
      logger.info('webhook endpoint works again', { monitorId: job.monitor.id, url });
    }
  }

  /**
   * Counts the final outcome of a send towards the endpoint's health (not for a healthy endpoint's
   * success: nothing would change). The repository writes the customer's notification with it.
   */
  async function updateHealth(job: SendableJob, result: SendResult): Promise<void> {
    const webhook = job.monitor.webhook;
    const delivered = result.outcome === 'delivered';
    if (!healthNeedsUpdate(webhook, delivered)) return;
    const change = await repo.recordHealth({ endpointId: webhook.id, delivered, at: options.now() });
    if (!change) return;
    const fields = {
      monitorId: job.monitor.id,
      url: redactWebhookUrl(webhook.url, webhook.kind),
      consecutiveFailures: change.consecutiveFailures,
      firstFailureAt: change.firstFailureAt?.toISOString() ?? null,
    };
    if (change.becameDisabled)
      logger.warn('webhook endpoint disabled: live hits are not sent until a test webhook succeeds', fields);
    else if (change.becameFailing) logger.warn('webhook endpoint failing', fields);
    else if (delivered && webhook.disabledAt)
      logger.info('webhook endpoint re-enabled by a successful delivery', fields);
  }

  /**
   * Builds, signs and sends a job that goes out, logging each attempt. Resolves after the last
   * attempt row is committed. Throws DrainAbortError (nothing logged for the unfinished attempt)
   * when `signal` aborts first, SecretsUnavailableError when the secret cannot be decrypted.
   */
  async function send(job: SendableJob, lane: LaneControl | null, signal: AbortSignal): Promise<void> {
    const webhook = job.monitor.webhook;
    const body = buildBody(webhook.kind, job.payload);
    const size = Buffer.byteLength(body);
    if (size > MAX_BODY_BYTES) {
      const error = `payload is ${size} bytes, more than the ${MAX_BODY_BYTES}-byte limit`;
      return record(
        { ...base(job), outcome: 'failed', statusCode: null, latencyMs: null, error, responseSnippet: null },
        webhook.kind,
      );
    }
    const keys = signingKeys(job);
    let waits = 0;
    let waited = 0;
    for (;;) {
      const headers = signedHeaders({ ...keys, event: job.event, deliveryId: job.deliveryId, body });
      // OpenTelemetry: the attempt is a CLIENT span under the message's CONSUMER span (when tracing is on)
      const endpointKey = lane?.key ?? laneKey(webhook.kind, webhook.url);
      const result = await inSpan(
        'webhook attempt',
        SpanKind.CLIENT,
        { 'webhook.kind': webhook.kind, 'webhook.delivery_id': job.deliveryId },
        () => sender.send({ url: webhook.url, body, headers, endpointKey, signal }),
        (span, r) =>
          span.setAttributes({ 'webhook.outcome': r.outcome, 'http.response.status_code': r.statusCode ?? 0 }),
      );
      if (signal.aborted) throw new DrainAbortError('stopping: delivery not finished within the grace period');
      metrics.latency.observe({ outcome: result.outcome }, result.latencyMs / 1000);
      if (job.detectedAt && result.outcome === 'delivered') {
        const age = (Date.now() - Date.parse(job.detectedAt)) / 1000;
        if (Number.isFinite(age) && age >= 0) metrics.hitAge.observe(age);
      }
      const wait = rateLimitWait(webhook.kind, result, waits, waited);
      if (wait === null) {
        lane?.release(); // the endpoint answered for the last time: its slot is free for the next delivery
        const error =
          result.statusCode === 429 && webhook.kind !== 'native'
            ? `${platform(webhook.kind)} answered HTTP 429 (rate limited); gave up after ${waits} wait(s) of ${Math.round(waited / 100) / 10} s in all`
            : result.error;
        await record(attemptOf(job, result, error, { headers, body }), webhook.kind);
        await updateHealth(job, result);
        return updateBrokenFlag(job, result);
      }
      waits++;
      waited += wait;
      const error = `${platform(webhook.kind)} answered HTTP 429 (rate limited); sending again in ${Math.round(wait / 100) / 10} s (wait ${waits} of ${RATE_LIMIT_MAX_WAITS})`;
      await record(attemptOf(job, result, error, { headers, body }), webhook.kind);
      lane?.blockUntil(Date.now() + wait);
      await sleep(wait, signal);
      if (signal.aborted) throw new DrainAbortError('stopping while waiting out a 429');
      await lane?.paced();
    }
  }

  return { sendable, recordSkip, send };
}

function platform(kind: WebhookKind): string {
  return kind === 'discord' ? 'Discord' : kind === 'slack' ? 'Slack' : 'the receiver';
}

/** ms to wait before sending again after a Discord/Slack 429, or null to stop here */
function rateLimitWait(kind: WebhookKind, result: SendResult, waits: number, waited: number): number | null {
  if (kind === 'native' || result.statusCode !== 429 || waits >= RATE_LIMIT_MAX_WAITS) return null;
  const wait = retryAfterMs(result.headers, result.responseSnippet, Date.now()) ?? RATE_LIMIT_DEFAULT_WAIT_MS;
  return waited + wait > RATE_LIMIT_MAX_TOTAL_MS ? null : wait;
}
