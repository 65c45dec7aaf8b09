/**
 * "Of @target's last 50 posts, these would have fired": the monitor form's preview,
 * before anything is saved. The rules are @sts/core rules.ts, the same the poller applies; each
 * post comes back with `matched` and the reason (keyword, type, language, exclusion).
 *
 * Upstream cost: one timeline read per target at most, kept in the cache (Redis) for
 * PREVIEW_CACHE_SECONDS (an unknown target too), so editing the keywords again and again reads
 * nothing more. The preview never goes through the gateway: it costs no API quota, but it spends
 * the fleet's shared X budget, so self-service previews need a verified address, each account's
 * upstream reads are bounded (`limit`), and they run at the lowest X priority. An upstream
 * failure is answered with a generic message; its detail goes to `onUpstreamError` (the log).
 */
import {
  compileRules,
  evaluateRules,
  matchesQuery,
  parseQuery,
  preparePost,
  prepareQueryPost,
  queryCandidates,
  type MonitorFilters,
  type ReferenceType,
  type RuleReasonCode,
} from '@sts/core';
import { loadAccount, requireVerified, type Ctx } from './context';
import { NotConfiguredError, RateLimitedError, UnavailableError, ValidationError } from './errors';
import { checkFilters, checkKeywords, checkWatched } from './monitors';
import type { MonitorInput, PreviewOptions, PreviewTweet } from './types';

export const PREVIEW_POSTS = 50;
export const PREVIEW_CACHE_SECONDS_DEFAULT = 60;

export interface PreviewPost extends PreviewTweet {
  matched: boolean;
  /** a query monitor's post that does not match the query: `no_query_match` */
  code: RuleReasonCode | 'query' | 'no_query_match';
  reason: string;
}

export interface Preview {
  /** the username previewed; null for a query */
  target: string | null;
  /** the query previewed (as saved); null for a username */
  query: string | null;
  filters: MonitorFilters;
  keywords: string[];
  posts: PreviewPost[];
  /** true when the posts came from the cache (no upstream read) */
  cached: boolean;
}

export type PreviewInput = Pick<MonitorInput, 'target' | 'query' | 'keywords' | 'exclude' | 'lang'>;

interface CachedTweet {
  authorUsername?: string;
  id: string;
  text: string;
  createdAt: string;
  lang: string | null;
  referencedTweets: { type: ReferenceType; id: string }[];
}

/** what the cache holds for a target that does not exist */
const UNKNOWN = 'null';

async function readTimeline(
  opts: PreviewOptions,
  accountId: string,
  target: string,
): Promise<{ tweets: PreviewTweet[]; cached: boolean }> {
  const key = `preview:timeline:${target.toLowerCase()}`;
  const ttl = opts.cacheSeconds ?? PREVIEW_CACHE_SECONDS_DEFAULT;
  const unknown = () => new ValidationError('target', `@${target} does not exist`);
  const hit = await opts.cache?.get(key).catch(() => null);
  if (hit === UNKNOWN) throw unknown();
  if (hit) {
    const rows = JSON.parse(hit) as CachedTweet[];
    return { tweets: rows.map((r) => ({ ...r, createdAt: new Date(r.createdAt) })), cached: true };
  }
  const wait = opts.limit ? await opts.limit(accountId) : null;
  if (wait !== null) throw new RateLimitedError(`too many previews for this account; try again in ${wait} s`, wait);
  let tweets: PreviewTweet[] | null;
  try {
    tweets = await opts.timeline(target, PREVIEW_POSTS, 'low');
  } catch (err) {
    opts.onUpstreamError?.(err, target);
    throw new UnavailableError(`could not read @${target}'s posts right now; try again in a minute`);
  }
  if (tweets === null) {
    await opts.cache?.set(key, UNKNOWN, ttl).catch(() => undefined);
    throw unknown();
  }
  const rows: CachedTweet[] = tweets.slice(0, PREVIEW_POSTS).map(cachedOf);
  await opts.cache?.set(key, JSON.stringify(rows), ttl).catch(() => undefined);
  return { tweets: rows.map((r) => ({ ...r, createdAt: new Date(r.createdAt) })), cached: false };
}

export interface PreviewUseCases {
  /** validates like create (ValidationError naming the field), then marks each of the last 50 posts */
  preview(accountId: string, input: PreviewInput): Promise<Preview>;
}

/**
 * A query's candidates: one search of its words (or, for a query of authors only, the first
 * author's timeline), through the same cache and limit as a timeline; the caller marks them.
 */
async function readCandidates(
  opts: PreviewOptions,
  accountId: string,
  query: string,
): Promise<{ tweets: PreviewTweet[]; cached: boolean }> {
  const { search, authors } = queryCandidates(parseQuery(query).ast);
  if (search === null) return readTimeline(opts, accountId, authors[0]!);
  if (!opts.search) throw new NotConfiguredError('the preview has no search configured');
  const key = `preview:search:${search.toLowerCase()}`;
  const ttl = opts.cacheSeconds ?? PREVIEW_CACHE_SECONDS_DEFAULT;
  const hit = await opts.cache?.get(key).catch(() => null);
  if (hit) {
    const rows = JSON.parse(hit) as CachedTweet[];
    return { tweets: rows.map((r) => ({ ...r, createdAt: new Date(r.createdAt) })), cached: true };
  }
  const wait = opts.limit ? await opts.limit(accountId) : null;
  if (wait !== null) throw new RateLimitedError(`too many previews for this account; try again in ${wait} s`, wait);
  let tweets: PreviewTweet[];
  try {
    tweets = await opts.search(search, PREVIEW_POSTS, 'low');
  } catch (err) {
    opts.onUpstreamError?.(err, search);
    throw new UnavailableError('could not search for the query right now; try again in a minute');
  }
  const rows: CachedTweet[] = tweets.slice(0, PREVIEW_POSTS).map(cachedOf);
  await opts.cache?.set(key, JSON.stringify(rows), ttl).catch(() => undefined);
  return { tweets: rows.map((r) => ({ ...r, createdAt: new Date(r.createdAt) })), cached: false };
}

function cachedOf(t: PreviewTweet): CachedTweet {
  return {
    id: t.id,
    text: t.text,
    createdAt: t.createdAt.toISOString(),
    lang: t.lang,
    referencedTweets: t.referencedTweets ?? [],
    ...(t.authorUsername !== undefined ? { authorUsername: t.authorUsername } : {}),
  };
}

export function previewUseCases(ctx: Ctx): PreviewUseCases {
  return {
    async preview(accountId, input) {
      const { targetUsername: target, query } = checkWatched(input);
      const keywords = checkKeywords(input.keywords);
      const given = checkFilters(input);
      const filters: MonitorFilters = { exclude: given.exclude ?? [], lang: given.lang ?? [] };
      const account = await loadAccount(ctx, accountId);
      requireVerified(ctx, account, 'preview monitors');
      const opts = ctx.opts.preview;
      if (!opts) throw new NotConfiguredError('the preview has no social source configured');
      const { tweets, cached } =
        query !== null ? await readCandidates(opts, account.id, query) : await readTimeline(opts, account.id, target);
      const rules = compileRules(keywords, filters);
      const ast = query !== null ? parseQuery(query).ast : null;
      const posts = tweets.map((t): PreviewPost => {
        const referencedTweets = t.referencedTweets ?? [];
        const verdict = evaluateRules(rules, preparePost({ text: t.text, lang: t.lang, referencedTweets }));
        if (ast === null) return { ...t, referencedTweets, ...verdict };
        const post = { text: t.text, lang: t.lang, referencedTweets, authorUsername: t.authorUsername ?? target ?? '' };
        if (!matchesQuery(ast, prepareQueryPost(post))) {
          return { ...t, referencedTweets, matched: false, code: 'no_query_match', reason: 'does not match the query' };
        }
        return verdict.matched
          ? { ...t, referencedTweets, matched: true, code: 'query', reason: 'matches the query' }
          : { ...t, referencedTweets, ...verdict };
      });
      return { target, query, filters, keywords, posts, cached };
    },
  };
}
