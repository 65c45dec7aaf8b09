/**
 * Pieces of a front end's use-case wiring that the dashboard and the management API (read-api)
 * build the same way: the save-time webhook URL rule with its refusals logged, and the monitor
 * preview's timeline read, Redis cache and per-account limits.
 */
import type { Logger, RedisClient } from '@sts/common';
import { checkWebhookUrlForSave, errorMessage, WebhookUrlError, type WebhookSavePolicy } from '@sts/core';
import { previewLimiter } from './limits';
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

/**
 * The monitor preview over a social source: one timeline read per target at the lowest X
 * priority, cached in Redis, within the per-account limits (cache misses only); an upstream
 * failure is logged here and shown to the customer as a generic message.
 */
export function previewVia(
  source: {
    getUserTimeline(
      username: string,
      page: { limit: number; priority: 'low' },
    ): Promise<{ items: PreviewTweet[] } | null>;
    search(
      query: string,
      page: { limit: number; priority: 'low' },
    ): Promise<{ items: (PreviewTweet & { author: { username: string } })[] }>;
  },
  redis: RedisClient,
  opts: { logger: Logger; perMinute: number; perDay: number },
): PreviewOptions {
  return {
    timeline: async (username, limit, priority) =>
      (await source.getUserTimeline(username, { limit, priority }))?.items ?? null,
    search: async (query, limit, priority) =>
      (await source.search(query, { limit, priority })).items.map((t) => ({ ...t, authorUsername: t.author.username })),
    cache: {
      get: (key) => redis.get(key),
      set: async (key, value, ttlSec) => void (await redis.set(key, value, 'EX', ttlSec)),
    },
    limit: previewLimiter(redis, opts.perMinute, opts.perDay),
    onUpstreamError: (err, target) =>
      opts.logger.warn('monitor preview: upstream read failed', { target, err: errorMessage(err) }),
  };
}
