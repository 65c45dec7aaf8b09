/**
 * What the poller gives the X stream. The stream decides what is read from X and when (rules,
 * the connection, backfills, owed windows); the poller decides what a post is worth to its
 * monitors and writes it (hits, their monitor.hit events, the targets' cursors: one recording
 * path for every intake), and owns its query monitors and the watched accounts' looks.
 */
import type { QueryWatcher } from '@sts/db';
import type { SocialTweet, XAccounts } from '@sts/social';

/** a new hit's times: detection latency (post created → hit recorded) */
export interface RecordedHit {
  tweetCreatedAt: Date;
  detectedAt: Date;
}

export interface RecordedBatch {
  /** new hits */
  hits: number;
  newHits: RecordedHit[];
  /** the targets whose recording failed (nothing of theirs may be counted as recorded), with why */
  failed: Map<string, string>;
}

/** runs a write when there is room: the stream's bound on its concurrent database work */
export interface WriteLane {
  run<T>(task: () => Promise<T>): Promise<T>;
}

/** a watched account the lookup pre-check answered for: its target and its account id when known */
export interface LookedTarget {
  targetKey: string;
  userId: string | null;
}

export interface StreamPort {
  /** records posts of any authors for their targets' active monitors; a target's failure is reported, not thrown */
  recordPosts(posts: readonly SocialTweet[], lane: WriteLane): Promise<RecordedBatch>;
  /** records posts for one query monitor (its own cursor, `?query:<id>`); the new hits */
  recordQueryPosts(monitor: QueryWatcher, posts: readonly SocialTweet[], polledAt: Date): Promise<RecordedHit[]>;
  /** every active query monitor with its account's plan */
  queryWatchers(): Promise<QueryWatcher[]>;
  /** the watched accounts' looks: when each target (by key) was last looked at, and its account id */
  lastLooks(targetKeys: readonly string[]): Promise<Map<string, string | null>>;
  /** the lookup's answers recorded as the targets' account looks */
  recordLooks(targets: readonly LookedTarget[], found: XAccounts, at: Date): Promise<void>;
}
