/**
 * The subset of X's search query and filtered-stream rule language the fake understands: clauses
 * joined by `OR`, groups in parentheses, each clause a conjunction of `from:<username>`,
 * `is:retweet|reply|quote`, `lang:<code>`, words and `"quoted phrases"` (case-insensitive
 * substring of the text), any of them negated by `-`. AND binds before OR (`a OR b c` is `a OR (b c)`), as X documents. Enough
 * for `from:a OR from:b ...` groups, the rule parts the poller appends
 * (`(from:a OR from:b) -is:retweet (lang:en OR lang:de)`), keywords and query monitors' rules.
 *
 * `parseQuery` gives the tree (the stream's rule check reads it), `compileQuery` the matcher.
 */
import type { FakeXTweet, FakeXUser } from './state';

/** X's limit on a search/recent query (Pro: 512 characters; Enterprise 4,096). */
export const FAKE_X_QUERY_MAX_LENGTH = 512;

export type CompiledQuery = (tweet: FakeXTweet, author: FakeXUser | undefined) => boolean;

/** one operand: `from:`, a known `is:` type, `lang:`, or anything else as a word */
interface QueryTerm {
  type: 'term';
  negated: boolean;
  operator: 'from' | 'is' | 'lang' | 'word';
  /** lower-cased; for `is:` X's referenced_tweets type */
  value: string;
}

/** alternatives (OR) of conjunctions (AND) */
export interface QueryGroup {
  type: 'group';
  negated: boolean;
  alternatives: QueryNode[][];
  /** its `)` was missing (the top level has none) */
  unclosed: boolean;
}

export type QueryNode = QueryTerm | QueryGroup;

const IS_TYPE: Record<string, 'retweeted' | 'replied_to' | 'quoted'> = {
  retweet: 'retweeted',
  reply: 'replied_to',
  quote: 'quoted',
};

function term(token: string): QueryTerm {
  const negated = token.startsWith('-') && token.length > 1;
  const t = negated ? token.slice(1) : token;
  const lower = t.toLowerCase();
  if (lower.startsWith('from:'))
    return { type: 'term', negated, operator: 'from', value: lower.slice(5).replace(/^@/, '') };
  if (lower.startsWith('is:') && IS_TYPE[lower.slice(3)])
    return { type: 'term', negated, operator: 'is', value: IS_TYPE[lower.slice(3)]! };
  if (lower.startsWith('lang:')) return { type: 'term', negated, operator: 'lang', value: lower.slice(5) };
  if (lower.length > 1 && lower.startsWith('"') && lower.endsWith('"'))
    return { type: 'term', negated, operator: 'word', value: lower.slice(1, -1) };
  return { type: 'term', negated, operator: 'word', value: lower };
}

/** expr := conj ('OR' conj)*; conj := atom+; atom := '-'? '(' expr ')' | operand */
export function parseQuery(query: string): QueryGroup {
  const tokens = query.match(/-?"[^"]*"|-?\(|\)|[^\s()]+/g) ?? [];
  let i = 0;
  function alternatives(): QueryNode[][] {
    const out = [conj()];
    while (tokens[i] === 'OR') {
      i++;
      out.push(conj());
    }
    return out;
  }
  function conj(): QueryNode[] {
    const all: QueryNode[] = [];
    while (i < tokens.length && tokens[i] !== 'OR' && tokens[i] !== ')') all.push(atom());
    return all;
  }
  function atom(): QueryNode {
    const token = tokens[i++]!;
    if (token !== '(' && token !== '-(') return term(token);
    const inner = alternatives();
    const unclosed = tokens[i] !== ')';
    if (!unclosed) i++;
    return { type: 'group', negated: token === '-(', alternatives: inner, unclosed };
  }
  const root: QueryGroup = { type: 'group', negated: false, alternatives: alternatives(), unclosed: false };
  // a `)` with no `(` ends the parse early: what follows is not read
  if (i < tokens.length) root.unclosed = true;
  return root;
}

function compileTerm(t: QueryTerm): CompiledQuery {
  switch (t.operator) {
    case 'from':
      return (_, author) => author !== undefined && !author.suspended && author.username.toLowerCase() === t.value;
    case 'is':
      return (tweet) => (tweet.referenced_tweets ?? []).some((r) => r.type === t.value);
    case 'lang':
      // a post X could not classify has no lang: it matches no lang: operator
      return (tweet) => tweet.lang?.toLowerCase() === t.value;
    case 'word':
      return (tweet) => tweet.text.toLowerCase().includes(t.value);
  }
}

function compileNode(node: QueryNode): CompiledQuery {
  let test: CompiledQuery;
  if (node.type === 'term') test = compileTerm(node);
  else {
    const alternatives = node.alternatives.map((conj) => conj.map(compileNode));
    test = (tweet, author) => alternatives.some((all) => all.every((a) => a(tweet, author)));
  }
  return node.negated ? (tweet, author) => !test(tweet, author) : test;
}

export function compileQuery(query: string): CompiledQuery {
  const root = parseQuery(query);
  const whole = compileNode(root);
  const empty = root.alternatives.every((conj) => conj.length === 0);
  return (tweet, author) => !empty && whole(tweet, author);
}
