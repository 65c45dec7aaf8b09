/**
 * Monitor and webhook commands: create monitors, set / test / rotate webhooks, read the delivery
 * log and ask for a redelivery. Webhook signing secrets are generated here, stored encrypted
 * (AES-256-GCM with SECRETS_ENCRYPTION_KEY, the monitor id bound in) and printed exactly once.
 * `webhook test` and `redeliver` publish to RabbitMQ (AMQP_URL); the webhook-dispatcher sends.
 */
import { randomUUID } from 'node:crypto';
import { createLogger } from '@sts/common';
import {
  checkWebhookUrlForSave,
  createSecretBox,
  generateWebhookSecret,
  isValidUsername,
  KeywordError,
  parseKeywords,
  SecretBoxError,
  webhookSavePolicyFromEnv,
  WebhookUrlError,
  type CheckedWebhookUrl,
  type SecretBox,
} from '@sts/core';
import { AmqpClient, type HeadersOf, type PayloadOf } from '@sts/messaging';
import {
  CliUsageError,
  optionalInt,
  optionalString,
  requireString,
  requireUuid,
  type CliContext,
  type Command,
} from '../command';

const CONNECT_TIMEOUT_MS = 10_000;

function secretBox(ctx: CliContext): SecretBox {
  const key = ctx.env.SECRETS_ENCRYPTION_KEY;
  if (!key) {
    throw new Error(
      'SECRETS_ENCRYPTION_KEY is not set: webhook secrets are stored encrypted with it (32 bytes, base64 or 64 hex digits), and the dispatcher needs the same key',
    );
  }
  try {
    return createSecretBox(key);
  } catch (err) {
    if (err instanceof SecretBoxError) throw new Error(err.message);
    throw err;
  }
}

/**
 * The save-time URL check (@sts/core checkWebhookUrlForSave: https, public addresses, ports,
 * what the name resolves to). A refused URL is a usage error and nothing is saved; a bad
 * WEBHOOK_ALLOWED_PORTS / WEBHOOK_ALLOW_PRIVATE_HOSTS is an error naming the variable.
 */
async function webhookUrl(ctx: CliContext, raw: string, option: string): Promise<CheckedWebhookUrl> {
  try {
    return await checkWebhookUrlForSave(raw, webhookSavePolicyFromEnv(ctx.env, ctx.resolveHost));
  } catch (err) {
    if (err instanceof WebhookUrlError) throw new CliUsageError(`--${option}: ${err.message}`);
    throw err;
  }
}

async function publish<K extends 'monitor.test' | 'webhook.redeliver'>(
  ctx: CliContext,
  routingKey: K,
  payload: PayloadOf<K>,
  headers: HeadersOf<K>,
): Promise<string> {
  const logger = createLogger({ service: 'admin-cli', level: 'error', stream: process.stderr });
  const amqp = new AmqpClient({
    url: ctx.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672',
    logger,
    name: 'admin-cli',
    publishTimeoutMs: 10_000,
  });
  const messageId = randomUUID();
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      amqp.start(),
      new Promise((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`cannot reach RabbitMQ (AMQP_URL) within ${CONNECT_TIMEOUT_MS / 1000} s`)),
          CONNECT_TIMEOUT_MS,
        );
      }),
    ]);
    await amqp.publish(routingKey, payload, { messageId, headers });
  } finally {
    clearTimeout(timer);
    await amqp.stop();
  }
  return messageId;
}

async function loadMonitor(ctx: CliContext, id: string) {
  const monitor = await ctx.db().monitor.findUnique({
    where: { id },
    select: {
      id: true,
      accountId: true,
      targetUsername: true,
      keywords: true,
      isActive: true,
      webhook: { select: { id: true, url: true, kind: true, isBroken: true, brokenReason: true } },
    },
  });
  if (!monitor) throw new Error(`no monitor with id ${id}`);
  return monitor;
}

/** The URL as shown: Discord and Slack tokens are credentials, so they are masked. */
function shownUrl(url: string, kind: string): string {
  if (kind === 'discord') return url.replace(/(\/webhooks\/\d+\/)[^/?#]+/, '$1…');
  if (kind === 'slack') return url.replace(/(\/services\/[^/]+\/[^/]+\/)[^/?#]+/, '$1…');
  return url;
}

const monitorCreate: Command = {
  name: 'monitor create',
  summary: 'create a monitor (optionally with a webhook; its signing secret is shown once)',
  usage:
    'usage: npm run cli -- monitor create --account ID --target USERNAME [--keywords "a,b c"] [--webhook-url https://...] [--interval SECONDS] [--json]',
  options: {
    account: { type: 'string' },
    target: { type: 'string' },
    keywords: { type: 'string' },
    'webhook-url': { type: 'string' },
    interval: { type: 'string' },
  },
  async run(ctx, values) {
    const accountId = requireUuid(values, 'account', 'an account');
    const target = requireString(values, 'target').replace(/^@/, '');
    if (!isValidUsername(target)) {
      throw new CliUsageError('--target must be a username: 1 to 15 letters, digits or underscores');
    }
    let keywords: string[];
    try {
      keywords = parseKeywords(optionalString(values, 'keywords') ?? null);
    } catch (err) {
      if (err instanceof KeywordError) throw new CliUsageError(`--keywords: ${err.message}`);
      throw err;
    }
    const interval = optionalInt(values, 'interval', 10, 86_400);
    const rawUrl = optionalString(values, 'webhook-url');
    const hook = rawUrl !== undefined ? await webhookUrl(ctx, rawUrl, 'webhook-url') : undefined;
    const box = hook ? secretBox(ctx) : undefined;

    const db = ctx.db();
    const account = await db.account.findUnique({ where: { id: accountId }, select: { id: true } });
    if (!account) throw new Error(`no account with id ${accountId}`);
    const id = randomUUID();
    const secret = hook ? generateWebhookSecret() : undefined;
    await db.monitor.create({
      data: {
        id,
        accountId,
        targetUsername: target,
        targetKey: target.toLowerCase(),
        keywords,
        ...(interval !== undefined ? { checkIntervalSec: interval } : {}),
        ...(hook && secret && box
          ? { webhook: { create: { url: hook.url, kind: hook.kind, secretCiphertext: box.encrypt(secret, id) } } }
          : {}),
      },
    });
    const lines = [`monitor ${id} created: watching @${target}${keywords.length ? ` for ${keywords.join(', ')}` : ''}`];
    if (hook && secret) {
      lines.push(`webhook: ${shownUrl(hook.url, hook.kind)} (${hook.kind})`);
      lines.push(`signing secret (shown once, store it now): ${secret}`);
      lines.push(...hook.warnings.map((w) => `warning: ${w}`));
    }
    return {
      json: { id, ...(secret ? { secret } : {}), ...(hook?.warnings.length ? { warnings: hook.warnings } : {}) },
      text: lines.join('\n'),
    };
  },
};

const webhookSet: Command = {
  name: 'webhook set',
  summary: "set a monitor's webhook URL (a new signing secret is shown once)",
  usage: 'usage: npm run cli -- webhook set --monitor ID --url https://... [--json]',
  options: { monitor: { type: 'string' }, url: { type: 'string' } },
  async run(ctx, values) {
    const monitorId = requireUuid(values, 'monitor', 'a monitor');
    const hook = await webhookUrl(ctx, requireString(values, 'url'), 'url');
    const box = secretBox(ctx);
    await loadMonitor(ctx, monitorId);
    const secret = generateWebhookSecret();
    const secretCiphertext = box.encrypt(secret, monitorId);
    const fields = { url: hook.url, kind: hook.kind, secretCiphertext, isBroken: false, brokenReason: null };
    await ctx.db().webhookEndpoint.upsert({
      where: { monitorId },
      create: { monitorId, ...fields },
      update: { ...fields, secretRotatedAt: new Date() },
    });
    return {
      json: {
        monitor_id: monitorId,
        url: shownUrl(hook.url, hook.kind),
        kind: hook.kind,
        secret,
        ...(hook.warnings.length ? { warnings: hook.warnings } : {}),
      },
      text: [
        `webhook of monitor ${monitorId}: ${shownUrl(hook.url, hook.kind)} (${hook.kind})`,
        `signing secret (shown once, store it now): ${secret}`,
        ...hook.warnings.map((w) => `warning: ${w}`),
      ].join('\n'),
    };
  },
};

const webhookRotate: Command = {
  name: 'webhook rotate',
  summary: "replace a monitor's webhook signing secret (the new one is shown once)",
  usage: 'usage: npm run cli -- webhook rotate --monitor ID [--json]',
  options: { monitor: { type: 'string' } },
  async run(ctx, values) {
    const monitorId = requireUuid(values, 'monitor', 'a monitor');
    const box = secretBox(ctx);
    const monitor = await loadMonitor(ctx, monitorId);
    if (!monitor.webhook) throw new Error(`monitor ${monitorId} has no webhook; set one with "webhook set"`);
    const secret = generateWebhookSecret();
    const rotatedAt = new Date();
    await ctx.db().webhookEndpoint.update({
      where: { monitorId },
      data: { secretCiphertext: box.encrypt(secret, monitorId), secretRotatedAt: rotatedAt },
    });
    return {
      json: { monitor_id: monitorId, secret, rotated_at: rotatedAt.toISOString() },
      text: [
        `signing secret of monitor ${monitorId} rotated; deliveries from now on are signed with the new one`,
        `signing secret (shown once, store it now): ${secret}`,
      ].join('\n'),
    };
  },
};

const webhookTest: Command = {
  name: 'webhook test',
  summary: 'send a test ping (monitor.test) to the monitor’s webhook, on every plan',
  usage: 'usage: npm run cli -- webhook test --monitor ID [--json]',
  options: { monitor: { type: 'string' } },
  async run(ctx, values) {
    const monitorId = requireUuid(values, 'monitor', 'a monitor');
    const monitor = await loadMonitor(ctx, monitorId);
    if (!monitor.webhook) throw new Error(`monitor ${monitorId} has no webhook; set one with "webhook set"`);
    const payload = {
      event: 'monitor.test' as const,
      monitor: {
        id: monitor.id,
        targetUsername: monitor.targetUsername,
        keywords: monitor.keywords.length ? monitor.keywords : null,
      },
      test: true as const,
    };
    const messageId = await publish(ctx, 'monitor.test', payload, { accountId: monitor.accountId });
    return {
      json: { message_id: messageId, delivery_id: messageId, monitor_id: monitorId },
      text: `test ping queued: message ${messageId} (X-Service-Delivery); see "deliveries --monitor ${monitorId}"`,
    };
  },
};

const deliveries: Command = {
  name: 'deliveries',
  summary: "a monitor's webhook delivery attempts, newest first",
  usage: 'usage: npm run cli -- deliveries --monitor ID [--limit N (1-500, default 20)] [--json]',
  options: { monitor: { type: 'string' }, limit: { type: 'string' } },
  async run(ctx, values) {
    const monitorId = requireUuid(values, 'monitor', 'a monitor');
    const limit = optionalInt(values, 'limit', 1, 500) ?? 20;
    await loadMonitor(ctx, monitorId);
    const rows = await ctx.db().deliveryAttempt.findMany({
      where: { monitorId },
      orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
      take: limit,
    });
    const data = rows.map((r) => ({
      id: r.id,
      event: r.event,
      delivery_id: r.deliveryId,
      hit_id: r.hitId,
      outcome: r.outcome,
      status_code: r.statusCode,
      latency_ms: r.latencyMs,
      error: r.error,
      url: r.url,
      response_snippet: r.responseSnippet,
      created_at: r.createdAt.toISOString(),
    }));
    const text = data.length
      ? data
          .map(
            (d) =>
              `${d.created_at}  ${d.outcome.padEnd(9)} ${String(d.status_code ?? '-').padStart(3)} ${String(
                d.latency_ms ?? '-',
              ).padStart(6)} ms  ${d.event.padEnd(12)} attempt ${d.id}  delivery ${d.delivery_id}${
                d.error ? `  error: ${d.error}` : ''
              }`,
          )
          .join('\n')
      : `no delivery attempts for monitor ${monitorId}`;
    return { json: { data, meta: { count: data.length } }, text };
  },
};

const redeliver: Command = {
  name: 'redeliver',
  summary: 'send a logged delivery again (same X-Service-Delivery id, new signature)',
  usage: 'usage: npm run cli -- redeliver --attempt ID [--json]',
  options: { attempt: { type: 'string' } },
  async run(ctx, values) {
    const attemptId = requireUuid(values, 'attempt', 'a delivery attempt');
    const attempt = await ctx.db().deliveryAttempt.findUnique({
      where: { id: attemptId },
      select: {
        id: true,
        event: true,
        deliveryId: true,
        hitId: true,
        monitor: { select: { id: true, accountId: true } },
      },
    });
    if (!attempt) throw new Error(`no delivery attempt with id ${attemptId}`);
    if (attempt.event === 'monitor.hit' && !attempt.hitId) {
      throw new Error(`the hit of attempt ${attemptId} no longer exists; nothing to redeliver`);
    }
    const messageId = await publish(ctx, 'webhook.redeliver', { attemptId }, { accountId: attempt.monitor.accountId });
    return {
      json: { message_id: messageId, attempt_id: attemptId, delivery_id: attempt.deliveryId },
      text: `redelivery queued: message ${messageId}; delivery ${attempt.deliveryId} of monitor ${attempt.monitor.id} will be sent again`,
    };
  },
};

export const monitorCommands: Command[] = [
  monitorCreate,
  webhookSet,
  webhookTest,
  webhookRotate,
  deliveries,
  redeliver,
];
