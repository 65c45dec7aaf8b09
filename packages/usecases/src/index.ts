/**
 * @sts/usecases: the customer-facing rules in one place, for the dashboard and the admin CLI.
 * `createUseCases(opts)` → { accounts, overview, plans, keys, monitors, webhooks, deliveries, hits, coverage, admin }.
 * See README.md for the API and the errors.
 */
import {
  createSecretBox,
  monitorLimitsFromEnv,
  planEnv,
  planMonitorEnv,
  planRetentionEnv,
  plansFromEnv,
  retentionFromEnv,
  SecretBoxError,
  type MonitorLimits,
  type Plans,
  type Retention,
  type SecretBox,
} from '@sts/core';
import { z } from 'zod';
import { prismaRepositories } from './adapters/prisma';
import { composeUseCases, type UseCases } from './compose';
import { NotConfiguredError } from './errors';
import type { UseCaseOptions } from './types';

export * from './errors';
export * from './types';
export { encodeCursor, decodeCursor, PAGE_DEFAULT, PAGE_MAX } from './cursor';
export { hashPassword, verifyPassword, needsRehash, DEFAULT_SCRYPT, type ScryptParams } from './password';
export { checkPassword, PASSWORD_MIN, PASSWORD_MAX } from './accounts';
export type { AccountUseCases, AccountAdminUseCases } from './accounts';
export { evictApiKeyVia, MAX_ACTIVE_KEYS, type KeyUseCases, type KeyAdminUseCases, type RevokedApiKey } from './keys';
export { checkTarget, checkKeywords, checkFilters, MAX_INTERVAL_SEC } from './monitors';
export {
  PREVIEW_CACHE_SECONDS_DEFAULT,
  PREVIEW_POSTS,
  type Preview,
  type PreviewInput,
  type PreviewPost,
  type PreviewUseCases,
} from './preview';
export type { MonitorUseCases, WebhookUseCases, MonitorAdminUseCases } from './monitors';
export { EXAMPLE_TWEET_ID, type PayloadPreview, type PayloadPreviewUseCases } from './payloadPreview';
export {
  postUrl,
  RECOVER_MAX,
  RECOVER_OUTCOMES,
  type DeliveryUseCases,
  type HitUseCases,
  type LogAdminUseCases,
  type RecoverOutcome,
  type RecoverWindow,
  type Recovered,
} from './logs';
export { trialState, type PlanUseCases } from './overview';
export type { CoverageUseCases } from './coverage';
export type { CoverageGap, MonitorCoverage } from '@sts/db';
export { outboundLimiter, OUTBOUND_WINDOW_MS, previewLimiter, redeliveryBudget } from './limits';
export {
  RESET_TTL_MS,
  VERIFY_TTL_MS,
  tokenHash,
  type IdentityUseCases,
  type IssuedToken,
  type Registration,
} from './identity';
export { emailKey } from './context';
export {
  checkWebhookUrl,
  maskWebhookUrl,
  shownWebhookUrl,
  WEBHOOK_LABEL,
  type CheckedUrl,
  type WebhookUrlCheck,
} from './webhookUrl';

export type { AdminUseCases, UseCases } from './compose';

export function createUseCases(opts: UseCaseOptions): UseCases {
  const { db, ...settings } = opts;
  return composeUseCases(settings, prismaRepositories(db));
}

/** The environment fields the use-cases read: plan numbers, monitor limits (all with defaults). */
export const useCaseEnv = {
  ...planEnv,
  ...planMonitorEnv,
  ...planRetentionEnv,
  /** Test webhook + Redeliver per account per minute (each makes the service post to the customer's URL) */
  WEBHOOK_TEST_MAX_PER_MIN: z.coerce.number().int().min(1).max(10_000).default(10),
  /** monitor previews that read upstream (cache misses), per account per minute and per day */
  PREVIEW_MAX_PER_MIN: z.coerce.number().int().min(1).max(10_000).default(20),
  PREVIEW_MAX_PER_DAY: z.coerce.number().int().min(1).max(1_000_000).default(200),
  /** redeliveries Recover may queue per account per hour (each failed delivery at most once while pending) */
  REDELIVERY_MAX_PER_HOUR: z.coerce.number().int().min(1).max(1_000_000).default(1000),
};

/** Plans and monitor limits from an environment; throws a zod error naming a bad PLAN_* variable. */
export function planConfigFromEnv(env: NodeJS.ProcessEnv): {
  plans: Plans;
  monitorLimits: MonitorLimits;
  retention: Retention;
} {
  const parsed = z.object(useCaseEnv).parse(env);
  return {
    plans: plansFromEnv(parsed),
    monitorLimits: monitorLimitsFromEnv(parsed),
    retention: retentionFromEnv(parsed),
  };
}

/** WEBHOOK_TEST_MAX_PER_MIN (default 10); throws a zod error naming it when malformed. */
export function outboundPerMinuteFromEnv(env: NodeJS.ProcessEnv): number {
  return z.object({ WEBHOOK_TEST_MAX_PER_MIN: useCaseEnv.WEBHOOK_TEST_MAX_PER_MIN }).parse(env)
    .WEBHOOK_TEST_MAX_PER_MIN;
}

/**
 * A lazy secret box over SECRETS_ENCRYPTION_KEY for `UseCaseOptions.secretBox`: NotConfiguredError
 * when it is unset or malformed, raised only when a webhook secret is actually made.
 */
export function secretBoxFromEnv(key: string | undefined, oldKeys: readonly string[] = []): () => SecretBox {
  let box: SecretBox | undefined;
  return () => {
    if (box) return box;
    if (!key) {
      throw new NotConfiguredError(
        'SECRETS_ENCRYPTION_KEY is not set: webhook secrets are stored encrypted with it (32 bytes, base64 or 64 hex digits), and the dispatcher needs the same key',
      );
    }
    try {
      box = createSecretBox(key, oldKeys);
    } catch (err) {
      if (err instanceof SecretBoxError) throw new NotConfiguredError(err.message);
      throw err;
    }
    return box;
  };
}
export { loggedWebhookUrlCheck, previewVia } from './wiring';
