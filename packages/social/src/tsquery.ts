/**
 * The tree of a tsquery as PostgreSQL prints it (`websearch_to_tsquery(...)::text`), and the
 * driver terms the local search walks (packages/social/README.md, "Search"): a set of lexemes such
 * that every match contains at least one of them.
 *
 * Printed form: lexemes quoted ('x', a quote doubled, a backslash escaped), optionally followed by
 * `:` and weights or `*` (prefix); operators `!` (not), `<->` / `<N>` (followed by), `&`, `|`, in
 * that order of precedence; parentheses where the precedence needs them.
 */
export type TsNode =
  | { kind: 'term'; lexeme: string; prefix: boolean; weighted: boolean }
  | { kind: 'not'; arg: TsNode }
  | { kind: 'and' | 'phrase' | 'or'; args: TsNode[] };

export class TsQueryParseError extends Error {
  override name = 'TsQueryParseError';
}

/** Parses PostgreSQL's text form of a tsquery; null for the empty query (no lexemes). */
export function parseTsQuery(text: string): TsNode | null {
  let i = 0;
  const skip = () => {
    while (text[i] === ' ') i++;
  };
  const fail = (what: string): never => {
    throw new TsQueryParseError(`tsquery ${JSON.stringify(text)}: ${what} at ${i}`);
  };
  const term = (): TsNode => {
    i++; // opening quote
    let lexeme = '';
    for (;;) {
      const ch = text[i];
      if (ch === undefined) return fail('unterminated lexeme');
      if (ch === "'" && text[i + 1] === "'") {
        lexeme += "'";
        i += 2;
      } else if (ch === "'") {
        i++;
        break;
      } else if (ch === '\\' && i + 1 < text.length) {
        lexeme += text[i + 1];
        i += 2;
      } else {
        lexeme += ch;
        i++;
      }
    }
    let prefix = false;
    let weighted = false;
    if (text[i] === ':') {
      i++;
      while (/[*A-Da-d]/.test(text[i] ?? '')) {
        if (text[i] === '*') prefix = true;
        else weighted = true;
        i++;
      }
    }
    return { kind: 'term', lexeme, prefix, weighted };
  };
  const unary = (): TsNode => {
    skip();
    const ch = text[i];
    if (ch === '!') {
      i++;
      return { kind: 'not', arg: unary() };
    }
    if (ch === '(') {
      i++;
      const inner = or();
      skip();
      if (text[i] !== ')') fail('expected )');
      i++;
      return inner;
    }
    if (ch === "'") return term();
    return fail('expected a lexeme');
  };
  const binary = (kind: 'or' | 'and' | 'phrase', operand: () => TsNode, op: () => boolean) => (): TsNode => {
    const args = [operand()];
    for (;;) {
      skip();
      if (!op()) break;
      args.push(operand());
    }
    return args.length === 1 ? args[0]! : { kind, args };
  };
  const phrase = binary('phrase', unary, () => {
    const m = /^<(-|[0-9]+)>/.exec(text.slice(i));
    if (m) i += m[0].length;
    return m !== null;
  });
  const and = binary('and', phrase, () => (text[i] === '&' ? (i++, true) : false));
  const or = binary('or', and, () => (text[i] === '|' ? (i++, true) : false));
  skip();
  if (i >= text.length) return null;
  const tree = or();
  skip();
  if (i < text.length) fail('unexpected text');
  return tree;
}

/** True when the postings of the query's lexemes are exactly its matches: a term, or terms joined by `|`. */
export function isExact(node: TsNode): boolean {
  if (node.kind === 'term') return !node.prefix && !node.weighted;
  return node.kind === 'or' && node.args.every(isExact);
}

/** Lexemes the query requires somewhere (not under `!`): the ones whose frequency may decide the drivers. */
export function positiveLexemes(node: TsNode): string[] {
  if (node.kind === 'term') return node.prefix ? [] : [node.lexeme];
  if (node.kind === 'not') return [];
  return [...new Set(node.args.flatMap(positiveLexemes))];
}

/** True when some `&` or phrase has more than one child that could drive: then frequencies choose. */
export function needsChoice(node: TsNode): boolean {
  if (node.kind === 'term' || node.kind === 'not') return false;
  if (node.kind !== 'or' && node.args.filter((a) => drivers(a, () => 0) !== null).length > 1) return true;
  return node.args.some(needsChoice);
}

/**
 * Driver lexemes: every tweet the query matches contains at least one of them; the cheapest such
 * set by `count` (postings of a lexeme). Null when there is none (a query that matches on an
 * absence, like `-word` alone or `a or -b`).
 */
export function drivers(node: TsNode, count: (lexeme: string) => number): { terms: string[]; cost: number } | null {
  switch (node.kind) {
    case 'term':
      return node.prefix ? null : { terms: [node.lexeme], cost: count(node.lexeme) };
    case 'not':
      return null;
    case 'or': {
      const parts = node.args.map((a) => drivers(a, count));
      if (parts.some((p) => p === null)) return null;
      const terms = [...new Set(parts.flatMap((p) => p!.terms))];
      return { terms, cost: terms.reduce((s, t) => s + count(t), 0) };
    }
    case 'and':
    case 'phrase': {
      let best: { terms: string[]; cost: number } | null = null;
      for (const a of node.args) {
        const d = drivers(a, count);
        if (d && (best === null || d.cost < best.cost)) best = d;
      }
      return best;
    }
  }
}
