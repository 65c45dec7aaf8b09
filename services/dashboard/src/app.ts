/**
 * The dashboard's express app: security headers, static assets, form parsing, sessions, CSRF,
 * then the routers (thin: they call @sts/usecases and render views), then one error middleware.
 */
import path from 'node:path';
import express, { type Express } from 'express';
import helmet from 'helmet';
import type client from 'prom-client';
import type { Logger, RedisClient } from '@sts/common';
import type { UseCases } from '@sts/usecases';
import type { AccountSessions } from './adapters/sessions';
import type { SignInThrottle } from './adapters/throttle';
import type { Mailer } from './mail/mailer';
import type { AfterAnswer } from './http/afterAnswer';
import { accountRouter } from './http/account';
import { authRouter, linkRouter, type AuthDeps } from './http/auth';
import { settingsRouter } from './http/settings';
import { errorMiddleware, notFound } from './http/errors';
import { httpMetrics } from './http/metrics';
import { monitorRouter } from './http/monitors';
import {
  absoluteLifetime,
  anonymousCsrf,
  csrfProtection,
  requireAccount,
  sessionGeneration,
  sessionMiddleware,
} from './http/session';

export interface AppOptions {
  useCases: UseCases;
  redis: RedisClient;
  throttle: SignInThrottle;
  logger: Logger;
  sessionSecrets: string[];
  sessionPrefix: string;
  sessionTtlSec: number;
  cookieSecure: 'auto' | 'true' | 'false';
  trustProxy: boolean | number | string[];
  apiUrl: string;
  liveRefreshMs: number;
  mailer: Pick<Mailer, 'send'>;
  sessions: AccountSessions;
  sessionMaxAgeSec: number;
  resendLimit: (accountId: string) => Promise<number | null>;
  /** sign-up and reset work after their answer (main drains it at stop) */
  afterAnswer: AfterAnswer;
  /** RESET_MAX_PER_HOUR per address */
  resetMailLimit: (email: string) => Promise<number | null>;
  /** the trial-end banner of the overview */
  trialEnd?: (accountId: string) => Promise<{ endedAt: string; paused: string[] } | null>;
  /** where dashboard_http_request_duration_seconds is registered (the service's /metrics) */
  registry?: client.Registry;
}

const PUBLIC_DIR = path.resolve(__dirname, '../public');

export function createApp(o: AppOptions): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', o.trustProxy);
  if (o.registry) app.use(httpMetrics(o.registry));
  app.use(
    helmet({
      contentSecurityPolicy: {
        useDefaults: false,
        directives: {
          defaultSrc: ["'self'"],
          scriptSrc: ["'self'"],
          styleSrc: ["'self'"],
          imgSrc: ["'self'"],
          fontSrc: ["'self'"],
          connectSrc: ["'self'"],
          objectSrc: ["'none'"],
          baseUri: ["'none'"],
          formAction: ["'self'"],
          frameAncestors: ["'none'"],
        },
      },
      referrerPolicy: { policy: 'same-origin' },
    }),
  );
  app.use('/static', express.static(PUBLIC_DIR, { index: false, maxAge: '1h', fallthrough: true }));
  app.use((_req, res, next) => {
    // pages can hold a key or a signing secret shown once: never cached
    res.set('Cache-Control', 'no-store');
    next();
  });
  app.use(express.urlencoded({ extended: false, limit: '32kb', parameterLimit: 50 }));
  app.use(
    sessionMiddleware({
      redis: o.redis,
      prefix: o.sessionPrefix,
      secrets: o.sessionSecrets,
      ttlSec: o.sessionTtlSec,
      secure: o.cookieSecure,
    }),
  );
  app.use(absoluteLifetime(o.sessionMaxAgeSec));
  app.use(sessionGeneration((id) => o.useCases.accounts.sessionGeneration(id)));
  app.use(anonymousCsrf(o.sessionSecrets, o.cookieSecure));
  app.use(csrfProtection);
  const auth: AuthDeps = {
    uc: o.useCases,
    throttle: o.throttle,
    cookieSecure: o.cookieSecure,
    mailer: o.mailer,
    sessions: o.sessions,
    sessionMaxAgeSec: o.sessionMaxAgeSec,
    afterAnswer: o.afterAnswer,
    resetMailLimit: o.resetMailLimit,
  };
  app.use(authRouter(auth));
  app.use(linkRouter(auth));
  app.use(requireAccount);
  app.use(settingsRouter({ ...auth, resendLimit: o.resendLimit }));
  app.use(accountRouter(o.useCases, { apiUrl: o.apiUrl, trialEnd: o.trialEnd }));
  app.use(monitorRouter(o.useCases, { liveRefreshMs: o.liveRefreshMs }));
  app.use(notFound);
  app.use(errorMiddleware(o.logger));
  return app;
}
