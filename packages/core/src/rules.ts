/**
 * Monitor rules: which posts of the target fire a monitor. A post fires when it passes, in this
 * order (the first that fails is the reason given):
 *
 * 1. post type: a monitor may exclude replies, reposts (retweets) and quotes (default: none
 *    excluded). A post is of each type it references (X's `referenced_tweets`: a reply that
 *    quotes is both a reply and a quote).
 * 2. language: with a `lang` list, the post's language must be in it; a post with no language
 *    (none given, or X's `und`) never matches a language rule.
 * 3. exclusions: no keyword written `-word` / `-"a phrase"` appears in the text.
 * 4. keywords: any other keyword appears (none given: every post).
 *
 * Keyword comparison is ./keywords.ts's (whole words, case folding, Unicode). No I/O.
 */
import { firstMatch, keywordPhrases, splitKeywords, words } from './keywords';

export const POST_TYPES = ['replies', 'reposts', 'quotes'] as const;
export type PostType = (typeof POST_TYPES)[number];

export const LANG_LIMITS = { maxLangs: 20 } as const;
/** A BCP 47 language tag as X writes it (`en`, `pt`, `zh`, `zh-tw`, `fil`), compared lower-cased. */
const LANG_RE = /^[a-z]{2,3}(-[a-z0-9]{2,8})?$/;

export class RuleError extends Error {
  override name = 'RuleError';
  constructor(
    readonly field: 'exclude' | 'lang',
    message: string,
  ) {
    super(message);
  }
}

/** The stored rule besides the keywords. */
export interface MonitorFilters {
  /** post types that never fire; [] = all included */
  exclude: PostType[];
  /** languages that fire; [] = any language */
  lang: string[];
}

/** What a post is, for the rules: X's `referenced_tweets` types. */
export type ReferenceType = 'replied_to' | 'quoted' | 'retweeted';

export interface RulePost {
  text: string;
  lang: string | null;
  referencedTweets: readonly { type: ReferenceType; id: string }[];
}

const TYPE_OF_REFERENCE: Record<ReferenceType, PostType> = {
  replied_to: 'replies',
  retweeted: 'reposts',
  quoted: 'quotes',
};
const TYPE_LABEL: Record<PostType, string> = { replies: 'a reply', reposts: 'a repost', quotes: 'a quote' };

function listOf(input: string | readonly string[] | null | undefined): string[] {
  if (input === null || input === undefined) return [];
  const raw = typeof input === 'string' ? input.split(',') : input;
  return raw.map((s) => (typeof s === 'string' ? s.trim().toLowerCase() : '')).filter((s) => s !== '');
}

/** `replies,reposts,quotes` (a string or a list; `retweets` is read as `reposts`) → canonical order, no duplicates. */
export function parsePostTypes(input: string | readonly string[] | null | undefined): PostType[] {
  const given = new Set<PostType>();
  for (const raw of listOf(input)) {
    const t = raw === 'retweets' ? 'reposts' : raw;
    if (!(POST_TYPES as readonly string[]).includes(t)) {
      throw new RuleError('exclude', `"${raw}" is not a post type; use ${POST_TYPES.join(', ')}`);
    }
    given.add(t as PostType);
  }
  return POST_TYPES.filter((t) => given.has(t));
}

/** `en,de` → lower-cased language tags, no duplicates; [] = any language. */
export function parseLangs(input: string | readonly string[] | null | undefined): string[] {
  const out: string[] = [];
  for (const raw of listOf(input)) {
    if (!LANG_RE.test(raw)) {
      throw new RuleError('lang', `"${raw.slice(0, 20)}" is not a language code (like en, de, pt, zh-tw)`);
    }
    if (!out.includes(raw)) out.push(raw);
  }
  if (out.length > LANG_LIMITS.maxLangs) throw new RuleError('lang', `at most ${LANG_LIMITS.maxLangs} languages`);
  return out;
}

/** The post types of a post (from its references). */
export function postTypes(post: Pick<RulePost, 'referencedTweets'>): PostType[] {
  return post.referencedTweets.map((r) => TYPE_OF_REFERENCE[r.type]);
}

/** A post's language for the rules: null when it has none (X writes `und` for undetermined). */
export function postLang(lang: string | null): string | null {
  if (!lang) return null;
  const l = lang.toLowerCase();
  return l === 'und' ? null : l;
}

export interface CompiledRules {
  /** token lists of the included keywords, and the keywords as written (same order) */
  include: string[][];
  includeKeywords: string[];
  exclude: string[][];
  excludeKeywords: string[];
  excludeTypes: ReadonlySet<PostType>;
  langs: ReadonlySet<string> | null;
}

/** Once per monitor. `keywords` as stored (parseKeywords' output, exclusions written `-word`). */
export function compileRules(keywords: readonly string[], filters: MonitorFilters): CompiledRules {
  const split = splitKeywords(keywords);
  const includeKeywords = split.include.filter((k) => words(k).length > 0);
  const excludeKeywords = split.exclude.filter((k) => words(k).length > 0);
  return {
    include: keywordPhrases(includeKeywords),
    includeKeywords,
    exclude: keywordPhrases(excludeKeywords),
    excludeKeywords,
    excludeTypes: new Set(filters.exclude),
    langs: filters.lang.length > 0 ? new Set(filters.lang.map((l) => l.toLowerCase())) : null,
  };
}

export type RuleReasonCode = 'keyword' | 'no_keywords' | 'no_keyword_match' | 'excluded_keyword' | 'type' | 'language';

export interface RuleVerdict {
  matched: boolean;
  code: RuleReasonCode;
  /** for people: `matched keyword "launch"`, `excluded: a reply`, ... */
  reason: string;
}

/** A post prepared once for many monitors (tokenised once). */
export interface PreparedPost {
  words: string[];
  lang: string | null;
  types: PostType[];
}

export function preparePost(post: RulePost): PreparedPost {
  return { words: words(post.text), lang: postLang(post.lang), types: postTypes(post) };
}

/** The verdict with its reason (the preview); `matchesRules` is the same decision without the words. */
export function evaluateRules(rules: CompiledRules, post: PreparedPost): RuleVerdict {
  const excludedType = post.types.find((t) => rules.excludeTypes.has(t));
  if (excludedType) return { matched: false, code: 'type', reason: `excluded: ${TYPE_LABEL[excludedType]}` };
  if (rules.langs) {
    if (post.lang === null) return { matched: false, code: 'language', reason: 'the post has no language' };
    if (!rules.langs.has(post.lang)) {
      return {
        matched: false,
        code: 'language',
        reason: `language ${post.lang} is not in ${[...rules.langs].join(', ')}`,
      };
    }
  }
  const ex = firstMatch(post.words, rules.exclude);
  if (ex >= 0)
    return { matched: false, code: 'excluded_keyword', reason: `excluded keyword "${rules.excludeKeywords[ex]}"` };
  if (rules.include.length === 0) return { matched: true, code: 'no_keywords', reason: 'no keyword filter' };
  const inc = firstMatch(post.words, rules.include);
  if (inc < 0) return { matched: false, code: 'no_keyword_match', reason: 'no keyword matched' };
  return { matched: true, code: 'keyword', reason: `matched keyword "${rules.includeKeywords[inc]}"` };
}

/** The poller's hot path: the same decision as evaluateRules, without building a reason. */
export function matchesRules(rules: CompiledRules, post: PreparedPost): boolean {
  if (rules.excludeTypes.size > 0 && post.types.some((t) => rules.excludeTypes.has(t))) return false;
  if (rules.langs && (post.lang === null || !rules.langs.has(post.lang))) return false;
  if (rules.exclude.length > 0 && firstMatch(post.words, rules.exclude) >= 0) return false;
  return rules.include.length === 0 || firstMatch(post.words, rules.include) >= 0;
}
