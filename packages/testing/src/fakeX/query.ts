/**
 * The subset of X's search query language the fake understands: clauses joined by `OR`, groups in
 * parentheses, each clause a conjunction of `from:<username>`, `is:retweet|reply|quote`,
 * `lang:<code>` and words (case-insensitive substring of the text), any of them negated by `-`.
 * Enough for `from:a OR from:b ...` groups, the rule parts the poller appends
 * (`(from:a OR from:b) -is:retweet (lang:en OR lang:de)`) and keywords.
 */
import type { FakeXTweet, FakeXUser } from './state';

/** X's limit on a search/recent query (Pro: 512 characters; Enterprise 4,096). */
export const FAKE_X_QUERY_MAX_LENGTH = 512;

export type CompiledQuery = (tweet: FakeXTweet, author: FakeXUser | undefined) => boolean;

const IS_TYPE: Record<string, 'retweeted' | 'replied_to' | 'quoted'> = {
  retweet: 'retweeted',
  reply: 'replied_to',
  quote: 'quoted',
};

function operand(token: string): CompiledQuery {
  const negate = token.startsWith('-') && token.length > 1;
  const t = negate ? token.slice(1) : token;
  let test: CompiledQuery;
  if (/^from:/i.test(t)) {
    const username = t.slice(5).replace(/^@/, '').toLowerCase();
    test = (_, author) => author !== undefined && !author.suspended && author.username.toLowerCase() === username;
  } else if (/^is:/i.test(t) && IS_TYPE[t.slice(3).toLowerCase()]) {
    const type = IS_TYPE[t.slice(3).toLowerCase()]!;
    test = (tweet) => (tweet.referenced_tweets ?? []).some((r) => r.type === type);
  } else if (/^lang:/i.test(t)) {
    const lang = t.slice(5).toLowerCase();
    test = (tweet) => tweet.lang?.toLowerCase() === lang;
  } else {
    const word = t.toLowerCase();
    test = (tweet) => tweet.text.toLowerCase().includes(word);
  }
  return negate ? (tweet, author) => !test(tweet, author) : test;
}

/** expr := conj ('OR' conj)*; conj := atom+; atom := '-'? '(' expr ')' | operand */
export function compileQuery(query: string): CompiledQuery {
  const tokens = query.match(/-?\(|\)|[^\s()]+/g) ?? [];
  let i = 0;
  function expr(): CompiledQuery {
    const alternatives = [conj()];
    while (tokens[i] === 'OR') {
      i++;
      alternatives.push(conj());
    }
    return (tweet, author) => alternatives.some((a) => a(tweet, author));
  }
  function conj(): CompiledQuery {
    const all: CompiledQuery[] = [];
    while (i < tokens.length && tokens[i] !== 'OR' && tokens[i] !== ')') all.push(atom());
    return (tweet, author) => all.every((a) => a(tweet, author));
  }
  function atom(): CompiledQuery {
    const token = tokens[i++]!;
    if (token !== '(' && token !== '-(') return operand(token);
    const inner = expr();
    if (tokens[i] === ')') i++;
    return token === '-(' ? (tweet, author) => !inner(tweet, author) : inner;
  }
  const whole = expr();
  return (tweet, author) => tokens.length > 0 && whole(tweet, author);
}
