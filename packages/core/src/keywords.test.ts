import { compileKeywords, KeywordError, keywordPhrases, matchWords, parseKeywords, words } from './keywords';

const matches = (keyword: string, text: string) => compileKeywords([keyword])(text);

describe('keyword matching rules (services/poller/README.md "Keyword matching")', () => {
  it('scripts written without spaces match as a substring: Chinese, Japanese, Thai', () => {
    expect(matches('发布会', '苹果今天举行了发布会，介绍了新手机')).toBe(true);
    expect(matches('发布会', '苹果今天举行了发布，会介绍')).toBe(false);
    expect(matches('東京', '明日は東京タワーに行きます')).toBe(true);
    expect(matches('タワー', '明日は東京タワーに行きます')).toBe(true);
    expect(matches('大阪', '明日は東京タワーに行きます')).toBe(false);
    expect(matches('ภาษาไทย', 'ฉันชอบเรียนภาษาไทยมาก')).toBe(true);
    expect(matches('ภาษาลาว', 'ฉันชอบเรียนภาษาไทยมาก')).toBe(false);
    // mixed with Latin words
    expect(matches('iPhone 发布', '新的iPhone发布了')).toBe(true);
    // half-width katakana are the same characters (NFKC)
    expect(matches('タワー', 'ﾀﾜｰ')).toBe(true);
  });

  it('emoji keywords are accepted and match; skin tones and variation selectors are ignored', () => {
    expect(parseKeywords('🚀, launch 🎉')).toEqual(['🚀', 'launch 🎉']);
    expect(matches('🚀', 'Liftoff!🚀🚀')).toBe(true);
    expect(matches('🚀', 'Liftoff!')).toBe(false);
    expect(matches('👍', 'great work 👍🏽')).toBe(true);
    expect(matches('❤️', 'I ❤ this')).toBe(true);
    expect(matches('👩‍💻', 'new job 👩🏾‍💻')).toBe(true);
    expect(matches('👩', 'new job 👩‍💻')).toBe(false);
    expect(matches('🇫🇷', 'Allez 🇫🇷!')).toBe(true);
    expect(matches('🇫🇷', 'Go 🇩🇪!')).toBe(false);
    expect(matches('launch 🎉', 'LAUNCH!! 🎉')).toBe(true);
  });

  it('c++ and c# keep their suffix: they do not match plain "c", and "c" does not match them', () => {
    expect(matches('c++', 'I love c')).toBe(false);
    expect(matches('c++', 'I love C++!')).toBe(true);
    expect(matches('c++', 'written in C++17')).toBe(true);
    expect(matches('c#', 'I love c')).toBe(false);
    expect(matches('c#', 'I love C#.')).toBe(true);
    expect(matches('c', 'I love C++')).toBe(false);
    expect(words('a+b c++, x#y')).toEqual(['a', 'b', 'c++', 'x', '#y']);
  });

  it('a hashtag keyword matches only the hashtag; a plain keyword matches the word and the hashtag', () => {
    expect(matches('#launch', 'Ready for #launch')).toBe(true);
    expect(matches('#launch', 'Ready for #LAUNCH!')).toBe(true);
    expect(matches('#launch', 'Ready for launch')).toBe(false);
    expect(matches('#launch', 'Ready for #launchday')).toBe(false);
    expect(matches('launch', 'Ready for #launch')).toBe(true);
    expect(matches('launch', 'Ready for launch')).toBe(true);
    expect(matches('#launch day', '#launch day is here')).toBe(true);
    expect(matches('#launch day', 'launch day is here')).toBe(false);
    expect(parseKeywords('#launch, launch')).toEqual(['#launch', 'launch']);
    expect(() => parseKeywords('#')).toThrow(KeywordError);
  });

  it('keeps accents; composed and decomposed forms are equal', () => {
    expect(matches('año', 'Feliz año nuevo')).toBe(true);
    expect(matches('año', 'Feliz ano nuevo')).toBe(false);
    expect(matches('ano', 'Feliz año nuevo')).toBe(false);
    const composed = 'caf\u00e9';
    const decomposed = 'cafe\u0301';
    expect(matches(composed, `at the ${decomposed}`)).toBe(true);
    expect(matches(decomposed, `at the ${composed}`)).toBe(true);
    expect(matches('cafe', `at the ${composed}`)).toBe(false);
    expect(parseKeywords([composed, decomposed])).toEqual([composed]);
  });

  it('case folding: ß = ss = SS, final sigma, and dotless/dotted I all fold to i (locale-independent)', () => {
    expect(matches('straße', 'STRASSE gesperrt')).toBe(true);
    expect(matches('STRASSE', 'die Straße ist gesperrt')).toBe(true);
    expect(matches('strasse', 'die Straße')).toBe(true);
    expect(matches('ıstanbul', 'ISTANBUL')).toBe(true);
    expect(matches('istanbul', 'İstanbul')).toBe(true);
    expect(matches('İSTANBUL', 'ıstanbul')).toBe(true);
    expect(matches('ΟΔΟΣ', 'μια οδος')).toBe(true);
    expect(matches('οδος', 'ΜΙΑ ΟΔΟΣ')).toBe(true);
    expect(parseKeywords(['Straße', 'STRASSE'])).toEqual(['Straße']);
  });

  it('the poller path (tokenise the tweet once, compiled phrases per monitor) gives the same answers', () => {
    const tweet = words('Ready for #launch 🚀 in 東京 with C++');
    expect(matchWords(tweet, keywordPhrases(['#launch']))).toBe(true);
    expect(matchWords(tweet, keywordPhrases(['🚀']))).toBe(true);
    expect(matchWords(tweet, keywordPhrases(['東京']))).toBe(true);
    expect(matchWords(tweet, keywordPhrases(['c++']))).toBe(true);
    expect(matchWords(tweet, keywordPhrases(['c', '大阪', '#ready']))).toBe(false);
    expect(matchWords(tweet, keywordPhrases([]))).toBe(true);
  });
});
