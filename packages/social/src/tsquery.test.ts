import { drivers, isExact, needsChoice, parseTsQuery, positiveLexemes, TsQueryParseError } from './tsquery';

describe('tsquery tree and driver terms', () => {
  const term = (lexeme: string) => ({ kind: 'term', lexeme, prefix: false, weighted: false });

  it('parses what websearch_to_tsquery prints, with precedence ! > <-> > & > |', () => {
    expect(parseTsQuery('')).toBeNull();
    expect(parseTsQuery(`'launch'`)).toEqual(term('launch'));
    expect(parseTsQuery(`'a' | 'b' & 'c'`)).toEqual({
      kind: 'or',
      args: [term('a'), { kind: 'and', args: [term('b'), term('c')] }],
    });
    expect(parseTsQuery(`'x' <-> 'y' & !'w'`)).toEqual({
      kind: 'and',
      args: [
        { kind: 'phrase', args: [term('x'), term('y')] },
        { kind: 'not', arg: term('w') },
      ],
    });
    expect(parseTsQuery(`( 'a' | 'b' ) & 'c' <2> 'd'`)).toEqual({
      kind: 'and',
      args: [
        { kind: 'or', args: [term('a'), term('b')] },
        { kind: 'phrase', args: [term('c'), term('d')] },
      ],
    });
    // quotes doubled, backslashes escaped; prefix and weights
    expect(parseTsQuery(`'it''s' & 'c\\\\d'`)).toEqual({ kind: 'and', args: [term("it's"), term('c\\d')] });
    expect(parseTsQuery(`'pre':* & 'w':AB`)).toEqual({
      kind: 'and',
      args: [
        { kind: 'term', lexeme: 'pre', prefix: true, weighted: false },
        { kind: 'term', lexeme: 'w', prefix: false, weighted: true },
      ],
    });
    for (const bad of [`'open`, `'a' &`, `'a' ) 'b'`, `( 'a'`, 'a']) {
      expect(() => parseTsQuery(bad)).toThrow(TsQueryParseError);
    }
  });

  it('chooses the cheapest terms every match contains', () => {
    const count = (l: string) => ({ common: 1000, middling: 50, rare: 2 })[l] ?? 0;
    const d = (text: string) => drivers(parseTsQuery(text)!, count);
    expect(d(`'common'`)).toEqual({ terms: ['common'], cost: 1000 });
    expect(d(`'common' & 'rare'`)).toEqual({ terms: ['rare'], cost: 2 });
    expect(d(`'common' <-> 'middling'`)).toEqual({ terms: ['middling'], cost: 50 });
    expect(d(`'middling' | 'rare' | 'rare'`)).toEqual({ terms: ['middling', 'rare'], cost: 52 });
    expect(d(`'common' & ( 'middling' | 'rare' )`)).toEqual({ terms: ['middling', 'rare'], cost: 52 });
    expect(d(`'common' & !'rare'`)).toEqual({ terms: ['common'], cost: 1000 });
    // nothing every match contains: an absence, or a prefix (no posting of its own)
    expect(d(`!'common'`)).toBeNull();
    expect(d(`'rare' | !'common'`)).toBeNull();
    expect(d(`'pre':*`)).toBeNull();
  });

  it('tells exact queries (postings are the matches) and when frequencies matter', () => {
    const p = (text: string) => parseTsQuery(text)!;
    expect(isExact(p(`'a'`))).toBe(true);
    expect(isExact(p(`'a' | 'b' | 'c'`))).toBe(true);
    expect(isExact(p(`'a' & 'b'`))).toBe(false);
    expect(isExact(p(`'a' <-> 'b'`))).toBe(false);
    expect(isExact(p(`'a' | !'b'`))).toBe(false);
    expect(isExact(p(`'a':A`))).toBe(false);
    expect(needsChoice(p(`'a' | 'b'`))).toBe(false);
    expect(needsChoice(p(`'a' & !'b'`))).toBe(false);
    expect(needsChoice(p(`'a' & 'b'`))).toBe(true);
    expect(needsChoice(p(`'c' | 'a' <-> 'b'`))).toBe(true);
    expect(positiveLexemes(p(`'a' & !'b' | 'a' <-> 'c'`))).toEqual(['a', 'c']);
  });
});
