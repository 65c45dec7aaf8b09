/**
 * The fake X's filtered stream, written from X's API v2 documentation:
 *
 *   GET  /2/tweets/search/stream/rules   the rule set: `data` [{id, value, tag}], `meta` {sent, result_count}
 *   POST /2/tweets/search/stream/rules   `{add: [{value, tag}]}` or `{delete: {ids}}`, `?dry_run=true`;
 *                                         `meta.summary` {created, not_created, valid, invalid} or
 *                                         {deleted, not_deleted}; invalid rules and duplicates in `errors`
 *   GET  /2/tweets/search/stream         chunked, one JSON object per line ending in \r\n: `data`,
 *                                         `includes.users` (expansions=author_id), `matching_rules`
 *                                         [{id, tag}]; a bare \r\n keep-alive every `keepAliveMs`
 *                                         (X: 20 s); one connection: a second one gets 429
 *                                         TooManyConnections
 *
 * Rules understand the operators the poller writes, with X's semantics (query.ts: AND before OR,
 * parentheses, `-` negation): `from:<username>`, `is:retweet|reply|quote` and `lang:<code>`, as in
 * `(from:a OR from:b) -is:retweet (lang:de OR lang:en)`. As X documents, `is:` and `lang:` are
 * conjunction-required (a rule needs a positive `from:` or keyword), a negated group is refused and
 * the whole value counts toward the length limit. Keywords and `"phrases"` (query monitors' rules)
 * match as query.ts reads them; any other operator is an invalid rule here, so a poller writing
 * something new shows in the tests. A tweet posted to the fake's state (its
 * `'tweet'` event) is written to the connected stream at once when a rule matches it. Tests steer the
 * connection: `disconnect()` (X's operational-disconnect message, then the end of the response)
 * and `stall()` (the connection stays open but nothing, not even a keep-alive, is written; tweets
 * posted meanwhile are lost to the stream, as when X's side stalls).
 */
import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import { includes, send, tweetObject } from './format';
import { compileQuery, parseQuery, type CompiledQuery, type QueryNode } from './query';
import { readBody, type FakeXContext, type FakeXRoute } from './routes';
import { StreamSlot } from './streamSlot';
import type { FakeXTweet, FakeXUser } from './state';

export interface FakeStreamOptions {
  /** keep-alive interval; X: 20 000 ms */
  keepAliveMs?: number;
  /** X Pro: 1,000 rules of 1,024 characters */
  maxRules?: number;
  maxRuleLength?: number;
}

export interface FakeRule {
  id: string;
  value: string;
  tag?: string;
  /** the lower-cased usernames of its (positive) from: clauses */
  from: Set<string>;
  /** the rule as X applies it to a post */
  matches: CompiledQuery;
}

export interface FakeStream extends EventEmitter {
  routes: FakeXRoute[];
  rules(): FakeRule[];
  /** open stream connections (0 or 1) */
  connections(): number;
  /** connections accepted since the start */
  connects(): number;
  /** ends the open connection the way X does for an operational disconnect */
  disconnect(): void;
  /** writes nothing more on the open connection (no keep-alive, no tweet) until it closes */
  stall(): void;
  /** an outage: the open connection ends and connects get 503 until `outage(false)` */
  outage(on: boolean): void;
  /** tweets written to a stream */
  delivered(): number;
  /** posts looked at for `backfill_minutes` replays */
  replayed(): number;
}

const STREAM = '/2/tweets/search/stream';
const RULES = '/2/tweets/search/stream/rules';

const USERNAME = /^[a-z0-9_]{1,15}$/;

/** Why X would refuse this rule value (null: valid); fills `from` with its positive from: usernames. */
function ruleProblem(value: string, from: Set<string>): string | null {
  const root = parseQuery(value);
  let problem: string | null = null;
  let keywords = 0;
  const visit = (node: QueryNode): void => {
    if (node.type === 'group') {
      if (node.unclosed) problem ??= 'Unbalanced parentheses';
      if (node.negated) problem ??= 'Negated groups are not supported: negate each operator instead';
      for (const conj of node.alternatives) {
        if (conj.length === 0) problem ??= 'Empty clause';
        conj.forEach(visit);
      }
    } else if (node.operator === 'word') {
      if (/^[a-z]+:/.test(node.value)) problem ??= 'Unsupported operator';
      else if (!node.negated) keywords++;
    } else if (node.operator === 'from') {
      if (!USERNAME.test(node.value)) problem ??= 'Invalid username in from:';
      else if (!node.negated) from.add(node.value);
    }
  };
  visit(root);
  // is: and lang: are conjunction-required: a rule of only those (or only negations) is refused
  return (
    problem ??
    (from.size === 0 && keywords === 0 ? 'Rules must contain a standalone operator that is not negated' : null)
  );
}

const sent = () => new Date().toISOString();

function badBackfill(res: ServerResponse, value: string): true {
  send(res, 400, {
    errors: [
      {
        parameters: { backfill_minutes: [value] },
        message: `The \`backfill_minutes\` query parameter value [${value}] is not between 0 and 5`,
      },
    ],
    title: 'Invalid Request',
    detail: 'One or more parameters to your request was invalid.',
    type: 'https://api.twitter.com/2/problems/invalid-request',
  });
  return true;
}

/** `backfill_minutes`: the posts of the last minutes, oldest first, to the new connection; how many */
function replay(ctx: FakeXContext, minutes: number, write: (t: FakeXTweet, author: FakeXUser) => void): number {
  const from = Date.now() - minutes * 60_000;
  const missed = ctx.state.newestFirst((t) => Date.parse(t.created_at) >= from).reverse();
  for (const t of missed) {
    const author = ctx.state.users.get(t.author_id);
    if (author) write(t, author);
  }
  return missed.length;
}

/** The rule set and its three calls, as X answers them. */
class FakeRuleBook {
  readonly rules = new Map<string, FakeRule>();
  private nextRuleId = 1_700_000_000_000_000_000n;

  constructor(
    private readonly maxRules: number,
    private readonly maxRuleLength: number,
    private readonly changed: () => void,
  ) {}

  list(res: ServerResponse): void {
    const data = [...this.rules.values()].map((r) => ({ id: r.id, value: r.value, ...(r.tag ? { tag: r.tag } : {}) }));
    send(res, 200, { ...(data.length > 0 ? { data } : {}), meta: { sent: sent(), result_count: data.length } });
  }

  private check(add: { value?: unknown; tag?: unknown }[]): {
    errors: Record<string, unknown>[];
    valid: Omit<FakeRule, 'id'>[];
  } {
    const errors: Record<string, unknown>[] = [];
    const valid: Omit<FakeRule, 'id'>[] = [];
    for (const r of add) {
      const value = typeof r.value === 'string' ? r.value : '';
      const existing = [...this.rules.values()].find((x) => x.value === value);
      const from = new Set<string>();
      const problem =
        ruleProblem(value, from) ??
        (value.length > this.maxRuleLength ? `Rule exceeds maximum length of ${this.maxRuleLength}` : null);
      if (existing) {
        errors.push({
          value,
          id: existing.id,
          title: 'DuplicateRule',
          type: 'https://api.twitter.com/2/problems/duplicate-rules',
        });
      } else if (problem) {
        errors.push({
          value,
          details: [problem],
          title: 'Invalid Rule',
          type: 'https://api.twitter.com/2/problems/invalid-rules',
        });
      } else
        valid.push({ value, ...(typeof r.tag === 'string' ? { tag: r.tag } : {}), from, matches: compileQuery(value) });
    }
    return { errors, valid };
  }

  add(res: ServerResponse, add: { value?: unknown; tag?: unknown }[], dryRun: boolean): void {
    const { errors, valid } = this.check(add);
    if (errors.length === 0 && this.rules.size + valid.length > this.maxRules) {
      send(res, 400, {
        title: 'RulesCapExceeded',
        detail: `You have exceeded the maximum number of rules (${this.maxRules})`,
        type: 'https://api.twitter.com/2/problems/rule-cap',
      });
      return;
    }
    // X applies a batch only when every rule in it is valid
    const created = errors.length === 0 && !dryRun ? valid : [];
    const data = created.map((r) => {
      const rule: FakeRule = { id: String(this.nextRuleId++), ...r };
      this.rules.set(rule.id, rule);
      return { id: rule.id, value: rule.value, ...(rule.tag ? { tag: rule.tag } : {}) };
    });
    const summary = {
      created: data.length,
      not_created: add.length - data.length,
      valid: valid.length,
      invalid: errors.length,
    };
    send(res, 200, {
      ...(data.length > 0 ? { data } : {}),
      ...(errors.length > 0 ? { errors } : {}),
      meta: { sent: sent(), summary },
    });
    if (data.length > 0) this.changed();
  }

  delete(res: ServerResponse, ids: unknown[], dryRun: boolean): void {
    const errors: Record<string, unknown>[] = [];
    let deleted = 0;
    for (const id of ids) {
      if (typeof id === 'string' && this.rules.has(id)) {
        if (!dryRun) this.rules.delete(id);
        deleted++;
      } else errors.push({ parameters: { ids: [String(id)] }, message: 'Rule does not exist' });
    }
    const done = dryRun ? 0 : deleted;
    send(res, 200, {
      ...(errors.length > 0 ? { errors } : {}),
      meta: { sent: sent(), summary: { deleted: done, not_deleted: ids.length - done } },
    });
    if (done > 0) this.changed();
  }

  matching(tweet: FakeXTweet, author: FakeXUser): FakeRule[] {
    return [...this.rules.values()].filter((r) => r.matches(tweet, author));
  }
}

/** GET and POST /2/tweets/search/stream/rules over the rule book */
function rulesRouteOf(book: FakeRuleBook): FakeXRoute {
  return async (req, res, url, ctx) => {
    if (url.pathname !== RULES) return false;
    if (req.method !== 'GET' && req.method !== 'POST') return false;
    if (!ctx.limits.take('rules', res)) return true;
    if (req.method === 'GET') {
      book.list(res);
      return true;
    }
    const dryRun = url.searchParams.get('dry_run') === 'true';
    let body: { add?: unknown; delete?: { ids?: unknown } };
    try {
      body = JSON.parse(await readBody(req)) as typeof body;
    } catch {
      send(res, 400, {
        title: 'Invalid Request',
        detail: 'The request body is not valid JSON',
        type: 'https://api.twitter.com/2/problems/invalid-request',
      });
      return true;
    }
    if (Array.isArray(body.add) && body.add.length > 0) book.add(res, body.add as { value?: unknown }[], dryRun);
    else if (body.delete && Array.isArray(body.delete.ids) && body.delete.ids.length > 0)
      book.delete(res, body.delete.ids, dryRun);
    else
      send(res, 400, {
        errors: [{ message: 'Must specify one of add or delete with at least one entry' }],
        title: 'Invalid Request',
        detail: 'One or more parameters to your request was invalid.',
        type: 'https://api.twitter.com/2/problems/invalid-request',
      });
    return true;
  };
}

export function createFakeStream(options: FakeStreamOptions = {}): FakeStream {
  const keepAliveMs = options.keepAliveMs ?? 20_000;
  const emitter = new EventEmitter() as FakeStream;
  const book = new FakeRuleBook(options.maxRules ?? 1000, options.maxRuleLength ?? 1024, () => emitter.emit('rules'));
  const slot = new StreamSlot(keepAliveMs);
  let delivered = 0;
  let replayed = 0;

  const rulesRoute = rulesRouteOf(book);

  function write(tweet: FakeXTweet, author: FakeXUser, params: URLSearchParams): void {
    if (!slot.writable()) return;
    const matching = book.matching(tweet, author);
    if (matching.length === 0) return;
    const line = {
      data: tweetObject(tweet, params),
      ...(includes([tweet], params, () => author) ? { includes: includes([tweet], params, () => author) } : {}),
      matching_rules: matching.map((r) => ({ id: r.id, ...(r.tag ? { tag: r.tag } : {}) })),
    };
    slot.write(line);
    delivered++;
    emitter.emit('delivered', tweet.id);
  }

  const streamRoute: FakeXRoute = (req, res, url, ctx) => {
    if (url.pathname !== STREAM || req.method !== 'GET') return false;
    // a refused second connection is not counted against the connect window (family 'other')
    if (slot.busy(res)) return true;
    const backfill = url.searchParams.get('backfill_minutes');
    if (backfill !== null && !/^[1-5]$/.test(backfill)) return badBackfill(res, backfill);
    if (!ctx.limits.take('stream_connect', res)) return true;
    if (slot.unavailable(res)) return true;
    const onTweet = (tweet: FakeXTweet, author: FakeXUser) => write(tweet, author, url.searchParams);
    slot.accept(res, () => ctx.state.off('tweet', onTweet));
    if (backfill !== null) replayed += replay(ctx, Number(backfill), (t, a) => write(t, a, url.searchParams));
    ctx.state.on('tweet', onTweet);
    emitter.emit('connected');
    return true;
  };

  return Object.assign(emitter, {
    routes: [rulesRoute, streamRoute],
    rules: () => [...book.rules.values()],
    delivered: () => delivered,
    replayed: () => replayed,
    ...slot.controls(),
  });
}

/** The stream and rules routes for startFakeX({ routes }), with default options. */
export function streamRoutes(options: FakeStreamOptions = {}): FakeXRoute[] {
  return createFakeStream(options).routes;
}
