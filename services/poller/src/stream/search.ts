/**
 * Backfill by batched search, through the X provider's own group search (packages/social
 * `XSource.searchGroup`: `from:a OR from:b ...` groups packed by `packFromQueries` within
 * X_QUERY_MAX_LENGTH, since_id and paging on GET /2/tweets/search/recent, every call through the
 * request helper and the fleet's rate-limit governor), at high priority.
 */
import { snowflakeBefore } from '@sts/core';
import { packFromQueries, type SocialTweet, type XSource } from '@sts/social';

export interface GroupSearch {
  /** every tweet of the usernames created after `since`, oldest first */
  (usernames: readonly string[], since: Date, queryMaxLength: number): Promise<SocialTweet[]>;
}

export function createGroupSearch(source: Pick<XSource, 'searchGroup'>): GroupSearch {
  return async (usernames, since, queryMaxLength) => {
    const out: SocialTweet[] = [];
    for (const group of packFromQueries([...usernames].sort(), queryMaxLength)) {
      const r = await source.searchGroup(group, {
        sinceId: snowflakeBefore(since),
        notBefore: since,
        // the caller's `since` already reaches behind the gap
        firstPage: false,
        priority: 'high',
      });
      out.push(...r.tweets);
    }
    return out;
  };
}
