import { parseKeywords, splitKeywords } from './keywords';
import {
  compileRules,
  evaluateRules,
  matchesRules,
  parseLangs,
  parsePostTypes,
  preparePost,
  RuleError,
  type MonitorFilters,
  type RulePost,
} from './rules';

const post = (text: string, extra: Partial<RulePost> = {}): RulePost => ({
  text,
  lang: 'en',
  referencedTweets: [],
  ...extra,
});
const none: MonitorFilters = { exclude: [], lang: [] };

function verdict(keywords: string, filters: MonitorFilters, p: RulePost) {
  const rules = compileRules(parseKeywords(keywords), filters);
  const prepared = preparePost(p);
  const v = evaluateRules(rules, prepared);
  // the hot path decides the same
  expect(matchesRules(rules, prepared)).toBe(v.matched);
  return v;
}

describe('exclusion keywords', () => {
  it('parses -word and -"a phrase" into exclusions, keeping the written form', () => {
    const k = parseKeywords('launch, -spam, -"big  sale", "new phone"');
    expect(k).toEqual(['launch', '-spam', '-"big sale"', 'new phone']);
    expect(splitKeywords(k)).toEqual({ include: ['launch', 'new phone'], exclude: ['spam', 'big sale'] });
    // a comma inside the quotes stays in the phrase
    expect(parseKeywords('-"sale, today"')).toEqual(['-"sale, today"']);
    // the same word included and excluded are two entries; a repeated exclusion is dropped
    expect(parseKeywords(['x', '-x', '-X'])).toEqual(['x', '-x']);
  });

  it('excludes posts containing the word with the whole-word, case and Unicode rules', () => {
    expect(verdict('launch, -spam', none, post('Launch day! SPAM inside')).code).toBe('excluded_keyword');
    expect(verdict('launch, -spam', none, post('Launch day! spammy but fine')).matched).toBe(true);
    expect(verdict('-straße', none, post('Die STRASSE ist lang'))).toEqual({
      matched: false,
      code: 'excluded_keyword',
      reason: 'excluded keyword "straße"',
    });
    expect(verdict('-"big sale"', none, post('a BIG, sale today')).matched).toBe(false);
    expect(verdict('-"big sale"', none, post('big news, sale later')).matched).toBe(true);
    expect(verdict('-spam', none, post('#spam again')).matched).toBe(false);
  });

  it('only exclusions: every other post fires', () => {
    expect(verdict('-spam', none, post('hello'))).toEqual({
      matched: true,
      code: 'no_keywords',
      reason: 'no keyword filter',
    });
  });

  it('rejects an exclusion without letters', () => {
    expect(() => parseKeywords('-"  "')).toThrow(/no letters/);
  });
});

describe('post types', () => {
  const reply = post('launch', { referencedTweets: [{ type: 'replied_to', id: '1' }] });
  const repost = post('RT @a: launch', { referencedTweets: [{ type: 'retweeted', id: '2' }] });
  const quote = post('launch', { referencedTweets: [{ type: 'quoted', id: '3' }] });
  const replyQuote = post('launch', {
    referencedTweets: [
      { type: 'replied_to', id: '1' },
      { type: 'quoted', id: '3' },
    ],
  });

  it('all included by default', () => {
    for (const p of [reply, repost, quote, post('launch')]) expect(verdict('launch', none, p).matched).toBe(true);
  });

  it('each type can be excluded on its own', () => {
    const f = (exclude: MonitorFilters['exclude']) => ({ exclude, lang: [] });
    expect(verdict('launch', f(['replies']), reply)).toMatchObject({ matched: false, reason: 'excluded: a reply' });
    expect(verdict('launch', f(['replies']), repost).matched).toBe(true);
    expect(verdict('launch', f(['reposts']), repost)).toMatchObject({ matched: false, reason: 'excluded: a repost' });
    expect(verdict('launch', f(['reposts']), quote).matched).toBe(true);
    expect(verdict('launch', f(['quotes']), quote)).toMatchObject({ matched: false, reason: 'excluded: a quote' });
    expect(verdict('launch', f(['quotes']), post('launch')).matched).toBe(true);
    // a reply that quotes is both
    expect(verdict('launch', f(['quotes']), replyQuote).code).toBe('type');
  });

  it('parses the list', () => {
    expect(parsePostTypes('quotes, Replies,retweets')).toEqual(['replies', 'reposts', 'quotes']);
    expect(parsePostTypes(null)).toEqual([]);
    expect(() => parsePostTypes('likes')).toThrow(RuleError);
  });
});

describe('languages', () => {
  const f: MonitorFilters = { exclude: [], lang: ['en', 'de'] };

  it('a post in a listed language fires, another does not, one without a language never does', () => {
    expect(verdict('', f, post('hallo', { lang: 'DE' })).matched).toBe(true);
    expect(verdict('', f, post('bonjour', { lang: 'fr' }))).toMatchObject({
      matched: false,
      code: 'language',
      reason: 'language fr is not in en, de',
    });
    expect(verdict('', f, post('?', { lang: null }))).toMatchObject({
      matched: false,
      reason: 'the post has no language',
    });
    expect(verdict('', f, post('?', { lang: 'und' })).code).toBe('language');
    // without a language rule a post without a language fires
    expect(verdict('', none, post('?', { lang: null })).matched).toBe(true);
  });

  it('parses and bounds the list', () => {
    expect(parseLangs('en, DE,en,zh-TW')).toEqual(['en', 'de', 'zh-tw']);
    expect(() => parseLangs('english')).toThrow(/not a language code/);
    expect(() => parseLangs(Array.from({ length: 21 }, (_, i) => `a${String.fromCharCode(97 + i)}`))).toThrow(
      /at most 20/,
    );
  });
});

describe('reasons name the first rule that fails, then the keyword', () => {
  it('type before language before exclusion before keyword', () => {
    const f: MonitorFilters = { exclude: ['replies'], lang: ['en'] };
    const k = 'launch, -spam';
    expect(
      verdict(k, f, post('launch spam', { lang: 'fr', referencedTweets: [{ type: 'replied_to', id: '1' }] })).code,
    ).toBe('type');
    expect(verdict(k, f, post('launch spam', { lang: 'fr' })).code).toBe('language');
    expect(verdict(k, f, post('launch spam')).code).toBe('excluded_keyword');
    expect(verdict(k, f, post('nothing here'))).toMatchObject({ matched: false, code: 'no_keyword_match' });
    expect(verdict('news, launch', f, post('LAUNCH'))).toEqual({
      matched: true,
      code: 'keyword',
      reason: 'matched keyword "launch"',
    });
  });
});
