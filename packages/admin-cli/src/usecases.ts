/**
 * The CLI's side of @sts/usecases: one UseCases per invocation, built from the CLI's environment
 * (PLAN_*, SECRETS_ENCRYPTION_KEY, AMQP_URL, REDIS_URL / REDIS_KEY_PREFIX), and the mapping of the
 * use-cases' errors to the CLI's (a bad flag → usage error, exit 2; the rest → exit 1).
 */
import { oldKeysFromEnv } from './commands/secrets';
import { createLogger, createRedis, evictCachedApiKey, redisConfigProblems } from '@sts/common';
import { checkWebhookUrlForSave, webhookSavePolicyFromEnv } from '@sts/core';
import { AmqpClient } from '@sts/messaging';
import { createSocialSource, createXBilling, socialEnv } from '@sts/social';
import {
  ConflictError,
  createUseCases,
  NotFoundError,
  outboundLimiter,
  outboundPerMinuteFromEnv,
  planConfigFromEnv,
  secretBoxFromEnv,
  UseCaseError,
  ValidationError,
  type PreviewOptions,
  type Publisher,
  type UseCases,
} from '@sts/usecases';
import { z, ZodError } from 'zod';
import { CliUsageError, type CliContext } from './command';

const CONNECT_TIMEOUT_MS = 10_000;

/**
 * Publishes over one connection opened at the first message and closed when the command ends
 * (ctx.onClose): a run publishes once, or up to RECOVER_MAX times for `redeliver --failed-since`.
 */
function runPublisher(ctx: CliContext): Publisher {
  let started: Promise<AmqpClient> | undefined;
  const start = async () => {
    const logger = createLogger({ service: 'admin-cli', level: 'error', stream: process.stderr });
    const amqp = new AmqpClient({
      url: ctx.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672',
      logger,
      name: 'admin-cli',
      publishTimeoutMs: 10_000,
    });
    ctx.onClose(() => amqp.stop());
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
    } finally {
      clearTimeout(timer);
    }
    return amqp;
  };
  return {
    async publish(routingKey, payload, opts) {
      started ??= start();
      await (await started).publish(routingKey, payload, opts);
    },
  };
}

/** Deletes a key's cached lookup in Redis so a revocation is immediate; the gateway's TTLs bound it anyway. */
function redisEvictor(ctx: CliContext): (keyHash: string) => Promise<boolean> {
  // REDIS_MODE / REDIS_URL / REDIS_KEY_PREFIX as the services read them (checked in useCases())
  return (keyHash) => withRedis(ctx, false, (redis) => evictCachedApiKey(redis, keyHash));
}

/** One short Redis connection per call (a CLI run makes one or two); a cache that is down is skipped. */
async function withRedis<T>(ctx: CliContext, fallback: T, work: (redis: ReturnType<typeof createRedis>) => Promise<T>) {
  const redis = createRedis(
    { ...ctx.env, REDIS_KEY_PREFIX: ctx.env.REDIS_KEY_PREFIX ?? 'sts:' },
    { lazyConnect: true, maxRetriesPerRequest: 0, connectTimeout: 2000, reconnect: false },
  );
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    return await work(redis);
  } catch {
    return fallback;
  } finally {
    redis.disconnect();
  }
}

/** The monitor preview's source (SOCIAL_SOURCE and X_* as the services read them) and Redis cache. */
function previewOptions(ctx: CliContext): PreviewOptions {
  return {
    async timeline(username, limit, priority) {
      const parsed = z.object(socialEnv).safeParse(ctx.env);
      if (!parsed.success) {
        const issue = parsed.error.issues[0];
        throw new Error(`${issue?.path.join('.') ?? 'SOCIAL_SOURCE'}: ${issue?.message ?? 'invalid'}`);
      }
      // the preview's X reads are billed like the services' (x_billable_reads, `x cost`)
      const billing = createXBilling({ db: ctx.db() });
      try {
        const source = createSocialSource(parsed.data, { db: ctx.db(), billing });
        const page = await source.getUserTimeline(username, { limit, priority });
        return page ? page.items : null;
      } finally {
        await billing.close();
      }
    },
    cache: {
      get: (key) => withRedis(ctx, null, (r) => r.get(key)),
      set: (key, value, ttl) => withRedis(ctx, undefined, async (r) => void (await r.set(key, value, 'EX', ttl))),
    },
  };
}

/** The per-account Test webhook / Redeliver bound (shared with the dashboard); open when Redis is unreachable. */
function redisOutboundLimit(ctx: CliContext, perMinute: number): (accountId: string) => Promise<number | null> {
  return (accountId) => withRedis(ctx, null, (r) => outboundLimiter(r, perMinute)(accountId));
}

const built = new WeakMap<CliContext, UseCases>();

export function useCases(ctx: CliContext): UseCases {
  let uc = built.get(ctx);
  if (!uc) {
    let config: ReturnType<typeof planConfigFromEnv> & { outboundPerMinute: number };
    try {
      config = { ...planConfigFromEnv(ctx.env), outboundPerMinute: outboundPerMinuteFromEnv(ctx.env) };
    } catch (err) {
      if (err instanceof ZodError) {
        const issue = err.issues[0];
        throw new Error(`${issue?.path.join('.') ?? 'PLAN_*'}: ${issue?.message ?? 'invalid'}`);
      }
      throw err;
    }
    // a bad Redis setting is named before anything changes (a revoke evicts the key's cache)
    const redisProblem = redisConfigProblems(ctx.env)[0];
    if (redisProblem) throw new Error(redisProblem);
    uc = createUseCases({
      db: ctx.db(),
      ...config,
      secretBox: secretBoxFromEnv(ctx.env.SECRETS_ENCRYPTION_KEY, oldKeysFromEnv(ctx.env)),
      publisher: runPublisher(ctx),
      evictApiKey: redisEvictor(ctx),
      outboundLimit: redisOutboundLimit(ctx, config.outboundPerMinute),
      // the save-time URL rule (HTTPS, public addresses, ports, what the name resolves to); a bad
      // WEBHOOK_ALLOWED_PORTS / WEBHOOK_ALLOW_PRIVATE_HOSTS is an error naming the variable
      webhookUrlCheck: (raw) => checkWebhookUrlForSave(raw, webhookSavePolicyFromEnv(ctx.env, ctx.resolveHost)),
      preview: previewOptions(ctx),
    });
    built.set(ctx, uc);
  }
  return uc;
}

const kebab = (field: string) => field.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);

export interface ErrorMapping {
  /** use-case field → flag name, where they differ (e.g. { webhookUrl: 'url' }) */
  flags?: Record<string, string>;
  /** NotFound and Conflict are usage errors too (exit 2): for commands whose ids are flags to fix */
  strict?: boolean;
}

/** Runs a use-case call, turning its errors into the CLI's. */
export async function call<T>(fn: () => Promise<T>, mapping: ErrorMapping = {}): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof ValidationError) {
      const flag = mapping.flags?.[err.field] ?? kebab(err.field);
      // "must …" / "is …" read as a sentence after the flag; anything else follows a colon
      throw new CliUsageError(`--${flag}${/^(must|is) /.test(err.message) ? ' ' : ': '}${err.message}`);
    }
    if (mapping.strict && (err instanceof NotFoundError || err instanceof ConflictError)) {
      throw new CliUsageError(err.message);
    }
    if (err instanceof UseCaseError) throw new Error(err.message);
    throw err;
  }
}
