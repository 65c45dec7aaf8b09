import {
  QUERY_LIMITS,
  QueryError,
  matchesQuery,
  parseQuery,
  prepareQueryPost,
  queryCandidates,
  type QueryPost,
} from './query';

function post(text: string, over: Partial<QueryPost> = {}): QueryPost {
  return { text, lang: 'en', referencedTweets: [], authorUsername: 'someone', ...over };
}

function matches(query: string, p: QueryPost): boolean {
  return matchesQuery(parseQuery(query).ast, prepareQueryPost(p));
}

function refusal(query: unknown): string {
  try {
    parseQuery(query);
  } catch (err) {
    expect(err).toBeInstanceOf(QueryError);
    return (err as Error).message;
  }
  throw new Error(`query ${JSON.stringify(query)} was accepted`);
}

describe('parseQuery: accepted queries', () => {
  it("reads the spec's example and renders X's canonical rule", () => {
    const q = parseQuery('  "new release" OR launch -giveaway lang:en ');
    expect(q.text).toBe('"new release" OR launch -giveaway lang:en');
    // terms side by side bind tighter than OR, as on X; the rule spells the grouping out
    expect(q.rule).toBe('"new release" OR (launch -giveaway lang:en)');
    expect(q.ast).toMatchObject({ kind: 'or', nodes: [{ kind: 'phrase' }, { kind: 'and' }] });
  });

  it('reads groups, negated groups and every operator with its negation', () => {
    const q = parseQuery('(rocket OR launch) from:NASA -is:retweet -is:reply is:quote -lang:de -(test OR drill)');
    expect(q.rule).toBe('(rocket OR launch) from:NASA -is:retweet -is:reply is:quote -lang:de -(test OR drill)');
    expect(parseQuery('from:@jack').rule).toBe('from:jack');
    expect(parseQuery('LANG:EN hello IS:Reply').rule).toBe('lang:en hello is:reply');
  });

  it('takes a 512-character query and refuses 513 and 1,000', () => {
    const long = `${'x'.repeat(500)} ${'y'.repeat(11)}`;
    expect(long.length).toBe(QUERY_LIMITS.maxLength);
    expect(parseQuery(long).text).toBe(long);
    expect(refusal(`${long}z`)).toBe('the query is 513 characters; at most 512');
    expect(refusal('a'.repeat(1000))).toMatch(/1000 characters; at most 512/);
    // 511 characters as written, 513 once X's rule spells out that side-by-side binds before OR
    const grouped = `a OR ${'b'.repeat(250)} ${'c'.repeat(255)}`;
    expect(grouped.length).toBe(511);
    expect(refusal(grouped)).toBe(
      'the query written as an X rule (with its grouping spelled out) is 513 characters; at most 512',
    );
  });
});

describe('parseQuery: refusals name the part', () => {
  it.each([
    ['', 'the query is empty'],
    ['   ', 'the query is empty'],
    [42, 'the query must be a string'],
    ['launch has:links', 'unknown operator "has:" in "has:links"'],
    ['url:example.com launch', 'unknown operator "url:"'],
    ['to:jack', 'unknown operator "to:"'],
    ['#launch', '"#launch": #hashtag'],
    ['@jack hi', '"@jack": #hashtag'],
    ['a AND b', '"AND" is not an operator'],
    ['"new release', 'the quote at position 1 is never closed'],
    ['(a OR b', '"(" at position 1 is never closed'],
    ['a OR b)', '")" at position 7 has no "(" before it'],
    ['a ()', '"()" at position 3 is empty'],
    ['a OR', '"OR" at position 3 has nothing after it'],
    ['OR a', '"OR" at position 1 has nothing before it'],
    ['a OR OR b', '"OR" at position 3 has nothing after it'],
    ['a - b', '"-" at position 3 negates nothing'],
    ['a --b', '"--" at position 3'],
    ['a -)', '"-" at position 3 negates nothing'],
    ['from:this_name_is_too_long', 'from: needs a username'],
    ['lang:english hi', 'lang: needs a language code'],
    ['is:verified hi', 'is: takes reply, retweet, quote'],
    ['launch\u0000x', 'the query contains control characters'],
    ['a ""', 'the phrase "" has no words'],
    ['a b"c"', 'a quote inside "b" at position 4'],
  ])('%j → %s', (query, message) => {
    expect(refusal(query)).toContain(message);
  });

  it.each([
    '-giveaway',
    '-giveaway -spam',
    'lang:en',
    'is:reply',
    'lang:en -is:retweet',
    '-(a OR b)',
    'launch OR -spam',
    'launch OR lang:en',
    '(lang:en OR launch) is:quote',
  ])('%j would match every post', (query) => {
    expect(refusal(query)).toMatch(/would match every post/);
  });

  it('bounds nesting and the number of terms', () => {
    expect(refusal(`${'('.repeat(11)}a${')'.repeat(11)}`)).toBe('at most 10 nested parentheses');
    expect(parseQuery(`${'('.repeat(10)}a${')'.repeat(10)}`).rule).toBe('a');
    const many = Array.from({ length: 51 }, (_, i) => `w${i}`).join(' ');
    expect(refusal(many)).toBe('at most 50 terms');
  });
});

describe('matchesQuery', () => {
  const q = '"new release" OR launch -giveaway lang:en';
  it('matches the phrase alone, or the word without the exclusion in English', () => {
    expect(matches(q, post('Our NEW release is out', { lang: 'fr' }))).toBe(true);
    expect(matches(q, post('Launch today!'))).toBe(true);
    expect(matches(q, post('Launch giveaway today!'))).toBe(false);
    expect(matches(q, post('Launch today!', { lang: 'de' }))).toBe(false);
    expect(matches(q, post('Launch today!', { lang: null }))).toBe(false);
    expect(matches(q, post('new things, release soon'))).toBe(false);
    expect(matches(q, post('launcher'))).toBe(false);
  });

  it('from:, is: and their negations', () => {
    const reply = { referencedTweets: [{ type: 'replied_to' as const, id: '1' }] };
    const quote = { referencedTweets: [{ type: 'quoted' as const, id: '1' }] };
    expect(matches('from:NASA', post('x', { authorUsername: 'nasa' }))).toBe(true);
    expect(matches('from:NASA', post('x', { authorUsername: 'esa' }))).toBe(false);
    expect(matches('launch -is:reply', post('launch', reply))).toBe(false);
    expect(matches('launch -is:reply', post('launch', quote))).toBe(true);
    expect(matches('launch is:quote', post('launch', quote))).toBe(true);
    expect(matches('launch is:retweet', post('launch', quote))).toBe(false);
    expect(matches('launch -lang:en', post('launch', { lang: 'de' }))).toBe(true);
  });

  it('groups and negated groups', () => {
    const g = '(rocket OR launch) -(test OR drill)';
    expect(matches(g, post('rocket day'))).toBe(true);
    expect(matches(g, post('rocket test'))).toBe(false);
    expect(matches(g, post('nothing here'))).toBe(false);
  });

  it('compares words as keywords do: case, accents, non-Latin scripts', () => {
    expect(matches('café', post('CAFÉ open'))).toBe(true);
    expect(matches('"don\'t stop"', post("Don't stop me now"))).toBe(true);
    expect(matches('東京', post('今日は東京へ'))).toBe(true);
  });
});

describe('queryCandidates', () => {
  it('ORs the words and phrases that are not negated, and lists the authors', () => {
    expect(queryCandidates(parseQuery('"new release" OR launch -giveaway lang:en').ast)).toEqual({
      search: '"new release" OR launch',
      authors: [],
    });
    expect(queryCandidates(parseQuery('from:NASA -(test OR drill) is:reply').ast)).toEqual({
      search: null,
      authors: ['NASA'],
    });
  });
});
