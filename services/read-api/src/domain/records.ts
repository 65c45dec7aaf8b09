/**
 * The serialisers of the API's records (DESIGN.md "API decisions"): snake_case, timestamps as
 * ISO 8601 UTC with milliseconds. Pure mapping from the source's records and the monitor/hit rows
 * to the shapes declared once in @sts/api-contract (zod; the gateway's OpenAPI document is
 * generated from the same schemas).
 */
import { MONITOR_EVENTS, MonitorTargetStatus } from '@sts/api-contract';
import type { HitRecord, ListBody, MonitorRecord, MonitorStatus, TweetRecord, UserRecord } from '@sts/api-contract';
import type { HitRow, MonitorSettings } from '@sts/db';
import { parsePostTypes, splitKeywords } from '@sts/core';
import type { SocialTweet, SocialUser } from '@sts/social';

export type { HitRecord, ListBody, MonitorRecord, TweetRecord, UserRecord };

/** What the adapter reads for a monitor: @sts/db's monitor settings, and whether it has a webhook. */
export interface MonitorRow extends Omit<MonitorSettings, 'events'> {
  /** null: the default, posts only */
  events: string[] | null;
  hasWebhook: boolean;
  /** events held while the webhook is disabled (0 without one) */
  heldEvents: number;
}

/** What the adapter reads for a hit: the one hit row of @sts/db. */
export type { HitRow };

function iso(d: Date | null): string | null {
  return d ? d.toISOString() : null;
}

export function userRecord(u: SocialUser): UserRecord {
  return {
    id: u.id,
    username: u.username,
    name: u.name,
    followers_count: u.followersCount,
    verified: u.verified,
    description: u.description,
    following_count: u.followingCount,
    tweet_count: u.tweetCount,
    profile_image_url: u.profileImageUrl,
    created_at: iso(u.createdAt),
  };
}

export function tweetRecord(t: SocialTweet): TweetRecord {
  return {
    id: t.id,
    text: t.text,
    author_id: t.authorId,
    created_at: t.createdAt.toISOString(),
    lang: t.lang,
    public_metrics: {
      like_count: t.metrics.likeCount,
      retweet_count: t.metrics.retweetCount,
      reply_count: t.metrics.replyCount,
      quote_count: t.metrics.quoteCount,
    },
    referenced_tweets: (t.referencedTweets ?? []).map((r) => ({ type: r.type, id: r.id })),
    author: userRecord(t.author),
  };
}

function monitorStatus(m: Pick<MonitorRow, 'isActive' | 'lastError'>): MonitorStatus {
  if (!m.isActive) return 'paused';
  if (m.lastError) return 'error';
  return 'active';
}

export function monitorRecord(m: MonitorRow, recentHits?: HitRow[]): MonitorRecord {
  const record: MonitorRecord = {
    id: m.id,
    target_username: m.targetUsername,
    query: m.query,
    keywords: m.keywords.length ? [...m.keywords] : null,
    filters: {
      exclude: parsePostTypes(m.excludeTypes),
      lang: [...m.langs],
      excluded_keywords: splitKeywords(m.keywords).exclude,
    },
    is_active: m.isActive,
    status: monitorStatus(m),
    events: MONITOR_EVENTS.filter((k) => (m.events ?? ['posts']).includes(k)),
    target_status: MonitorTargetStatus.parse(m.targetStatus),
    target_status_at: iso(m.targetStatusAt),
    check_interval_sec: m.checkIntervalSec,
    last_check_at: iso(m.lastCheckAt),
    last_error: m.lastError,
    has_webhook: m.hasWebhook,
    held_events: m.heldEvents,
    created_at: m.createdAt.toISOString(),
    updated_at: m.updatedAt.toISOString(),
  };
  if (recentHits) record.recent_hits = recentHits.map(hitRecord);
  return record;
}

/** The post's public link. */
function tweetUrl(username: string, tweetId: string): string {
  return `https://x.com/${encodeURIComponent(username)}/status/${encodeURIComponent(tweetId)}`;
}

export function hitRecord(h: HitRow): HitRecord {
  return {
    id: h.id,
    tweet_id: h.tweetId,
    text: h.tweetText,
    author_username: h.tweetAuthorUsername,
    tweet_created_at: h.tweetCreatedAt.toISOString(),
    detected_at: h.detectedAt.toISOString(),
    url: tweetUrl(h.tweetAuthorUsername, h.tweetId),
  };
}

export function listBody<T>(data: T[], nextCursor: string | null): ListBody<T> {
  return { data, meta: { count: data.length, next_cursor: nextCursor } };
}
