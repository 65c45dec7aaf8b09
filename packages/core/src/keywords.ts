/**
 * Keyword filters. A tweet matches when its text contains any keyword, compared token by token
 * after the same normalisation of both sides. The rules (documented for users in
 * services/poller/README.md, "Keyword matching"):
 *
 * - Normalisation: Unicode NFKC (composed and decomposed forms are equal, compatibility forms
 *   such as `ﬁ` or full-width `ＡＢＣ` are folded), then a locale-independent full case fold
 *   (`toUpperCase().toLowerCase()`: `ß` = `ss` = `SS`, final `ς` = `σ`; dotless `ı`, dotted `İ`,
 *   `I` and `i` all fold to `i`). Accents are kept: `año` ≠ `ano`.
 * - Tokens: words of letters, marks, digits and `_`, everything else separates them. A word may
 *   end in a run of `+` or `#` not followed by a letter (`c++`, `c#`, `c++17` → `c++` `17`), so `c++` does not match "I love c". A word written
 *   right after `#` is a hashtag token (`#launch`).
 * - Scripts written without spaces (Han, Hiragana, Katakana, Thai, Lao, Khmer, Myanmar): every
 *   character is a token, so a keyword in them matches as a substring; white space or
 *   punctuation between two such characters is itself a token (`发布，会` does not match `发布会`).
 * - Emoji (and ZWJ sequences, flags, keycaps) are one token each; variation selectors and skin
 *   tones are ignored (`👍` matches `👍🏽`).
 * - A keyword (possibly a phrase) matches when its tokens appear consecutively in the tweet,
 *   whatever white space or punctuation stands between them. A plain token also matches the
 *   same hashtag (`launch` matches `#launch`), a hashtag token only the hashtag (`#launch` does
 *   not match "launch").
 *
 * Speed: keywords are tokenised once per monitor (`keywordPhrases`), a tweet once for all
 * monitors (`words`); matching is token comparison, no regex per keyword.
 */
export class KeywordError extends Error {
  override name = 'KeywordError';
}

export const KEYWORD_LIMITS = { maxKeywords: 20, maxLength: 100 } as const;

/** Scripts written without spaces between words: one token per character (substring matching). */
const NOSPACE = '\\p{sc=Han}\\p{sc=Hiragana}\\p{sc=Katakana}\\p{sc=Thai}\\p{sc=Lao}\\p{sc=Khmer}\\p{sc=Myanmar}\\u30FC';
const WORD_CHAR = '\\p{L}\\p{M}\\p{N}_';
const EMOJI = '\\p{RI}\\p{RI}|[#*0-9]\\u20E3|\\p{Extended_Pictographic}(?:\\u200D\\p{Extended_Pictographic})*';
/**
 * One token. The `+`/`#` suffix is taken whole or not at all (a lookahead + backreference makes
 * it atomic), and only when no letter follows it: "c++17" → `c++` `17`, "a+b" → `a` `b`.
 */
const TOKEN = new RegExp(
  `${EMOJI}|(#?[${NOSPACE}])|#?(?:(?![${NOSPACE}])[${WORD_CHAR}])+(?:(?=([+#]+))\\2(?![\\p{L}\\p{M}_]))?`,
  'gu',
);
const EMOJI_NOISE = /[\uFE0E\uFE0F]|\p{Emoji_Modifier}/gu;
const ASCII = /^\p{ASCII}*$/u;
const HASH = 35; // '#'

/** NFKC, full case fold (ß → ss, ı/İ → i), emoji variation selectors and skin tones dropped; accents kept. */
export function normalizeText(text: string): string {
  if (ASCII.test(text)) return text.toLowerCase();
  return text
    .normalize('NFKC')
    .toUpperCase()
    .toLowerCase()
    .replace(/i\u0307/g, 'i')
    .replace(EMOJI_NOISE, '')
    .normalize('NFC');
}

/** Stands between two characters of a no-space script that are not adjacent (space or punctuation between). */
const GAP = ' ';

/** The tokens of a text (see the file comment). */
export function words(text: string): string[] {
  const s = normalizeText(text);
  const out: string[] = [];
  let noSpaceEnd = -1; // where the last no-space-script character ended
  TOKEN.lastIndex = 0;
  for (let m = TOKEN.exec(s); m !== null; m = TOKEN.exec(s)) {
    if (m[1] !== undefined) {
      // substring semantics: "发布，会" must not match "发布会", so a gap between two such characters is a token
      if (noSpaceEnd >= 0 && noSpaceEnd !== m.index && out[out.length - 1] !== GAP) out.push(GAP);
      noSpaceEnd = m.index + m[0].length;
    } else if (noSpaceEnd >= 0) noSpaceEnd = -2; // another token in between: no gap token needed
    out.push(m[0]);
  }
  return out;
}

/** Splits "a, -b, -\"c, d\"" at commas outside double quotes. */
function splitKeywordList(input: string): string[] {
  const out: string[] = [];
  let current = '';
  let quoted = false;
  for (const ch of input) {
    if (ch === '"') quoted = !quoted;
    if (ch === ',' && !quoted) {
      out.push(current);
      current = '';
    } else current += ch;
  }
  out.push(current);
  return out;
}

/** One keyword entry: `word`, `a phrase`, `"a phrase"`, `-word` or `-"a phrase"` (an exclusion). */
export interface KeywordEntry {
  text: string;
  exclude: boolean;
}

/** Reads one (trimmed) entry: a leading `-` makes it an exclusion; surrounding double quotes are dropped. */
export function keywordEntry(raw: string): KeywordEntry {
  let text = raw;
  const exclude = text.startsWith('-') && text.length > 1;
  if (exclude) text = text.slice(1).trim();
  if (text.length >= 2 && text.startsWith('"') && text.endsWith('"')) text = text.slice(1, -1).trim();
  return { text, exclude };
}

/** The canonical written form: `word`, `a phrase`, `-word`, `-"a phrase"`. */
function writtenForm(entry: KeywordEntry): string {
  if (!entry.exclude) return entry.text;
  return /\s/.test(entry.text) ? `-"${entry.text}"` : `-${entry.text}`;
}

/**
 * Validates and canonicalises a keyword list: from a comma-separated string (`"a,b c,-d"`) or an
 * array. Trims, collapses inner white space, drops duplicates (by normalised tokens), keeps
 * order. An entry written `-word` or `-"a phrase"` is an exclusion (see `splitKeywords`); it is
 * kept in that written form. Returns [] for "no filter".
 */
export function parseKeywords(input: string | readonly string[] | null | undefined): string[] {
  if (input === null || input === undefined) return [];
  const raw = typeof input === 'string' ? splitKeywordList(input) : input;
  const out: string[] = [];
  const seen = new Set<string>();
  for (const item of raw) {
    if (typeof item !== 'string') throw new KeywordError('each keyword must be a string');
    const trimmed = item.trim().replace(/\s+/g, ' ').normalize('NFC');
    if (!trimmed) continue;
    const entry = keywordEntry(trimmed);
    const k = entry.text;
    if (k.length > KEYWORD_LIMITS.maxLength) {
      throw new KeywordError(`keyword "${k.slice(0, 20)}…" is longer than ${KEYWORD_LIMITS.maxLength} characters`);
    }
    const w = words(k);
    if (w.length === 0) throw new KeywordError(`keyword "${trimmed}" has no letters or digits and no emoji`);
    const key = (entry.exclude ? '-' : '+') + w.join(' ');
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(writtenForm(entry));
  }
  if (out.length > KEYWORD_LIMITS.maxKeywords)
    throw new KeywordError(`at most ${KEYWORD_LIMITS.maxKeywords} keywords are allowed`);
  return out;
}

/** A stored keyword list split into what must appear (any of) and what must not (none of). */
export function splitKeywords(keywords: readonly string[]): { include: string[]; exclude: string[] } {
  const include: string[] = [];
  const exclude: string[] = [];
  for (const k of keywords) {
    const entry = keywordEntry(k);
    (entry.exclude ? exclude : include).push(entry.text);
  }
  return { include, exclude };
}

export type TweetMatcher = (text: string) => boolean;

/**
 * Compiles a keyword list into a matcher: any included keyword (an empty set matches every
 * tweet) and no excluded one.
 */
export function compileKeywords(keywords: readonly string[]): TweetMatcher {
  const { include, exclude } = splitKeywords(keywords);
  const phrases = keywordPhrases(include);
  const excluded = keywordPhrases(exclude);
  if (phrases.length === 0 && excluded.length === 0) return () => true;
  return (text) => {
    const w = words(text);
    return matchWords(w, phrases) && firstMatch(w, excluded) < 0;
  };
}

/** A text token matches a keyword token when equal, or when it is the hashtag of a plain keyword token. */
function sameToken(textToken: string, keywordToken: string): boolean {
  return (
    textToken === keywordToken ||
    (textToken.length === keywordToken.length + 1 &&
      textToken.charCodeAt(0) === HASH &&
      keywordToken.charCodeAt(0) !== HASH &&
      textToken.endsWith(keywordToken))
  );
}

/** For many monitors over one tweet: tokenise the tweet once, then test each monitor's phrases. */
export function matchWords(textWords: readonly string[], phrases: readonly (readonly string[])[]): boolean {
  if (phrases.length === 0) return true;
  return firstMatch(textWords, phrases) >= 0;
}

/** The index of the first phrase found in the text's tokens, -1 when none is. */
export function firstMatch(textWords: readonly string[], phrases: readonly (readonly string[])[]): number {
  for (let p = 0; p < phrases.length; p++) {
    const phrase = phrases[p]!;
    const first = phrase[0];
    if (first === undefined) continue;
    for (let i = 0; i + phrase.length <= textWords.length; i++) {
      if (!sameToken(textWords[i]!, first)) continue;
      let ok = true;
      for (let j = 1; j < phrase.length; j++) {
        if (!sameToken(textWords[i + j]!, phrase[j]!)) {
          ok = false;
          break;
        }
      }
      if (ok) return p;
    }
  }
  return -1;
}

/** Each keyword's tokens, computed once per monitor. */
export function keywordPhrases(keywords: readonly string[]): string[][] {
  return keywords.map(words).filter((p) => p.length > 0);
}
