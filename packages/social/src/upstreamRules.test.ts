import {
  fitRuleParts,
  rulePartsLength,
  splitRuleParts,
  upstreamRuleKey,
  upstreamRuleParts,
  withRuleParts,
  type MonitorRuleColumns,
} from './upstreamRules';
import { MIN_QUERY_LENGTH } from './x/pack';

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

  it('splitRuleParts reads back what withRuleParts wrote: the from: query and the key', () => {
    for (const parts of [[], ['-is:retweet'], ['-is:reply', '(lang:de OR lang:en)']]) {
      const query = withRuleParts('from:a OR from:b', parts);
      expect(splitRuleParts(query)).toEqual({ fromQuery: 'from:a OR from:b', key: upstreamRuleKey(parts) });
      expect(rulePartsLength(parts)).toBe(query.length - 'from:a OR from:b'.length);
    }
    expect(splitRuleParts('(from:a)')).toEqual({ fromQuery: '(from:a)', key: '' });
  });

  it('fitRuleParts drops the last parts until one longest from: clause fits, never past the limit', () => {
    const parts = ['-is:retweet', '(lang:de OR lang:en OR lang:fr)'];
    expect(fitRuleParts(parts, 1024)).toEqual(parts);
    const both = MIN_QUERY_LENGTH + rulePartsLength(parts);
    expect(fitRuleParts(parts, both)).toEqual(parts);
    expect(fitRuleParts(parts, both - 1)).toEqual(['-is:retweet']);
    expect(fitRuleParts(parts, MIN_QUERY_LENGTH + rulePartsLength(['-is:retweet']) - 1)).toEqual([]);
    for (let max = MIN_QUERY_LENGTH; max < both + 2; max++) {
      const fitted = fitRuleParts(parts, max);
      expect(withRuleParts(`from:${'x'.repeat(15)}`, fitted).length).toBeLessThanOrEqual(max);
    }
  });
});
