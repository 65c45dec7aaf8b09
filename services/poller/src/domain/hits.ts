/**
 * Matching tweets against the monitors of one target, and building the monitor.hit events.
 * No I/O: the poller hands in what it read and writes what this returns.
 */
import {
  compileRules,
  matchesQuery,
  matchesRules,
  parsePostTypes,
  parseQuery,
  preparePost,
  prepareQueryPost,
  type CompiledRules,
  type PreparedQueryPost,
  type QueryNode,
} from '@sts/core';
import { monitorHitPayload, monitorRef, type MonitorHitEvent } from '@sts/messaging';
import type { SocialTweet } from '@sts/social';
import type { WatchingMonitor } from '@sts/db';

export interface CompiledMonitor extends WatchingMonitor {
  rules: CompiledRules;
  /** a query monitor's parsed query; false: its stored query no longer parses (it matches nothing) */
  ast: QueryNode | null | false;
}

export interface PendingHit {
  monitor: CompiledMonitor;
  tweet: SocialTweet;
}

/** Monitors with the same keywords, post types and languages share one compiled rules object. */
export function compileMonitors(monitors: readonly WatchingMonitor[]): CompiledMonitor[] {
  const compiled = new Map<string, CompiledRules>();
  return monitors.map((m) => {
    const key = JSON.stringify([m.keywords, m.excludeTypes, m.langs]);
    let rules = compiled.get(key);
    if (!rules) {
      rules = compileRules(m.keywords, { exclude: parsePostTypes(m.excludeTypes), lang: m.langs });
      compiled.set(key, rules);
    }
    return { ...m, rules, ast: m.query === null ? null : parsedOrFalse(m.query) };
  });
}

function parsedOrFalse(query: string): QueryNode | false {
  try {
    return parseQuery(query).ast;
  } catch {
    return false;
  }
}

/**
 * Every (monitor, tweet) pair that is a hit: the tweet is not older than the monitor (a monitor
 * starts from the moment it is created) and passes its rules (@sts/core rules.ts: post types,
 * languages, exclusions, keywords) and, for a query monitor, its query (@sts/core query.ts).
 * Each tweet is tokenised once for all monitors, and matched once per distinct rules object
 * (compileMonitors shares them).
 */
export function findHits(tweets: readonly SocialTweet[], monitors: readonly CompiledMonitor[]): PendingHit[] {
  const out: PendingHit[] = [];
  for (const tweet of tweets) {
    const post = preparePost({ text: tweet.text, lang: tweet.lang, referencedTweets: tweet.referencedTweets ?? [] });
    const at = tweet.createdAt.getTime();
    let queryPost: PreparedQueryPost | undefined;
    const matched = new Map<CompiledRules, boolean>();
    for (const monitor of monitors) {
      if (at < monitor.createdAt.getTime()) continue;
      let match = matched.get(monitor.rules);
      if (match === undefined) {
        match = matchesRules(monitor.rules, post);
        matched.set(monitor.rules, match);
      }
      if (!match || monitor.ast === false) continue;
      if (monitor.ast !== null) {
        queryPost ??= prepareQueryPost({
          text: tweet.text,
          lang: tweet.lang,
          referencedTweets: tweet.referencedTweets ?? [],
          authorUsername: tweet.author.username,
        });
        if (!matchesQuery(monitor.ast, queryPost)) continue;
      }
      out.push({ monitor, tweet });
    }
  }
  return out;
}

/** The monitor.hit payload of docs/webhooks.md, built by @sts/messaging's payload builder. */
export function hitEvent(hit: PendingHit, detectedAt: Date): MonitorHitEvent {
  const { tweet } = hit;
  const ref = {
    id: tweet.id,
    text: tweet.text,
    authorUsername: tweet.author.username,
    createdAt: tweet.createdAt.toISOString(),
  };
  return monitorHitPayload(monitorRef(hit.monitor), ref, detectedAt.toISOString());
}
