/**
 * Local-store benchmark: every read-api and poller query of the `local` social source
 * at STORE_ROWS tweets (default 10,000,000) over 1,000 users, one of whom wrote a fifth of them.
 *
 * The data set is generated inside PostgreSQL (generate_series), in its own database that is
 * dropped at the end. For the load the tweets table is unlogged (it stays so: a throwaway data set
 * needs no WAL, and reads are the same) and its indexes and foreign key are dropped; afterwards
 * they are rebuilt from the exact definitions the migrations created, then VACUUM ANALYZE. Rows carry synthetic, increasing writer transaction ids
 * (xid8, all below the current horizon, as if written by many past transactions).
 *
 * Each query runs through the real source (Prisma over the pg adapter, as read-api and the poller
 * call it, so the figures include the client's round trip), after a warm-up, STORE_RUNS (50) times,
 * in STORE_ROUNDS (3) rounds that alternate the order; each figure is the median of the rounds'
 * p99 (nearest rank: with 50 runs, the slowest), since the shared VM swings. Two figures per query:
 * the database's own time for the exact statements the call sends (EXPLAIN ANALYZE planning +
 * execution; any sequential scan in a plan fails the bench) — the last line — and the end-to-end
 * call, printed on the line before it, which on a loaded 2-core VM mostly measures scheduling.
 *   timeline       the heavy user's timeline, 20 per page: the first page and a page deep in it
 *   since          pollTweets of the heavy user and of an ordinary one, from a position 20 tweets back
 *   search_common  "launch" (in 10% of tweets), 20 per page: first page and a page after a cursor
 *   search_rare    "zebrafish" (in 10 tweets)
 * and, on the line before the end-to-end line (not in the last line): "ripple" (1 %), "w17" (~0.07 %,
 * first page / after a cursor) and queries of several words (MULTI), all through the search
 * postings (social_tweet_terms, written in one statement during the build with the trigger off).
 * STORE_KEEP=1 keeps the database; STORE_DB=<name> measures a kept one without building.
 * Last line: `rows <n> timeline_p99_ms <a> since_p99_ms <b> search_common_p99_ms <c> search_rare_p99_ms <d>`.
 * Target at 10 M rows: every p99 ≤ 5 ms. Run: `pnpm bench:store` (STORE_ROWS=1000000 for a quick run).
 */
import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { createDbClient, ensureDatabase, migrate, Prisma, type Db } from '../packages/db/src';
import { createLocalSource, type SocialSource } from '../packages/social/src';
import { databaseUrl, dropDatabase, postgresAdminUrl } from './lib/services';
import { clockLog } from './lib/numbers';

const ROWS = Number(process.env.STORE_ROWS ?? 10_000_000);
const RUNS = Number(process.env.STORE_RUNS ?? 50);
const ROUNDS = Number(process.env.STORE_ROUNDS ?? 3);
const USERS = 1000;
const X_EPOCH = 1288834974657n;

function p99(samples: number[]): number {
  const s = [...samples].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(s.length * 0.99) - 1)]!;
}

const log = clockLog;

/** Builds the data set in `c` (a connection to the bench database). */
async function build(c: Client): Promise<void> {
  // the database's 15 s query timeout (packages/db/src/settings.ts) is for the services
  await c.query('SET statement_timeout = 0');
  await c.query(`SET maintenance_work_mem = '512MB'`);
  await c.query(`SET max_parallel_maintenance_workers = 1`);
  // synthetic writer transactions: increasing, all below the horizon (visible to every snapshot)
  const { rows: cur } = await c.query<{ xid: string }>('SELECT pg_current_xact_id()::text AS xid');
  const room = Math.max(1, Number(cur[0]!.xid) - 1000);
  const perXid = Math.max(1, Math.ceil(ROWS / room));
  const { rows: defs } = await c.query<{ indexname: string; indexdef: string }>(
    `SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'social_tweets' AND indexname <> 'social_tweets_pkey'`,
  );
  await c.query('ALTER TABLE social_tweets DROP CONSTRAINT social_tweets_author_id_fkey');
  for (const d of defs) await c.query(`DROP INDEX "${d.indexname}"`);
  await c.query('ALTER TABLE social_tweets DROP CONSTRAINT social_tweets_pkey');
  await c.query('ALTER TABLE social_tweets SET UNLOGGED');
  // the search postings: written in one statement after the tweets (the trigger would write them
  // row by row), their primary key built afterwards
  await c.query('ALTER TABLE social_tweets DISABLE TRIGGER social_tweets_terms_sync');
  await c.query('ALTER TABLE social_tweet_terms DROP CONSTRAINT social_tweet_terms_pkey');
  await c.query('ALTER TABLE social_tweet_terms SET UNLOGGED');

  // user 1 is the heavy one; the others are user 2..1000
  await c.query(
    `INSERT INTO social_users (id, username, username_key, name, tweet_count, created_at)
     SELECT u, 'user_' || u, 'user_' || u, 'User ' || u, 0, now() - interval '3 years' FROM generate_series(1, $1) u`,
    [USERS],
  );
  // one tweet every 50 ms ending now; ids are snowflakes of created_at (sequence in the low bits)
  const t0 = Date.now();
  const now = BigInt(t0);
  await c.query(
    `INSERT INTO social_tweets (id, author_id, text, lang, created_at, xid)
     SELECT ((($2::bigint - (($1 - i) * 50)) - $3::bigint) << 22) + (i % 4096),
            CASE WHEN i % 5 = 0 THEN 1 ELSE 2 + (hashint4(i)::bigint & 2147483647) % ($4 - 1) END,
            'tweet w' || (hashint4(i * 3)::bigint & 4095) || ' w' || (hashint4(i * 7)::bigint & 4095)
              || ' w' || (hashint4(i * 11)::bigint & 4095)
              || CASE WHEN i % 10 = 3 THEN ' launch' ELSE '' END
              || CASE WHEN i % 100 = 41 THEN ' ripple' ELSE '' END
              || CASE WHEN i % ($1 / 10) = 777 THEN ' zebrafish' ELSE '' END,
            'en',
            to_timestamp(($2::bigint - ($1 - i) * 50) / 1000.0),
            (1 + i / $5)::text::xid8
     FROM generate_series(1, $1) i`,
    [ROWS, String(now), String(X_EPOCH), USERS, perXid],
  );
  log(`inserted ${ROWS} tweets in ${((Date.now() - t0) / 1000).toFixed(0)} s; writing the search postings`);
  const t1 = Date.now();
  await c.query(
    `INSERT INTO social_tweet_terms (term, created_at, tweet_id)
     SELECT x.term, t.created_at, t.id FROM social_tweets t CROSS JOIN LATERAL unnest(tsvector_to_array(t.search)) AS x(term)`,
  );
  await c.query(
    'ALTER TABLE social_tweet_terms ADD CONSTRAINT social_tweet_terms_pkey PRIMARY KEY (term, created_at, tweet_id)',
  );
  await c.query('ALTER TABLE social_tweets ENABLE TRIGGER social_tweets_terms_sync');
  log(`search postings in ${((Date.now() - t1) / 1000).toFixed(0)} s; building indexes`);
  await c.query('ALTER TABLE social_tweets ADD CONSTRAINT social_tweets_pkey PRIMARY KEY (id)');
  for (const d of defs) {
    const t = Date.now();
    await c.query(d.indexdef);
    log(`${d.indexname} in ${((Date.now() - t) / 1000).toFixed(0)} s`);
  }
  await c.query(
    `ALTER TABLE social_tweets ADD CONSTRAINT social_tweets_author_id_fkey FOREIGN KEY (author_id) REFERENCES social_users(id) ON DELETE CASCADE ON UPDATE CASCADE`,
  );
  await c.query(
    `UPDATE social_users u SET tweet_count = n FROM (SELECT author_id, count(*) AS n FROM social_tweets GROUP BY author_id) s WHERE s.author_id = u.id`,
  );
  await c.query('VACUUM ANALYZE social_tweets');
  await c.query('VACUUM ANALYZE social_tweet_terms');
  await c.query('VACUUM ANALYZE social_users');
}

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  Plans?: PlanNode[];
}

/** Tables a plan reads with a sequential scan (none may appear: every query is index-bound). */
function seqScans(node: PlanNode): string[] {
  const own = node['Node Type'] === 'Seq Scan' ? [node['Relation Name'] ?? '?'] : [];
  return [...own, ...(node.Plans ?? []).flatMap(seqScans)];
}

/** p99 of `runs` calls of op; op returns its own duration (database time) or nothing (timed here). */
async function measure(name: string, runs: number, op: (i: number) => Promise<unknown>): Promise<number> {
  for (let i = 0; i < 5; i++) await op(i); // warm-up
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    const own = await op(i);
    samples.push(typeof own === 'number' ? own : performance.now() - t);
  }
  const sorted = [...samples].sort((a, b) => a - b);
  const v = p99(samples);
  log(`${name}: p50 ${sorted[Math.floor(sorted.length / 2)]!.toFixed(2)} ms p99 ${v.toFixed(2)} ms (${runs} runs)`);
  return v;
}

/**
 * Queries of several words: "w17 launch" (and: both terms are counted, w17, the rarer, drives; 1 in
 * 10 of its tweets has launch), "launch zebrafish" (and: zebrafish drives; no tweet has both),
 * "zebrafish or w17" (or: the postings of both, merged).
 */
const MULTI = ['w17 launch', 'launch zebrafish', 'zebrafish or w17'];

async function positionBack(c: Client, authorId: number, back: number): Promise<string> {
  const { rows } = await c.query<{ xid: string; id: string }>(
    `SELECT t.xid::text AS xid, t.id::text AS id FROM social_tweets t WHERE t.author_id = $1 ORDER BY t.xid DESC, t.id DESC OFFSET $2 LIMIT 1`,
    [authorId, back],
  );
  return `l.${rows[0]!.xid}.${rows[0]!.id}`;
}

type Key = 'timeline' | 'since' | 'common' | 'mid1' | 'mid2' | 'multi' | 'rare';
type Ops = Record<Key, [string, (i: number) => Promise<void>]>;

/** cursors and positions the queries start from, and the expected first page of each several-words query */
interface Fixtures {
  cursor: string;
  searchCursor: string;
  heavyAt: string;
  ordinaryAt: string;
  firstPage: Map<string, number>;
}

async function fixtures(c: Client): Promise<Fixtures> {
  // a cursor about half way through the heavy user's timeline
  const { rows: mid } = await c.query<{ ms: string; id: string }>(
    `SELECT (extract(epoch FROM t.created_at) * 1000)::bigint::text AS ms, t.id::text AS id
     FROM social_tweets t WHERE t.author_id = 1 ORDER BY t.created_at DESC, t.id DESC OFFSET $1 LIMIT 1`,
    [Math.floor(ROWS / 10)],
  );
  // the first page's size of each several-words query, straight from the table (GIN index)
  const firstPage = new Map<string, number>();
  for (const q of MULTI) {
    const { rows } = await c.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM (SELECT 1 FROM social_tweets WHERE search @@ websearch_to_tsquery('simple', $1) LIMIT 20) s`,
      [q],
    );
    firstPage.set(q, rows[0]!.n);
  }
  return {
    cursor: Buffer.from(`tl.${mid[0]!.ms}.${mid[0]!.id}`).toString('base64url'),
    searchCursor: Buffer.from(`sr.${mid[0]!.ms}.${mid[0]!.id}`).toString('base64url'),
    heavyAt: await positionBack(c, 1, 20),
    ordinaryAt: await positionBack(c, 500, 20),
    firstPage,
  };
}

/** the measured calls: a name and the call (its variant chosen by i), each checking what it got */
function buildOps(source: SocialSource, fx: Fixtures): Ops {
  const heavy = 'user_1';
  const notBefore = new Date(0);
  const search = async (q: string, cursor: string | undefined, expected: number, what: string) => {
    const page = await source.search(q, { limit: 20, cursor });
    if (page.items.length !== expected) throw new Error(`${what}: ${page.items.length} matches, expected ${expected}`);
  };
  return {
    timeline: [
      'timeline (heavy user, first page / deep page)',
      async (i) => {
        const page = await source.getUserTimeline(heavy, { limit: 20, cursor: i % 2 ? fx.cursor : undefined });
        if (page?.items.length !== 20) throw new Error('timeline: short page');
      },
    ],
    since: [
      'since (pollTweets, heavy / ordinary user)',
      async (i) => {
        const page = await source.pollTweets(i % 2 ? 'user_500' : heavy, {
          position: i % 2 ? fx.ordinaryAt : fx.heavyAt,
          notBefore,
          limit: 100,
          firstPage: true,
        });
        if (page?.tweets.length !== 20) throw new Error(`since: ${page?.tweets.length} tweets, expected 20`);
      },
    ],
    common: [
      'search common ("launch", first page / after a cursor)',
      (i) => search('launch', i % 2 ? fx.searchCursor : undefined, 20, 'search common'),
    ],
    mid1: [
      'search middling ("ripple", 1% of tweets; not in the last line)',
      () => search('ripple', undefined, 20, 'search middling'),
    ],
    mid2: [
      'search middling ("w17", ~0.07% of tweets, first page / after a cursor; not in the last line)',
      (i) => search('w17', i % 2 ? fx.searchCursor : undefined, 20, 'search middling'),
    ],
    multi: [
      'search several words ("w17 launch", "launch zebrafish", "zebrafish or w17"; not in the last line)',
      (i) => {
        const q = MULTI[i % MULTI.length]!;
        return search(q, undefined, fx.firstPage.get(q)!, `search ${q}`);
      },
    ],
    rare: ['search rare ("zebrafish", 10 matches)', () => search('zebrafish', undefined, 10, 'search rare')],
  };
}

const variants = (key: string) => (key === 'multi' ? MULTI.length : 2);

/**
 * The exact statements each call sends (captured once per variant through a spy on $queryRaw),
 * after one call of each, so that what is captured is the steady state (the query's parse is cached).
 */
async function captureStatements(ops: Ops, captured: Prisma.Sql[]): Promise<Record<string, Prisma.Sql[][]>> {
  const statements: Record<string, Prisma.Sql[][]> = {};
  for (const key of Object.keys(ops) as Key[]) {
    statements[key] = [];
    for (let variant = 0; variant < variants(key); variant++) {
      await ops[key][1](variant);
      captured.length = 0;
      await ops[key][1](variant);
      statements[key].push([...captured]);
    }
  }
  return statements;
}

/** STORE_EXPLAIN=1: prints the plan of every statement of every variant once */
async function explainAll(c: Client, statements: Record<string, Prisma.Sql[][]>): Promise<void> {
  for (const [key, list] of Object.entries(statements)) {
    for (const [v, qs] of list.entries()) {
      for (const q of qs) {
        const { rows } = await c.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS) ${q.text}`, q.values);
        console.log(`--- ${key} variant ${v}\n${rows.map((r) => r['QUERY PLAN']).join('\n')}`);
      }
    }
  }
}

/** the database's own time for a call's statements: EXPLAIN ANALYZE's planning + execution time; no sequential scan allowed */
function serverOp(c: Client, statements: Record<string, Prisma.Sql[][]>, key: string) {
  return async (i: number) => {
    let ms = 0;
    for (const q of statements[key]![i % variants(key)]!) {
      const { rows } = await c.query<{
        'QUERY PLAN': [{ Plan: PlanNode; 'Planning Time': number; 'Execution Time': number }];
      }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${q.text}`, q.values);
      const plan = rows[0]!['QUERY PLAN'][0];
      ms += plan['Planning Time'] + plan['Execution Time'];
      const seq = seqScans(plan.Plan);
      if (seq.length) throw new Error(`${key}: not index-bound, sequential scan of ${seq.join(', ')}`);
    }
    return ms;
  };
}

const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!;

async function run(source: SocialSource, c: Client, captured: Prisma.Sql[]) {
  const ops = buildOps(source, await fixtures(c));
  const statements = await captureStatements(ops, captured);
  if (process.env.STORE_EXPLAIN) await explainAll(c, statements);
  // rounds alternate the order of the queries; each figure is the median of its rounds' p99
  const keys = Object.keys(ops) as Key[];
  const series = () => Object.fromEntries(keys.map((k) => [k, [] as number[]])) as Record<Key, number[]>;
  const server = series();
  const client = series();
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 ? [...keys].reverse() : keys;
    for (const key of order) {
      server[key].push(await measure(`round ${round + 1} database ${ops[key][0]}`, RUNS, serverOp(c, statements, key)));
      client[key].push(await measure(`round ${round + 1} end to end ${ops[key][0]}`, RUNS, ops[key][1]));
    }
  }
  const f = (v: number[]) => median(v).toFixed(2);
  console.log(
    `end to end (Prisma client, this VM): timeline_p99_ms ${f(client.timeline)} since_p99_ms ${f(client.since)} search_common_p99_ms ${f(client.common)} search_rare_p99_ms ${f(client.rare)}`,
  );
  console.log(
    `middling terms and several words (database p99): ripple_1pct_ms ${f(server.mid1)} w17_0.07pct_ms ${f(server.mid2)} several_words_ms ${f(server.multi)}; end to end ${f(client.mid1)} / ${f(client.mid2)} / ${f(client.multi)}`,
  );
  return {
    timeline: median(server.timeline),
    since: median(server.since),
    common: median(server.common),
    rare: median(server.rare),
  };
}

/** the same client, with every $queryRaw statement recorded in `captured` (for EXPLAIN ANALYZE) */
function withQuerySpy(real: Db, captured: Prisma.Sql[]): Db {
  return new Proxy(real, {
    get(target, prop, receiver) {
      if (prop !== '$queryRaw') return Reflect.get(target, prop, receiver) as unknown;
      // called as a template tag, or with one Prisma.Sql
      return (strings: TemplateStringsArray | Prisma.Sql, ...values: unknown[]) => {
        captured.push(strings instanceof Prisma.Sql ? strings : Prisma.sql(strings, ...values));
        return target.$queryRaw(strings, ...values);
      };
    },
  });
}

async function main(): Promise<void> {
  const admin = postgresAdminUrl();
  // STORE_DB: measure a data set kept by an earlier run (STORE_KEEP=1) instead of building one
  const reuse = process.env.STORE_DB;
  const name = reuse ?? `sts_bench_store_${randomBytes(4).toString('hex')}`;
  const url = databaseUrl(admin, name);
  await ensureDatabase(url);
  const c = new Client({ connectionString: url });
  let db: ReturnType<typeof createDbClient> | undefined;
  try {
    await c.connect();
    if (!reuse) {
      await migrate(url);
      const t0 = Date.now();
      await build(c);
      log(`data set of ${ROWS} tweets built in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
    }
    db = createDbClient({ url, poolSize: 2 });
    const captured: Prisma.Sql[] = [];
    const spy = withQuerySpy(db, captured);
    const r = await run(createLocalSource({ db: spy }), c, captured);
    const f = (v: number) => v.toFixed(2);
    console.log(
      `rows ${ROWS} timeline_p99_ms ${f(r.timeline)} since_p99_ms ${f(r.since)} search_common_p99_ms ${f(r.common)} search_rare_p99_ms ${f(r.rare)}`,
    );
  } finally {
    await db?.$disconnect();
    await c.end().catch(() => undefined);
    if (process.env.STORE_KEEP || reuse) {
      log(`STORE_KEEP: database ${name} kept; drop it when done`);
    } else {
      await dropDatabase(admin, name);
    }
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
