/**
 * The subset of X's search query language the fake understands: clauses joined by `OR`
 * (optionally in parentheses), each a conjunction of `from:<username>`, `-word` and words
 * (case-insensitive substring of the text). Enough for `from:a OR from:b ...` groups and keywords.
 */
import type { FakeXTweet, FakeXUser } from './state';

/** X's limit on a search/recent query (Pro: 512 characters; Enterprise 4,096). */
export const FAKE_X_QUERY_MAX_LENGTH = 512;

type Term = { kind: 'from'; username: string } | { kind: 'word'; word: string; negate: boolean };

export type CompiledQuery = (tweet: FakeXTweet, author: FakeXUser | undefined) => boolean;

function strip(q: string): string {
  let s = q.trim();
  while (s.startsWith('(') && s.endsWith(')')) s = s.slice(1, -1).trim();
  return s;
}

function term(token: string): Term {
  const t = token.replace(/^\(+|\)+$/g, '');
  if (/^from:/i.test(t)) return { kind: 'from', username: t.slice(5).replace(/^@/, '').toLowerCase() };
  if (t.startsWith('-') && t.length > 1) return { kind: 'word', word: t.slice(1).toLowerCase(), negate: true };
  return { kind: 'word', word: t.toLowerCase(), negate: false };
}

export function compileQuery(query: string): CompiledQuery {
  const clauses = strip(query)
    .split(/\s+OR\s+/)
    .map((c) => strip(c).split(/\s+/).filter(Boolean).map(term));
  return (tweet, author) =>
    clauses.some((terms) =>
      terms.every((x) =>
        x.kind === 'from'
          ? author !== undefined && !author.suspended && author.username.toLowerCase() === x.username
          : tweet.text.toLowerCase().includes(x.word) !== x.negate,
      ),
    );
}
