/**
 * Monitor rule parts X can apply itself, for the `search` and `stream` modes: a
 * target's query may carry `-is:retweet`, `-is:reply`, `-is:quote` and `lang:` only where that
 * never loses a post another monitor of the same target needs. So:
 *
 * - a post type is left out upstream only when EVERY active monitor of the target leaves it out;
 * - a language list goes upstream only when every monitor has one, as the union of the lists
 *   (`(lang:en OR lang:de)`); a post without a language matches no language rule, so the union
 *   loses nothing; one monitor without a list keeps every language.
 *
 * Exclusion keywords stay local (X's tokeniser is not ours: `-word` upstream could drop a post our
 * whole-word rules keep). The poller applies every rule again to what comes back, so the upstream
 * parts only save reads. Targets packed into one `from:a OR from:b` query must share the same
 * parts (group by `upstreamRuleKey`). Pure: no I/O.
 */
import { MIN_QUERY_LENGTH } from './x/pack';

/** What this needs of each monitor of one target (the monitors' stored columns). */
export interface MonitorRuleColumns {
  /** post types left out: replies, reposts, quotes */
  excludeTypes: readonly string[];
  /** languages that fire; empty = any */
  langs: readonly string[];
}

const TYPE_OPERATOR: Record<string, string> = {
  reposts: '-is:retweet',
  replies: '-is:reply',
  quotes: '-is:quote',
};
const TYPE_ORDER = ['reposts', 'replies', 'quotes'];

/** X lang codes are letters and hyphens; anything else never reaches a query. */
const LANG = /^[a-z]{2,3}(-[a-z0-9]{2,8})?$/;

/** The operators to append to the target's query, in a stable order; [] when none is safe. */
export function upstreamRuleParts(monitorsOfTarget: readonly MonitorRuleColumns[]): string[] {
  if (monitorsOfTarget.length === 0) return [];
  const parts: string[] = [];
  for (const type of TYPE_ORDER) {
    if (monitorsOfTarget.every((m) => m.excludeTypes.includes(type))) parts.push(TYPE_OPERATOR[type]!);
  }
  if (monitorsOfTarget.every((m) => m.langs.length > 0)) {
    const langs = [...new Set(monitorsOfTarget.flatMap((m) => m.langs.map((l) => l.toLowerCase())))]
      .filter((l) => LANG.test(l))
      .sort();
    if (langs.length === 1) parts.push(`lang:${langs[0]}`);
    else if (langs.length > 1) parts.push(`(${langs.map((l) => `lang:${l}`).join(' OR ')})`);
  }
  return parts;
}

/**
 * A key equal for targets whose queries may be packed together (same upstream parts). It is the
 * text `withRuleParts` appends after the `from:` group, so `splitRuleParts` reads it back.
 */
export function upstreamRuleKey(parts: readonly string[]): string {
  return parts.join(' ');
}

/** `(from:a OR from:b)` plus the parts: one query string for X's search or a stream rule. */
export function withRuleParts(fromQuery: string, parts: readonly string[]): string {
  if (parts.length === 0) return fromQuery;
  return `(${fromQuery}) ${parts.join(' ')}`;
}

/** The characters `withRuleParts` adds to a `from:` query for these parts. */
export function rulePartsLength(parts: readonly string[]): number {
  return withRuleParts('', parts).length;
}

/**
 * The parts that still leave room for one `from:` clause of the longest username within
 * `maxLength`: the last parts (the language list, the longest) are dropped first. Fewer parts never
 * lose a post (each part only narrows), they only save fewer reads.
 */
export function fitRuleParts(parts: readonly string[], maxLength: number): string[] {
  let fitted = [...parts];
  while (fitted.length > 0 && maxLength - rulePartsLength(fitted) < MIN_QUERY_LENGTH) fitted = fitted.slice(0, -1);
  return fitted;
}

/**
 * The inverse of `withRuleParts`: the `from:` query inside and the parts' key after it (`''` for a
 * query without parts). Says nothing about whether the `from:` query is well formed.
 */
export function splitRuleParts(query: string): { fromQuery: string; key: string } {
  const close = query.indexOf(') ');
  if (!query.startsWith('(') || close < 0) return { fromQuery: query, key: '' };
  return { fromQuery: query.slice(1, close), key: query.slice(close + 2) };
}
