/**
 * The bigint-ids migration (20261123100000_social_ids_bigint) on a populated database: rows written under the old schema (text ids),
 * their answers taken with the old queries (ids compared as numeric), then the migrations run and
 * the local source must give the same pages, cursors, since-id sets and search results, in order.
 */
import { cp, mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { createDbClient, migrate, MIGRATIONS_DIR } from '@sts/db';
import { createTestDatabase } from '@sts/testing';
import { encodeKeyset } from './cursor';
import { createLocalSource } from './local';
import type { Page, SocialTweet } from './types';

const INIT = '20261122090000_init';

describe('social ids bigint migration on a populated database', () => {
  let testDb: Awaited<ReturnType<typeof createTestDatabase>>;
  let pg: Client;
  let dir: string;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    pg = new Client({ connectionString: testDb.url });
    await pg.connect();
    // back to the schema before that migration: an empty public schema migrated with the first migration only
    await pg.query('DROP SCHEMA public CASCADE; CREATE SCHEMA public');
    dir = await mkdtemp(path.join(os.tmpdir(), 'mig-old-'));
    await cp(path.join(MIGRATIONS_DIR, INIT), path.join(dir, INIT), { recursive: true });
    await cp(path.join(MIGRATIONS_DIR, 'migration_lock.toml'), path.join(dir, 'migration_lock.toml'));
    await migrate(testDb.url, { dir });
  });

  afterAll(async () => {
    await pg.end();
    await rm(dir, { recursive: true, force: true });
    await testDb.drop();
  });

  it('converts in place and answers exactly as before', async () => {
    // old state: text ids of different lengths (9 < 10 < 100 as numbers, not as text), ties on created_at
    await pg.query(`INSERT INTO social_users (id, username, username_key, name, tweet_count) VALUES
      ('42', 'Alice', 'alice', 'Alice', 1), ('7', 'bob', 'bob', 'Bob', 30)`);
    const base = Date.UTC(2025, 5, 1, 12);
    const ids = [
      '9',
      '10',
      '100',
      '99',
      '1000',
      ...Array.from({ length: 25 }, (_, i) => String(1900000000000000000n + BigInt(i * 7919))),
    ];
    for (const [i, id] of ids.entries()) {
      const text = `bob says ${i} ${i % 3 === 0 ? 'launch day' : 'ordinary'}${i === 17 ? ' zebrafish' : ''}`;
      await pg.query('INSERT INTO social_tweets (id, author_id, text, created_at) VALUES ($1, $2, $3, $4)', [
        id,
        '7',
        text,
        new Date(base + Math.floor(i / 3) * 60_000),
      ]);
    }
    await pg.query(
      `INSERT INTO social_tweets (id, author_id, text, created_at) VALUES ('5', '42', 'alice launch', $1)`,
      [new Date(base + 3600_000)],
    );
    await pg.query(`INSERT INTO poll_cursors (target_key, last_tweet_id) VALUES ('bob', '100')`);

    // the answers of the old queries
    const oldList = async (where: string, params: unknown[]) =>
      (
        await pg.query<{ id: string }>(
          `SELECT id FROM social_tweets WHERE ${where} ORDER BY created_at DESC, id::numeric DESC`,
          params,
        )
      ).rows.map((r) => r.id);
    const timeline = await oldList(`author_id = '7'`, []);
    const launch = await oldList(`search @@ websearch_to_tsquery('simple', $1)`, ['launch']);
    const zebra = await oldList(`search @@ websearch_to_tsquery('simple', $1)`, ['zebrafish']);
    // queries of several words (the posting table of 20261123130000 serves them after the migration)
    const several = ['launch day', '"says 3"', 'zebrafish or alice', 'ordinary -launch', '-ordinary'];
    const severalOld: string[][] = [];
    for (const q of several) severalOld.push(await oldList(`search @@ websearch_to_tsquery('simple', $1)`, [q]));
    const since = (
      await pg.query<{ id: string }>(
        `SELECT id FROM social_tweets WHERE author_id = '7' AND id::numeric > $1::numeric ORDER BY id::numeric`,
        ['99'],
      )
    ).rows.map((r) => r.id);
    const at = (
      await pg.query<{ created_at: Date }>(`SELECT created_at FROM social_tweets WHERE id = $1`, [timeline[4]])
    ).rows[0]!.created_at;
    // a cursor issued before the migration (after the 5th tweet of the timeline)
    const oldCursor = encodeKeyset('tl', at, timeline[4]!);
    expect(timeline).toHaveLength(30);
    expect(launch).toHaveLength(11);
    expect(zebra).toHaveLength(1);

    // the rest of the migrations, in place
    const r = await migrate(testDb.url);
    expect(r.applied).toEqual(
      expect.arrayContaining([
        '20261123100000_social_ids_bigint',
        '20261123100100_tweet_commit_xid',
        '20261123130000_social_tweet_terms',
      ]),
    );
    // the search postings of the existing rows: one per (lexeme, tweet)
    const postings = await pg.query<{ want: number; have: number }>(
      `SELECT (SELECT count(*) FROM social_tweets t, unnest(tsvector_to_array(t.search)))::int AS want,
              (SELECT count(*) FROM social_tweet_terms p JOIN social_tweets t ON t.id = p.tweet_id AND t.created_at = p.created_at
               WHERE t.search @@ to_tsquery('simple', quote_literal(p.term)))::int AS have`,
    );
    expect(postings.rows[0]!.have).toBe(postings.rows[0]!.want);
    expect(postings.rows[0]!.want).toBeGreaterThan(100);
    // JIT is off for new sessions of the migrated database
    const settings = await pg.query<{ setconfig: string[] }>(
      `SELECT setconfig FROM pg_db_role_setting WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database()) AND setrole = 0`,
    );
    expect(settings.rows[0]?.setconfig).toContain('jit=off');
    const types = await pg.query<{ column_name: string; data_type: string }>(
      `SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'social_tweets' AND column_name IN ('id', 'author_id', 'xid') ORDER BY column_name`,
    );
    expect(types.rows).toEqual([
      { column_name: 'author_id', data_type: 'bigint' },
      { column_name: 'id', data_type: 'bigint' },
      { column_name: 'xid', data_type: 'xid8' },
    ]);

    const db = createDbClient({ url: testDb.url, poolSize: 2 });
    try {
      const source = createLocalSource({ db });
      const pages = async (get: (cursor?: string) => Promise<Page<SocialTweet> | null>, from?: string) => {
        const seen: string[] = [];
        let cursor = from;
        for (let n = 0; n < 50; n++) {
          const page = (await get(cursor))!;
          seen.push(...page.items.map((t) => t.id));
          if (!page.nextCursor) return seen;
          cursor = page.nextCursor;
        }
        throw new Error('paging did not end');
      };
      expect(await pages((cursor) => source.getUserTimeline('bob', { limit: 4, cursor }))).toEqual(timeline);
      expect(await pages((cursor) => source.getUserTimeline('bob', { limit: 4, cursor }), oldCursor)).toEqual(
        timeline.slice(5),
      );
      expect(await pages((cursor) => source.search('launch', { limit: 3, cursor }))).toEqual(launch);
      expect(await pages((cursor) => source.search('zebrafish', { limit: 3, cursor }))).toEqual(zebra);
      for (const [i, q] of several.entries()) {
        expect(severalOld[i]!.length).toBeGreaterThan(0);
        expect({ q, ids: await pages((cursor) => source.search(q, { limit: 3, cursor })) }).toEqual({
          q,
          ids: severalOld[i],
        });
      }
      expect((await source.getTweet('100'))!.text).toBe('bob says 2 ordinary');
      // since-ids: the same set compared natively
      const after = (
        await pg.query<{ id: string }>(
          `SELECT id::text AS id FROM social_tweets WHERE author_id = 7 AND id > $1 ORDER BY id`,
          ['99'],
        )
      ).rows.map((r) => r.id);
      expect(after).toEqual(since);
      // existing rows count as written long ago (xid 1): the poller reads all of them, in id order
      const polled = await source.pollTweets('bob', {
        position: null,
        notBefore: new Date(0),
        limit: 100,
        firstPage: true,
      });
      expect(polled!.tweets.map((t) => t.id)).toEqual([...timeline].sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : 1)));
      const cursor = await db.pollCursor.findUniqueOrThrow({ where: { targetKey: 'bob' } });
      expect(cursor).toMatchObject({ lastTweetId: '100', position: null });
      // every migration is recorded
      expect((await readdir(MIGRATIONS_DIR)).filter((f) => /^\d{14}_/.test(f)).length).toBe(
        Number((await pg.query<{ n: string }>('SELECT count(*) AS n FROM "_prisma_migrations"')).rows[0]!.n),
      );
    } finally {
      await db.$disconnect();
    }
  });
});
