/**
 * Keyword filters. A tweet matches when its text contains any keyword as whole words,
 * case-insensitively, after Unicode normalisation (NFKD, diacritics removed, so "Café" matches
 * "cafe"). A keyword may be a phrase: its words must appear consecutively, however much white
 * space or punctuation stands between them. Words are runs of letters, digits and underscores;
 * everything else separates words (so "#launch" matches the keyword "launch").
 */
export class KeywordError extends Error {
  override name = 'KeywordError';
}

export const KEYWORD_LIMITS = { maxKeywords: 20, maxLength: 100 } as const;

const WORD = /[\p{L}\p{N}_]+/gu;

export function normalizeText(text: string): string {
  return text
    .normalize('NFKD')
    .replace(/\p{M}+/gu, '')
    .toLowerCase();
}

export function words(text: string): string[] {
  return normalizeText(text).match(WORD) ?? [];
}

/**
 * Validates and canonicalises a keyword list: from a comma-separated string (`"a,b c"`) or an
 * array. Trims, collapses inner white space, drops duplicates (by normalised form), keeps order.
 * Returns [] for "no filter".
 */
export function parseKeywords(input: string | readonly string[] | null | undefined): string[] {
  if (input === null || input === undefined) return [];
  const raw = typeof input === 'string' ? input.split(',') : input;
  const out: string[] = [];
  const seen = new Set<string>();
  for (const item of raw) {
    if (typeof item !== 'string') throw new KeywordError('each keyword must be a string');
    const k = item.trim().replace(/\s+/g, ' ');
    if (!k) continue;
    if (k.length > KEYWORD_LIMITS.maxLength) {
      throw new KeywordError(`keyword "${k.slice(0, 20)}…" is longer than ${KEYWORD_LIMITS.maxLength} characters`);
    }
    const w = words(k);
    if (w.length === 0) throw new KeywordError(`keyword "${k}" has no letters or digits`);
    const key = w.join(' ');
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(k);
  }
  if (out.length > KEYWORD_LIMITS.maxKeywords)
    throw new KeywordError(`at most ${KEYWORD_LIMITS.maxKeywords} keywords are allowed`);
  return out;
}

export type TweetMatcher = (text: string) => boolean;

/** Compiles a keyword list into a matcher; an empty list matches every tweet. */
export function compileKeywords(keywords: readonly string[]): TweetMatcher {
  const phrases = keywords.map(words).filter((p) => p.length > 0);
  if (phrases.length === 0) return () => true;
  return (text) => matchWords(words(text), phrases);
}

/** For many monitors over one tweet: tokenise the tweet once, then test each monitor's phrases. */
export function matchWords(textWords: readonly string[], phrases: readonly (readonly string[])[]): boolean {
  if (phrases.length === 0) return true;
  for (const phrase of phrases) {
    const first = phrase[0];
    for (let i = 0; i + phrase.length <= textWords.length; i++) {
      if (textWords[i] !== first) continue;
      let ok = true;
      for (let j = 1; j < phrase.length; j++) {
        if (textWords[i + j] !== phrase[j]) {
          ok = false;
          break;
        }
      }
      if (ok) return true;
    }
  }
  return false;
}

export function keywordPhrases(keywords: readonly string[]): string[][] {
  return keywords.map(words).filter((p) => p.length > 0);
}
