/**
 * Backfill by batched search: `from:a OR from:b ...` groups on GET /2/tweets/search/recent with
 * `since_id` and paging, every call through the rate-limit gate (family `search`, high priority).
 */
import { mapXTweet, X_TWEET_FIELDS, X_USER_FIELDS, type SocialTweet } from '@sts/social';
import { packUsernames, ruleValue } from '../domain/streamRules';
import { XHttpError, type XGate } from './xStreamApi';

export interface GroupSearch {
  /** every tweet of the usernames after `sinceId` (all pages), oldest first */
  (usernames: readonly string[], sinceId: string): Promise<SocialTweet[]>;
}

interface SearchBody {
  data?: Parameters<typeof mapXTweet>[0][];
  includes?: { users?: Parameters<typeof mapXTweet>[1] };
  meta?: { next_token?: string };
  title?: string;
  detail?: string;
}

export function createGroupSearch(options: {
  baseUrl: string;
  bearerToken: string;
  timeoutMs?: number;
  gate: XGate;
  /** most pages per group (100 tweets each); default 10 */
  maxPages?: number;
}): GroupSearch {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const maxPages = options.maxPages ?? 10;
  return async (usernames, sinceId) => {
    const out: SocialTweet[] = [];
    let token: string | undefined;
    for (let page = 0; page < maxPages; page++) {
      const permit = await options.gate.tryAcquire('search', 'high');
      if (!permit.ok) throw new XHttpError(429, 'X search budget spent', permit.retryAfterMs, true);
      const params = new URLSearchParams({
        query: ruleValue(usernames),
        max_results: '100',
        expansions: 'author_id',
        'tweet.fields': X_TWEET_FIELDS,
        'user.fields': X_USER_FIELDS,
      });
      if (sinceId !== '0') params.set('since_id', sinceId);
      if (token) params.set('next_token', token);
      const res = await fetch(new URL(`/2/tweets/search/recent?${params.toString()}`, options.baseUrl), {
        headers: { authorization: `Bearer ${options.bearerToken}` },
        signal: AbortSignal.timeout(timeoutMs),
      });
      await options.gate.observe('search', { status: res.status, headers: res.headers });
      const body = (await res.json().catch(() => ({}))) as SearchBody;
      if (res.status !== 200)
        throw new XHttpError(res.status, `X search answered ${res.status}: ${body.title ?? ''}`, null);
      for (const t of body.data ?? []) out.push(mapXTweet(t, body.includes?.users ?? []));
      token = body.meta?.next_token;
      if (!token) break;
    }
    return out.sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1));
  };
}

/** Runs the search over `usernames` packed into queries of at most `maxLength` characters. */
export async function searchAll(
  search: GroupSearch,
  usernames: readonly string[],
  sinceId: string,
  maxLength: number,
): Promise<SocialTweet[]> {
  const out: SocialTweet[] = [];
  for (const group of packUsernames([...usernames].sort(), maxLength)) out.push(...(await search(group, sinceId)));
  return out;
}
