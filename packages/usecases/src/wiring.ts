/**
 * Pieces of a front end's use-case wiring that the dashboard and the management API (read-api)
 * build the same way: the save-time webhook URL rule with its refusals logged, and the monitor
 * preview's timeline read and Redis cache.
 */
import type { Logger } from '@sts/common';
import { checkWebhookUrlForSave, WebhookUrlError, type WebhookSavePolicy } from '@sts/core';
import type { PreviewOptions, PreviewTweet } from './types';
import type { WebhookUrlCheck } from './webhookUrl';

/** The save-time URL rule; which addresses were refused goes to the log only (the customer gets a generic reason). */
export function loggedWebhookUrlCheck(policy: WebhookSavePolicy, logger: Logger): WebhookUrlCheck {
  return async (raw) => {
    try {
      return await checkWebhookUrlForSave(raw, policy);
    } catch (err) {
      if (err instanceof WebhookUrlError && err.detail)
        logger.info('webhook URL refused', { problem: err.problem, detail: err.detail });
      throw err;
    }
  };
}

/** The preview over a social source (one timeline read per target) cached in Redis. */
export function previewVia(
  source: { getUserTimeline(username: string, page: { limit: number }): Promise<{ items: PreviewTweet[] } | null> },
  redis: {
    get(key: string): Promise<string | null>;
    set(key: string, value: string, mode: 'EX', seconds: number): Promise<unknown>;
  },
): PreviewOptions {
  return {
    timeline: async (username, limit) => (await source.getUserTimeline(username, { limit }))?.items ?? null,
    cache: {
      get: (key) => redis.get(key),
      set: async (key, value, ttlSec) => void (await redis.set(key, value, 'EX', ttlSec)),
    },
  };
}
