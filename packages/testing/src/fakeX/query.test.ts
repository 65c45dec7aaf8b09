/** The fake X's query subset: groups, OR, negation, is: and lang: (what the poller's queries use). */
import { compileQuery, parseQuery } from './query';
import type { FakeXTweet, FakeXUser } from './state';

const user = (username: string) => ({ username, suspended: false }) as unknown as FakeXUser;
const tweet = (text: string, extra: Partial<FakeXTweet> = {}) =>
  ({ id: '1', text, lang: 'en', ...extra }) as FakeXTweet;
const repost = tweet('RT x', { referenced_tweets: [{ type: 'retweeted', id: '9' }] });
const reply = tweet('@b x', { referenced_tweets: [{ type: 'replied_to', id: '9' }] });
const quote = tweet('look', { referenced_tweets: [{ type: 'quoted', id: '9' }] });

describe('fake X query', () => {
  it('reads from: groups with rule parts appended', () => {
    const q = compileQuery('(from:alice OR from:bob) -is:retweet');
    expect(q(tweet('hi'), user('alice'))).toBe(true);
    expect(q(tweet('hi'), user('Bob'))).toBe(true);
    expect(q(tweet('hi'), user('carol'))).toBe(false);
    expect(q(repost, user('alice'))).toBe(false);
    expect(q(reply, user('alice'))).toBe(true);
  });

  it('applies is:reply, is:quote and lang: groups', () => {
    const q = compileQuery('(from:alice) -is:reply -is:quote (lang:de OR lang:en)');
    expect(q(reply, user('alice'))).toBe(false);
    expect(q(quote, user('alice'))).toBe(false);
    expect(q(repost, user('alice'))).toBe(true);
    expect(q(tweet('hallo', { lang: 'de' }), user('alice'))).toBe(true);
    expect(q(tweet('salut', { lang: 'fr' }), user('alice'))).toBe(false);
    const { lang: _none, ...noLang } = tweet('?');
    expect(q(noLang as FakeXTweet, user('alice'))).toBe(false);
  });

  it('keeps words and negated words', () => {
    const q = compileQuery('from:alice cats -dogs OR from:bob');
    expect(q(tweet('I like cats'), user('alice'))).toBe(true);
    expect(q(tweet('cats and dogs'), user('alice'))).toBe(false);
    expect(q(tweet('nothing'), user('bob'))).toBe(true);
  });

  it('binds AND before OR, as X documents, and reads its tree back', () => {
    // `from:alice OR from:bob -is:retweet` is `from:alice OR (from:bob -is:retweet)`
    const q = compileQuery('from:alice OR from:bob -is:retweet');
    expect(q(repost, user('alice'))).toBe(true);
    expect(q(repost, user('bob'))).toBe(false);
    const tree = parseQuery('(from:a OR from:b) -is:retweet');
    expect(tree.alternatives).toHaveLength(1);
    expect(tree.alternatives[0]).toEqual([
      {
        type: 'group',
        negated: false,
        unclosed: false,
        alternatives: [
          [{ type: 'term', negated: false, operator: 'from', value: 'a' }],
          [{ type: 'term', negated: false, operator: 'from', value: 'b' }],
        ],
      },
      { type: 'term', negated: true, operator: 'is', value: 'retweeted' },
    ]);
    expect(parseQuery('(from:a').alternatives[0]![0]).toMatchObject({ unclosed: true });
    expect(parseQuery('from:a) x').unclosed).toBe(true);
  });
  it('reads quoted phrases as one term (query monitors)', () => {
    const q = compileQuery('"new release" OR launch -giveaway');
    expect(q(tweet('A New Release today'), user('x'))).toBe(true);
    expect(q(tweet('release new'), user('x'))).toBe(false);
    expect(q(tweet('launch giveaway'), user('x'))).toBe(false);
  });
});
