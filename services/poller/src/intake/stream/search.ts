/**
 * Backfill by batched search, through the X provider's own group search (packages/social
 * `XSource.searchGroup`: `from:a OR from:b ...` groups packed by `packFromQueries` within
 * X_QUERY_MAX_LENGTH, since_id and paging on GET /2/tweets/search/recent, every call through the
 * request helper and the fleet's rate-limit governor), at high priority. No user lookup: `from:`
 * queries need no user id, and the posts' authors (`includes.users`) refresh the fleet's user
 * cache as they come; the stream mode checks its accounts in the background (stream/userCheck.ts).
 * Groups run `concurrency` at a time, so a gap's backfill over many rules ends in a few round trips.
 */
import { snowflakeBefore } from '@sts/core';
import { packFromQueries, type SocialTweet, type XSource } from '@sts/social';

export interface GroupSearch {
  /** every tweet of the usernames created after `since`, oldest first */
  (usernames: readonly string[], since: Date, queryMaxLength: number): Promise<SocialTweet[]>;
}

export function createGroupSearch(source: Pick<XSource, 'searchGroup'>, concurrency = 8): GroupSearch {
  return async (usernames, since, queryMaxLength) => {
    const groups = packFromQueries([...usernames].sort(), queryMaxLength);
    const out: SocialTweet[] = [];
    let next = 0;
    const worker = async () => {
      while (next < groups.length) {
        const group = groups[next++]!;
        const r = await source.searchGroup(group, {
          sinceId: snowflakeBefore(since),
          notBefore: since,
          // the caller's `since` already reaches behind the gap
          firstPage: false,
          priority: 'high',
          resolveUsers: false,
        });
        out.push(...r.tweets);
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, groups.length) }, worker));
    return out.sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : BigInt(a.id) > BigInt(b.id) ? 1 : 0));
  };
}
