/**
 * Payload preview: the exact body each format (native, Discord, Slack) would receive
 * for a sample hit of a monitor. Built by @sts/messaging's webhook body builders, the functions
 * the webhook-dispatcher sends with, from the same `monitor.hit` payload the dispatcher would
 * build: the monitor's latest hit when it has one, else a sample post by its target (containing
 * its first include keyword, so it is one that would match).
 */
import { parseQuery, queryCandidates } from '@sts/core';
import { buildBody, monitorHitPayload, monitorRef, type MonitorHitEvent, type WebhookKind } from '@sts/messaging';
import type { Ctx } from './context';
import { loadMonitor } from './monitors';

export interface PayloadPreview {
  /** whether the sample is the monitor's latest real hit or a made-up post */
  sample: 'latest-hit' | 'example';
  /** the monitor.hit payload the bodies are built from */
  payload: MonitorHitEvent;
  /** the body as sent, per format (JSON text, exactly the bytes the dispatcher signs and sends) */
  bodies: Record<WebhookKind, string>;
  /** the format this monitor's webhook uses (null without a webhook) */
  kind: WebhookKind | null;
}

export interface PayloadPreviewUseCases {
  payloadPreview(accountId: string, monitorId: string): Promise<PayloadPreview>;
}

/** the sample post's id (a valid X id shape, clearly not a real post's) */
export const EXAMPLE_TWEET_ID = '1000000000000000001';

function examplePayload(
  m: { id: string; targetUsername: string | null; query: string | null; keywords: string[] },
  now: Date,
): MonitorHitEvent {
  // a query monitor's example: a post of an example author carrying the query's first word
  const author = m.targetUsername ?? 'example';
  const word =
    m.targetUsername === null && m.query !== null
      ? queryCandidates(parseQuery(m.query).ast).search?.split(' OR ')[0]?.replace(/^"|"$/g, '')
      : m.keywords.find((k) => !k.startsWith('-'))?.replace(/^"|"$/g, '');
  const text = word ? `An example post by @${author} mentioning ${word}` : `An example post by @${author}`;
  const at = new Date(Math.floor(now.getTime() / 1000) * 1000);
  const tweet = { id: EXAMPLE_TWEET_ID, text, authorUsername: author, createdAt: at.toISOString() };
  return monitorHitPayload(monitorRef(m), tweet, at.toISOString());
}

export function payloadPreviewUseCases(ctx: Ctx): PayloadPreviewUseCases {
  return {
    async payloadPreview(accountId, monitorId) {
      const m = await loadMonitor(ctx, accountId, monitorId);
      const hit = await ctx.repos.logs.latestHit(m.id);
      const payload = hit
        ? monitorHitPayload(
            monitorRef(m),
            {
              id: hit.tweetId,
              text: hit.tweetText,
              authorUsername: hit.tweetAuthorUsername,
              createdAt: hit.tweetCreatedAt.toISOString(),
            },
            hit.detectedAt.toISOString(),
            hit.sequence == null ? null : Number(hit.sequence),
          )
        : examplePayload(m, ctx.now());
      const bodies = {
        native: buildBody('native', payload),
        discord: buildBody('discord', payload),
        slack: buildBody('slack', payload),
      };
      return { sample: hit ? 'latest-hit' : 'example', payload, bodies, kind: m.webhook?.kind ?? null };
    },
  };
}
