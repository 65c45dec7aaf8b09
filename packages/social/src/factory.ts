/**
 * Picks the social data source from configuration: `local` (PostgreSQL, the default) or `x` (the
 * X API v2). `socialEnv` holds the zod fields a service spreads into its environment schema, and
 * `requireXToken` the check that X_BEARER_TOKEN is set when SOCIAL_SOURCE=x.
 */
import { z } from 'zod';
import type { Db } from '@sts/db';
import { createLocalSource } from './local';
import type { SocialSource } from './types';
import { createXSource } from './x';

export interface SocialSourceConfig {
  SOCIAL_SOURCE?: 'local' | 'x' | undefined;
  X_API_BASE_URL?: string | undefined;
  X_BEARER_TOKEN?: string | undefined;
  /** per X API request; default 10 000 */
  X_TIMEOUT_MS?: number | undefined;
  /** X: the window a poll re-reads behind its position (the poller's setting); default 30 */
  POLL_OVERLAP_SECONDS?: number | undefined;
}

export interface SocialSourceDeps {
  db: Db;
}

export const socialEnv = {
  SOCIAL_SOURCE: z.enum(['local', 'x']).default('local'),
  X_API_BASE_URL: z
    .string()
    .refine(
      (v) => {
        try {
          return ['https:', 'http:'].includes(new URL(v).protocol);
        } catch {
          return false;
        }
      },
      { message: 'must be an http(s) URL' },
    )
    .default('https://api.x.com'),
  X_BEARER_TOKEN: z.string().optional(),
  X_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(10_000),
};

/** For `schema.superRefine(requireXToken)`: X_BEARER_TOKEN must be set when SOCIAL_SOURCE=x. */
export function requireXToken(
  env: { SOCIAL_SOURCE?: string | undefined; X_BEARER_TOKEN?: string | undefined },
  ctx: z.RefinementCtx,
): void {
  if (env.SOCIAL_SOURCE === 'x' && !env.X_BEARER_TOKEN) {
    ctx.addIssue({ code: 'custom', path: ['X_BEARER_TOKEN'], message: 'is required when SOCIAL_SOURCE=x' });
  }
}

export function createSocialSource(config: SocialSourceConfig, deps: SocialSourceDeps): SocialSource {
  const kind = config.SOCIAL_SOURCE ?? 'local';
  if (kind === 'local') return createLocalSource({ db: deps.db });
  if (kind === 'x') {
    if (!config.X_BEARER_TOKEN) throw new Error('X_BEARER_TOKEN is required when SOCIAL_SOURCE=x');
    return createXSource({
      baseUrl: config.X_API_BASE_URL ?? 'https://api.x.com',
      bearerToken: config.X_BEARER_TOKEN,
      timeoutMs: config.X_TIMEOUT_MS ?? 10_000,
      overlapMs: (config.POLL_OVERLAP_SECONDS ?? 30) * 1000,
    });
  }
  throw new Error(`unknown SOCIAL_SOURCE "${String(kind)}" (expected local or x)`);
}
