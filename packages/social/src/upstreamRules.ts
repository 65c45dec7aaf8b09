/**
 * Monitor rule parts X can apply itself, for the `search` and `stream` modes (issue 22): a
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

/** A key equal for targets whose queries may be packed together (same upstream parts). */
export function upstreamRuleKey(parts: readonly string[]): string {
  return parts.join(' ');
}

/** `(from:a OR from:b)` plus the parts: one query string for X's search or a stream rule. */
export function withRuleParts(fromQuery: string, parts: readonly string[]): string {
  if (parts.length === 0) return fromQuery;
  return `(${fromQuery}) ${parts.join(' ')}`;
}
