/**
 * Composition root of the dashboard: validates the environment, builds PostgreSQL, Redis and
 * the AMQP publisher, the use-cases (@sts/usecases) and the express app; serves the app on
 * DASHBOARD_PORT. Run by runService (packages/common): signals, environment, /healthz, /readyz and
 * /metrics on the internal OPS_PORT, exit codes; stopping lets requests in flight finish.
 */
import { createHash } from 'node:crypto';
import http from 'node:http';
import { createRedis, listenOn, runService, type ServiceDefinition } from '@sts/common';
import { createDbClient, migrationsCheck } from '@sts/db';
import { AmqpClient } from '@sts/messaging';
import { createSocialSource, createXBilling } from '@sts/social';
import {
  createUseCases,
  evictApiKeyVia,
  loggedWebhookUrlCheck,
  outboundLimiter,
  previewVia,
  redeliveryBudget,
  secretBoxFromEnv,
} from '@sts/usecases';
import {
  errorMessage,
  monitorLimitsFromEnv,
  plansFromEnv,
  retentionFromEnv,
  webhookSavePolicyFromEnv,
} from '@sts/core';
import { createAccountSessions } from './adapters/sessions';
import { createSignInThrottle } from './adapters/throttle';
import { lastTrialEnd } from './mail/accountEvents';
import { createMailer } from './mail/mailer';
import { createSmtpTransport } from './mail/transport';
import { AfterAnswer } from './http/afterAnswer';
import { createApp } from './app';
import { parseDashboardEnv, type DashboardEnv } from './env';

/**
 * The monitor preview's reads: one timeline read per target, cached in Redis (@sts/usecases
 * preview.ts); no API quota, but the fleet's X budget: low priority, bounded per account.
 */
export const dashboardService: ServiceDefinition<DashboardEnv> = {
  name: 'dashboard',
  startedMessage: 'dashboard listening',
  loadEnv: parseDashboardEnv,
  async start(env, { logger, registry, untilStopped }) {
    const db = createDbClient({ url: env.DATABASE_URL, poolSize: env.DB_POOL_SIZE });
    // REDIS_MODE: one server or a Redis Cluster (packages/common/src/redis.ts)
    const redis = createRedis(env, { maxRetriesPerRequest: 2, lazyConnect: true, logger });
    const amqp = new AmqpClient({ url: env.AMQP_URL, logger, name: 'dashboard' });
    // a bad WEBHOOK_ALLOWED_PORTS / WEBHOOK_ALLOW_PRIVATE_HOSTS fails the start, naming the variable
    const urlPolicy = webhookSavePolicyFromEnv({
      WEBHOOK_ALLOWED_PORTS: env.WEBHOOK_ALLOWED_PORTS,
      WEBHOOK_ALLOW_PRIVATE_HOSTS: env.WEBHOOK_ALLOW_PRIVATE_HOSTS,
    });
    // the monitor preview's X reads spend the fleet's X budget and share its user cache (Redis)
    // and are counted as X bills them (x_billable_total)
    const billing = createXBilling({ db, registry, logger });
    const social = createSocialSource(env, { db, redis, registry, billing });
    const useCases = createUseCases({
      db,
      plans: plansFromEnv(env),
      monitorLimits: monitorLimitsFromEnv(env),
      retention: retentionFromEnv(env),
      secretBox: secretBoxFromEnv(env.SECRETS_ENCRYPTION_KEY, env.SECRETS_ENCRYPTION_KEYS_OLD),
      publisher: amqp,
      evictApiKey: evictApiKeyVia(redis),
      outboundLimit: outboundLimiter(redis, env.WEBHOOK_TEST_MAX_PER_MIN),
      redeliveryBudget: redeliveryBudget(redis, env.REDELIVERY_MAX_PER_HOUR),
      requireVerifiedEmail: true,
      webhookUrlCheck: loggedWebhookUrlCheck(urlPolicy, logger),
      // one timeline read per target at low X priority, cached in Redis, within the preview limits
      preview: previewVia(social, redis, {
        logger,
        perMinute: env.PREVIEW_MAX_PER_MIN,
        perDay: env.PREVIEW_MAX_PER_DAY,
      }),
    });
    const mailer = createMailer({
      db,
      amqp,
      logger,
      registry,
      transport: env.SMTP_URL ? createSmtpTransport(env.SMTP_URL) : null,
      from: env.MAIL_FROM,
      baseUrl: env.DASHBOARD_PUBLIC_URL.replace(/\/$/, ''),
      pollMs: env.MAIL_POLL_MS,
      retryBaseMs: env.MAIL_RETRY_BASE_MS,
      retryMaxMs: env.MAIL_RETRY_MAX_MS,
      digestPeriodMs: env.MAIL_DIGEST_MINUTES * 60_000,
      freeMonitors: monitorLimitsFromEnv(env).free,
    });
    const resend = outboundLimiter(redis, env.VERIFY_RESEND_MAX_PER_HOUR, 3_600_000);
    const afterAnswer = new AfterAnswer(logger);
    const resetMails = outboundLimiter(redis, env.RESET_MAX_PER_HOUR, 3_600_000);
    const app = createApp({
      afterAnswer,
      // the address hashed in the key (no addresses of people in Redis key names)
      resetMailLimit: (email) =>
        resetMails(`reset-mail:${createHash('sha256').update(email).digest('hex').slice(0, 32)}`),
      mailer,
      sessions: createAccountSessions(redis, env.SESSION_KEY_PREFIX),
      sessionMaxAgeSec: env.SESSION_MAX_AGE_SEC,
      resendLimit: (accountId) => resend(`verify:${accountId}`),
      trialEnd: (accountId) => lastTrialEnd(db, accountId),
      useCases,
      redis,
      throttle: createSignInThrottle({
        redis,
        perEmail: env.SIGNIN_MAX_PER_EMAIL,
        perAddress: env.SIGNIN_MAX_PER_ADDRESS,
        windowSec: env.SIGNIN_WINDOW_SEC,
        perEmailHourly: env.SIGNIN_MAX_PER_EMAIL_HOURLY,
      }),
      logger,
      sessionSecrets: env.SESSION_SECRET,
      sessionPrefix: env.SESSION_KEY_PREFIX,
      sessionTtlSec: env.SESSION_TTL_SEC,
      cookieSecure: env.COOKIE_SECURE,
      trustProxy: env.TRUST_PROXY,
      apiUrl: env.API_PUBLIC_URL.replace(/\/$/, ''),
      liveRefreshMs: env.LIVE_REFRESH_MS,
      registry,
    });
    const server = http.createServer(app);
    server.headersTimeout = 20_000;
    server.requestTimeout = 30_000;
    try {
      await untilStopped(redis.connect());
      // Not awaited (start() retries until connected): while RabbitMQ is down the pages work and
      // only Test webhook / Redeliver answer 503. Readiness checks only what serving pages needs
      // (PostgreSQL, Redis, migrations), so a broker outage never takes the dashboard off the
      // Ingress; the broker's state is logged by the client and alerted on by RabbitMQ's metrics.
      amqp.start().catch((err: unknown) => logger.warn('RabbitMQ client did not start', { err: errorMessage(err) }));
      await mailer.start();
      const port = await listenOn(server, env.DASHBOARD_PORT, env.DASHBOARD_HOST);
      return {
        info: { port },
        checks: {
          migrations: migrationsCheck(db),
          postgres: async () => void (await db.$queryRaw`SELECT 1`),
          redis: async () => void (await redis.ping()),
        },
        async stop() {
          await new Promise<void>((resolve) => {
            server.close(() => resolve());
            server.closeIdleConnections();
          });
          await afterAnswer.drain();
          await mailer.stop();
          await amqp.stop();
          await billing.close();
          redis.disconnect();
          await db.$disconnect();
        },
      };
    } catch (err) {
      server.close();
      await mailer.stop().catch(() => undefined);
      await amqp.stop().catch(() => undefined);
      await billing.close();
      redis.disconnect();
      await db.$disconnect();
      throw err;
    }
  },
};

if (require.main === module) runService(dashboardService);
