/**
 * Query monitors' language: the subset of X's search / filtered-stream syntax that both sources
 * (X and the local store) honour the same way.
 *
 *   query  := or
 *   or     := and ( "OR" and )*
 *   and    := unary+                      (terms side by side: all must hold)
 *   unary  := "-"? atom                   (a leading "-" negates)
 *   atom   := "(" or ")" | "\"phrase\"" | word | from:USERNAME | lang:CODE | is:reply|retweet|quote
 *
 * Invariants a parsed query keeps (each refused on save with a message naming the part):
 * - 1..QUERY_LIMITS.maxLength characters after trimming, and so is its X rule (renderQuery, which
 *   spells the grouping out in parentheses): X's bound for a rule and a search query is 512;
 * - only the operators above; any other `name:value` (has:, url:, to:, ...), `#tag`, `@user`,
 *   `$cash` or an explicit `AND` is outside the subset;
 * - at most QUERY_LIMITS.maxDepth nested parentheses and QUERY_LIMITS.maxTerms terms;
 * - it cannot match every post: each way through it needs a word, a phrase or a `from:` that is
 *   not negated (`lang:` and `is:` only narrow, as on X where they are not standalone).
 *
 * Words and phrases compare as ./keywords.ts does (whole words, case folding, Unicode). No I/O.
 */
import { normalizeText, words } from './keywords';
import { postLang, type ReferenceType, type RulePost } from './rules';

export const QUERY_LIMITS = { maxLength: 512, maxDepth: 10, maxTerms: 50 } as const;

export class QueryError extends Error {
  override name = 'QueryError';
}

export const QUERY_POST_KINDS = ['reply', 'retweet', 'quote'] as const;
export type QueryPostKind = (typeof QUERY_POST_KINDS)[number];

export type QueryNode =
  | { kind: 'word'; text: string; tokens: string[] }
  | { kind: 'phrase'; text: string; tokens: string[] }
  | { kind: 'from'; username: string }
  | { kind: 'lang'; lang: string }
  | { kind: 'is'; is: QueryPostKind }
  | { kind: 'not'; node: QueryNode }
  | { kind: 'and'; nodes: QueryNode[] }
  | { kind: 'or'; nodes: QueryNode[] };

/** A post as a query sees it: the rule fields plus its author's username. */
export interface QueryPost extends RulePost {
  authorUsername: string;
}

const USERNAME_RE = /^[A-Za-z0-9_]{1,15}$/;
const LANG_RE = /^[a-z]{2,3}(-[a-z0-9]{2,8})?$/;
const OPERATOR_RE = /^([A-Za-z_]+):(.*)$/s;

type Token =
  | { t: 'open'; at: number }
  | { t: 'close'; at: number }
  | { t: 'or'; at: number }
  | { t: 'term'; at: number; negated: boolean; raw: string; quoted: boolean };

function shown(s: string): string {
  return s.length > 40 ? `${s.slice(0, 40)}…` : s;
}

function tokenize(q: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < q.length) {
    const c = q[i]!;
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    if (c === '(') {
      out.push({ t: 'open', at: i++ });
      continue;
    }
    if (c === ')') {
      out.push({ t: 'close', at: i++ });
      continue;
    }
    const at = i;
    let negated = false;
    if (c === '-') {
      negated = true;
      i++;
      if (i >= q.length || /\s/.test(q[i]!)) throw new QueryError(`"-" at position ${at + 1} negates nothing`);
      if (q[i] === '-') throw new QueryError(`"--" at position ${at + 1}: negate a term once`);
      if (q[i] === ')') throw new QueryError(`"-" at position ${at + 1} negates nothing`);
      if (q[i] === '(') {
        // a negated group: the marker term, then the group's tokens
        out.push({ t: 'term', at, negated: true, raw: '', quoted: false });
        continue;
      }
    }
    if (q[i] === '"') {
      const end = q.indexOf('"', i + 1);
      if (end < 0) throw new QueryError(`the quote at position ${i + 1} is never closed`);
      out.push({ t: 'term', at, negated, raw: q.slice(i + 1, end), quoted: true });
      i = end + 1;
      continue;
    }
    let j = i;
    while (j < q.length && !/[\s()"]/.test(q[j]!)) j++;
    const raw = q.slice(i, j);
    if (q[j] === '"') throw new QueryError(`a quote inside "${shown(raw)}" at position ${j + 1}; quote whole phrases`);
    i = j;
    if (!negated && raw === 'OR') out.push({ t: 'or', at });
    else out.push({ t: 'term', at, negated, raw, quoted: false });
  }
  return out;
}

function term(raw: string, quoted: boolean): QueryNode {
  if (quoted) {
    const tokens = words(raw);
    if (tokens.length === 0) throw new QueryError(`the phrase "${shown(raw)}" has no words`);
    return { kind: 'phrase', text: raw, tokens };
  }
  if (raw === 'AND') throw new QueryError('"AND" is not an operator: terms side by side must all match');
  const op = OPERATOR_RE.exec(raw);
  if (op) {
    const name = op[1]!.toLowerCase();
    const value = op[2]!;
    if (name === 'from') {
      const u = value.replace(/^@/, '');
      if (!USERNAME_RE.test(u))
        throw new QueryError(`"${shown(raw)}": from: needs a username (1-15 letters, digits, _)`);
      return { kind: 'from', username: u };
    }
    if (name === 'lang') {
      const l = value.toLowerCase();
      if (!LANG_RE.test(l)) throw new QueryError(`"${shown(raw)}": lang: needs a language code (like en, de, pt)`);
      return { kind: 'lang', lang: l };
    }
    if (name === 'is') {
      const k = value.toLowerCase();
      if (!(QUERY_POST_KINDS as readonly string[]).includes(k)) {
        throw new QueryError(`"${shown(raw)}": is: takes ${QUERY_POST_KINDS.join(', ')}`);
      }
      return { kind: 'is', is: k as QueryPostKind };
    }
    throw new QueryError(
      `unknown operator "${shown(name)}:" in "${shown(raw)}"; the operators are from:, lang:, is:reply|retweet|quote`,
    );
  }
  if (/^[#@$]/.test(raw)) {
    throw new QueryError(
      `"${shown(raw)}": #hashtag, @mention and $cashtag operators are not supported; write the word`,
    );
  }
  const tokens = words(raw);
  if (tokens.length === 0) throw new QueryError(`"${shown(raw)}" has no letters or digits to match`);
  // a word that splits into several tokens (don't, e-mail) is matched as the phrase it reads as
  return tokens.length === 1 ? { kind: 'word', text: raw, tokens } : { kind: 'phrase', text: raw, tokens };
}

class Parser {
  private pos = 0;
  private depth = 0;
  private terms = 0;
  constructor(private readonly tokens: Token[]) {}

  parse(): QueryNode {
    const node = this.or();
    const next = this.tokens[this.pos];
    if (next) throw new QueryError(`")" at position ${next.at + 1} has no "(" before it`);
    return node;
  }

  private or(): QueryNode {
    const nodes = [this.and()];
    while (this.tokens[this.pos]?.t === 'or') {
      const at = this.tokens[this.pos]!.at;
      this.pos++;
      const next = this.tokens[this.pos];
      if (!next || next.t === 'close' || next.t === 'or')
        throw new QueryError(`"OR" at position ${at + 1} has nothing after it`);
      nodes.push(this.and());
    }
    return nodes.length === 1 ? nodes[0]! : { kind: 'or', nodes };
  }

  private and(): QueryNode {
    const nodes: QueryNode[] = [];
    for (let tok = this.tokens[this.pos]; tok && tok.t !== 'or' && tok.t !== 'close'; tok = this.tokens[this.pos]) {
      nodes.push(this.unary());
    }
    if (nodes.length === 0) {
      const tok = this.tokens[this.pos];
      if (tok?.t === 'or') throw new QueryError(`"OR" at position ${tok.at + 1} has nothing before it`);
      throw new QueryError('the query is empty');
    }
    return nodes.length === 1 ? nodes[0]! : { kind: 'and', nodes };
  }

  private unary(): QueryNode {
    const tok = this.tokens[this.pos]!;
    if (tok.t === 'open') return this.group(tok.at);
    if (tok.t !== 'term') throw new QueryError(`unexpected token at position ${tok.at + 1}`);
    this.pos++;
    if (tok.raw === '' && !tok.quoted) {
      const open = this.tokens[this.pos]!;
      return { kind: 'not', node: this.group(open.at) };
    }
    if (++this.terms > QUERY_LIMITS.maxTerms) throw new QueryError(`at most ${QUERY_LIMITS.maxTerms} terms`);
    const node = term(tok.raw, tok.quoted);
    return tok.negated ? { kind: 'not', node } : node;
  }

  private group(at: number): QueryNode {
    this.pos++;
    if (++this.depth > QUERY_LIMITS.maxDepth)
      throw new QueryError(`at most ${QUERY_LIMITS.maxDepth} nested parentheses`);
    if (this.tokens[this.pos]?.t === 'close') throw new QueryError(`"()" at position ${at + 1} is empty`);
    const inner = this.or();
    if (this.tokens[this.pos]?.t !== 'close') throw new QueryError(`"(" at position ${at + 1} is never closed`);
    this.pos++;
    this.depth--;
    return inner;
  }
}

/** Whether every post this node matches must carry a positive word, phrase or author. */
function constrains(node: QueryNode): boolean {
  switch (node.kind) {
    case 'word':
    case 'phrase':
    case 'from':
      return true;
    case 'lang':
    case 'is':
    case 'not':
      return false;
    case 'and':
      return node.nodes.some(constrains);
    case 'or':
      return node.nodes.every(constrains);
  }
}

/** The query as X reads it (one line, canonical spacing); what a stream rule or search carries. */
export function renderQuery(node: QueryNode): string {
  switch (node.kind) {
    case 'word':
      return node.text;
    case 'phrase':
      return `"${node.text.replace(/"/g, '')}"`;
    case 'from':
      return `from:${node.username}`;
    case 'lang':
      return `lang:${node.lang}`;
    case 'is':
      return `is:${node.is}`;
    case 'not':
      return `-${node.node.kind === 'and' || node.node.kind === 'or' ? `(${renderQuery(node.node)})` : renderQuery(node.node)}`;
    case 'and':
      return node.nodes.map((n) => (n.kind === 'or' ? `(${renderQuery(n)})` : renderQuery(n))).join(' ');
    case 'or':
      return node.nodes.map((n) => (n.kind === 'and' ? `(${renderQuery(n)})` : renderQuery(n))).join(' OR ');
  }
}

export interface ParsedQuery {
  /** the query as saved: trimmed, as the user wrote it */
  text: string;
  /** the same query in X's canonical form */
  rule: string;
  ast: QueryNode;
}

/** Validates a query for saving; throws QueryError naming the part that is refused. */
export function parseQuery(input: unknown): ParsedQuery {
  if (typeof input !== 'string') throw new QueryError('the query must be a string');
  const text = input.trim();
  if (text === '') throw new QueryError('the query is empty');
  if (text.length > QUERY_LIMITS.maxLength) {
    throw new QueryError(`the query is ${text.length} characters; at most ${QUERY_LIMITS.maxLength}`);
  }
  if (
    [...text].some((ch) => (ch.charCodeAt(0) < 0x20 || ch === '\u007f') && ch !== '\n' && ch !== '\t' && ch !== '\r')
  ) {
    throw new QueryError('the query contains control characters');
  }
  const ast = new Parser(tokenize(text)).parse();
  if (!constrains(ast)) {
    throw new QueryError(
      'the query would match every post: each alternative needs a word, a "phrase" or from: that is not negated ' +
        '(lang: and is: only narrow)',
    );
  }
  const rule = renderQuery(ast);
  if (rule.length > QUERY_LIMITS.maxLength) {
    throw new QueryError(
      `the query written as an X rule (with its grouping spelled out) is ${rule.length} characters; at most ${QUERY_LIMITS.maxLength}`,
    );
  }
  return { text, rule, ast };
}

const KIND_OF_REFERENCE: Record<ReferenceType, QueryPostKind> = {
  replied_to: 'reply',
  retweeted: 'retweet',
  quoted: 'quote',
};

/** A post prepared once for every query it is tested against (tokenised once). */
export interface PreparedQueryPost {
  words: string[];
  lang: string | null;
  kinds: ReadonlySet<QueryPostKind>;
  author: string;
}

export function prepareQueryPost(post: QueryPost): PreparedQueryPost {
  return {
    words: words(post.text),
    lang: postLang(post.lang),
    kinds: new Set(post.referencedTweets.map((r) => KIND_OF_REFERENCE[r.type])),
    author: normalizeText(post.authorUsername),
  };
}

function hasPhrase(textWords: readonly string[], tokens: readonly string[]): boolean {
  outer: for (let i = 0; i + tokens.length <= textWords.length; i++) {
    for (let k = 0; k < tokens.length; k++) if (textWords[i + k] !== tokens[k]) continue outer;
    return true;
  }
  return false;
}

/** Whether the post matches the query (a post without a language never matches `lang:`). */
export function matchesQuery(node: QueryNode, post: PreparedQueryPost): boolean {
  switch (node.kind) {
    case 'word':
    case 'phrase':
      return hasPhrase(post.words, node.tokens);
    case 'from':
      return post.author === node.username.toLowerCase();
    case 'lang':
      return post.lang === node.lang;
    case 'is':
      return post.kinds.has(node.is);
    case 'not':
      return !matchesQuery(node.node, post);
    case 'and':
      return node.nodes.every((n) => matchesQuery(n, post));
    case 'or':
      return node.nodes.some((n) => matchesQuery(n, post));
  }
}

/**
 * What a source search for the query's candidates asks (the monitor preview): its words and
 * phrases that are not negated, as one OR search every source reads the same way, and its
 * `from:` authors that are not negated. Every post the query matches carries one of them (the
 * query cannot match every post); the caller marks each candidate with matchesQuery.
 */
export function queryCandidates(node: QueryNode): { search: string | null; authors: string[] } {
  const terms = new Set<string>();
  const authors = new Set<string>();
  const walk = (n: QueryNode): void => {
    switch (n.kind) {
      case 'word':
        terms.add(n.tokens[0]!);
        return;
      case 'phrase':
        terms.add(`"${n.tokens.join(' ')}"`);
        return;
      case 'from':
        authors.add(n.username);
        return;
      case 'lang':
      case 'is':
      case 'not':
        return;
      case 'and':
      case 'or':
        n.nodes.forEach(walk);
    }
  };
  walk(node);
  return { search: terms.size > 0 ? [...terms].join(' OR ') : null, authors: [...authors] };
}
