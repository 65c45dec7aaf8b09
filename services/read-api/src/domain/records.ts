/**
 * The API's record shapes (DESIGN.md "API decisions"): snake_case, timestamps as ISO 8601 UTC
 * with milliseconds. Pure mapping from the source's records and the monitor/hit rows.
 */
import type { SocialTweet, SocialUser } from '@sts/social';

export interface UserRecord {
  id: string;
  username: string;
  name: string;
  followers_count: number;
  verified: boolean;
  description: string | null;
  following_count: number;
  tweet_count: number;
  profile_image_url: string | null;
  created_at: string | null;
}

export interface TweetRecord {
  id: string;
  text: string;
  author_id: string;
  created_at: string;
  lang: string | null;
  public_metrics: { like_count: number; retweet_count: number; reply_count: number; quote_count: number };
  author: UserRecord;
}

export type MonitorStatus = 'active' | 'paused' | 'error';

export interface MonitorRecord {
  id: string;
  target_username: string;
  keywords: string[] | null;
  is_active: boolean;
  status: MonitorStatus;
  check_interval_sec: number;
  last_check_at: string | null;
  last_error: string | null;
  has_webhook: boolean;
  created_at: string;
  updated_at: string;
  recent_hits?: HitRecord[];
}

export interface HitRecord {
  id: string;
  tweet_id: string;
  text: string;
  author_username: string;
  tweet_created_at: string;
  detected_at: string;
  url: string;
}

/** What the adapter reads for a monitor. */
export interface MonitorRow {
  id: string;
  targetUsername: string;
  keywords: string[];
  isActive: boolean;
  checkIntervalSec: number;
  lastCheckAt: Date | null;
  lastError: string | null;
  hasWebhook: boolean;
  createdAt: Date;
  updatedAt: Date;
}

/** What the adapter reads for a hit. */
export interface HitRow {
  id: string;
  monitorId: string;
  tweetId: string;
  tweetText: string;
  tweetAuthorUsername: string;
  tweetCreatedAt: Date;
  detectedAt: Date;
}

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
    author: userRecord(t.author),
  };
}

export function monitorStatus(m: Pick<MonitorRow, 'isActive' | 'lastError'>): MonitorStatus {
  if (!m.isActive) return 'paused';
  if (m.lastError) return 'error';
  return 'active';
}

export function monitorRecord(m: MonitorRow, recentHits?: HitRow[]): MonitorRecord {
  const record: MonitorRecord = {
    id: m.id,
    target_username: m.targetUsername,
    keywords: m.keywords.length ? [...m.keywords] : null,
    is_active: m.isActive,
    status: monitorStatus(m),
    check_interval_sec: m.checkIntervalSec,
    last_check_at: iso(m.lastCheckAt),
    last_error: m.lastError,
    has_webhook: m.hasWebhook,
    created_at: m.createdAt.toISOString(),
    updated_at: m.updatedAt.toISOString(),
  };
  if (recentHits) record.recent_hits = recentHits.map(hitRecord);
  return record;
}

/** The post's public link. */
export function tweetUrl(username: string, tweetId: string): string {
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

export interface ListBody<T> {
  data: T[];
  meta: { count: number; next_cursor: string | null };
}

export function listBody<T>(data: T[], nextCursor: string | null): ListBody<T> {
  return { data, meta: { count: data.length, next_cursor: nextCursor } };
}
