import { upstreamRuleKey, upstreamRuleParts, withRuleParts, type MonitorRuleColumns } from './upstreamRules';

const m = (excludeTypes: string[] = [], langs: string[] = []): MonitorRuleColumns => ({ excludeTypes, langs });

describe('upstreamRuleParts: only what no monitor of the target needs', () => {
  it('a type goes upstream only when every monitor leaves it out', () => {
    expect(upstreamRuleParts([m(['reposts'])])).toEqual(['-is:retweet']);
    expect(upstreamRuleParts([m(['replies'])])).toEqual(['-is:reply']);
    expect(upstreamRuleParts([m(['quotes'])])).toEqual(['-is:quote']);
    expect(upstreamRuleParts([m(['replies', 'reposts', 'quotes'])])).toEqual(['-is:retweet', '-is:reply', '-is:quote']);
    // another monitor wants replies: only the reposts both leave out go upstream
    expect(upstreamRuleParts([m(['reposts', 'replies']), m(['reposts'])])).toEqual(['-is:retweet']);
    // a monitor without exclusions needs every type
    expect(upstreamRuleParts([m(['reposts', 'replies', 'quotes']), m()])).toEqual([]);
  });

  it('languages go upstream as the union, only when every monitor has a list', () => {
    expect(upstreamRuleParts([m([], ['en'])])).toEqual(['lang:en']);
    expect(upstreamRuleParts([m([], ['en', 'de']), m([], ['DE', 'fr'])])).toEqual(['(lang:de OR lang:en OR lang:fr)']);
    expect(upstreamRuleParts([m([], ['en']), m()])).toEqual([]);
    // codes that are not language codes never reach the query
    expect(upstreamRuleParts([m([], ['en', 'x) OR (from:evil'])])).toEqual(['lang:en']);
  });

  it('types and languages together; no monitors: nothing', () => {
    expect(upstreamRuleParts([m(['reposts'], ['en']), m(['reposts', 'quotes'], ['ja'])])).toEqual([
      '-is:retweet',
      '(lang:en OR lang:ja)',
    ]);
    expect(upstreamRuleParts([])).toEqual([]);
  });

  it('builds the query and a grouping key', () => {
    const parts = upstreamRuleParts([m(['reposts'], ['en'])]);
    expect(withRuleParts('from:a OR from:b', parts)).toBe('(from:a OR from:b) -is:retweet lang:en');
    expect(withRuleParts('from:a', [])).toBe('from:a');
    expect(upstreamRuleKey(parts)).toBe(upstreamRuleKey(upstreamRuleParts([m(['reposts'], ['EN'])])));
    expect(upstreamRuleKey(parts)).not.toBe(upstreamRuleKey([]));
  });
});
