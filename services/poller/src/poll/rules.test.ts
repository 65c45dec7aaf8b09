/**
 * Each rule part (post types, languages, exclusions) fires the same hits whichever
 * source the poller reads: the local store (references in its columns) and X (a fake X API v2
 * answering in X's format, `referenced_tweets` and `lang` on each tweet).
 */
import type { Redis } from 'ioredis';
import { createLogger } from '@sts/common';
import type { Db } from '@sts/db';
import {
  createLocalSource,
  createSocialTweet,
  createSocialUser,
  createXSource,
  type ReferencedTweet,
  type SocialSource,
} from '@sts/social';
import { startFakeX, openTestStore, type TestStore } from '@sts/testing';
import { plans, testPoller } from '../../test/poller';

const logger = createLogger({ service: 'poller-rules-test', level: 'error' });

interface Post {
  key: string;
  text: string;
  lang: string | null;
  refs: Omit<ReferencedTweet, 'id'>[];
}

/** One post of each kind the rules tell apart. */
const POSTS: Post[] = [
  { key: 'original', text: 'launch day', lang: 'en', refs: [] },
  { key: 'reply', text: 'launch reply', lang: 'en', refs: [{ type: 'replied_to' }] },
  { key: 'repost', text: 'RT @x: launch', lang: 'en', refs: [{ type: 'retweeted' }] },
  { key: 'quote', text: 'launch quote', lang: 'en', refs: [{ type: 'quoted' }] },
  { key: 'german', text: 'launch heute', lang: 'de', refs: [] },
  { key: 'french', text: 'launch aujourd’hui', lang: 'fr', refs: [] },
  { key: 'nolang', text: 'launch ???', lang: null, refs: [] },
  { key: 'spam', text: 'launch SPAM offer', lang: 'en', refs: [] },
  { key: 'sale', text: 'launch: big, sale', lang: 'en', refs: [] },
];

/** Monitor rules and the posts each must fire on. */
const MONITORS: { name: string; keywords: string[]; excludeTypes: string[]; langs: string[]; fires: string[] }[] = [
  { name: 'all', keywords: [], excludeTypes: [], langs: [], fires: POSTS.map((p) => p.key) },
  {
    name: 'no replies',
    keywords: [],
    excludeTypes: ['replies'],
    langs: [],
    fires: POSTS.map((p) => p.key).filter((k) => k !== 'reply'),
  },
  {
    name: 'no reposts',
    keywords: [],
    excludeTypes: ['reposts'],
    langs: [],
    fires: POSTS.map((p) => p.key).filter((k) => k !== 'repost'),
  },
  {
    name: 'no quotes',
    keywords: [],
    excludeTypes: ['quotes'],
    langs: [],
    fires: POSTS.map((p) => p.key).filter((k) => k !== 'quote'),
  },
  {
    name: 'en,de',
    keywords: [],
    excludeTypes: [],
    langs: ['en', 'de'],
    fires: POSTS.filter((p) => p.lang === 'en' || p.lang === 'de').map((p) => p.key),
  },
  {
    name: 'exclusions',
    keywords: ['launch', '-spam', '-"big sale"'],
    excludeTypes: [],
    langs: [],
    fires: POSTS.map((p) => p.key).filter((k) => k !== 'spam' && k !== 'sale'),
  },
];

describe('poller: monitor rules on both sources', () => {
  let bed: TestStore;
  let db: Db;
  let redis: Redis;
  let accountId: string;

  beforeAll(async () => {
    bed = await openTestStore({ poolSize: 4 });
    ({ db, redis } = bed);
    accountId = (await db.account.create({ data: { email: 'rules@example.com', plan: 'starter' } })).id;
  });

  afterAll(() => bed.close());

  async function runAndCheck(source: SocialSource, target: string, idOf: Map<string, string>) {
    const created = new Map<string, string>();
    for (const m of MONITORS) {
      const row = await db.monitor.create({
        data: {
          accountId,
          targetUsername: target,
          targetKey: target.toLowerCase(),
          keywords: m.keywords,
          excludeTypes: m.excludeTypes,
          langs: m.langs,
          createdAt: new Date(Date.now() - 3600_000),
        },
      });
      created.set(m.name, row.id);
    }
    const poller = testPoller(
      { db, redis },
      {
        source,
        logger,
        intervals: { plans, overrideSec: 1 },
        concurrency: 1,
        batchSize: 50,
      },
    );
    await poller.runCycle({ force: true });
    const keyOf = new Map([...idOf].map(([k, id]) => [id, k]));
    for (const m of MONITORS) {
      const hits = await db.hit.findMany({ where: { monitorId: created.get(m.name)! } });
      expect({ monitor: m.name, fires: hits.map((h) => keyOf.get(h.tweetId)).sort() }).toEqual({
        monitor: m.name,
        fires: [...m.fires].sort(),
      });
    }
  }

  it('local store', async () => {
    const target = 'RulesLocal';
    await createSocialUser(db, { username: target, name: target });
    const referenced = await createSocialTweet(db, {
      authorUsername: target,
      text: 'older post',
      createdAt: new Date(Date.now() - 7200_000),
    });
    const idOf = new Map<string, string>();
    for (const p of POSTS) {
      const t = await createSocialTweet(db, {
        authorUsername: target,
        text: p.text,
        ...(p.lang ? { lang: p.lang } : {}),
        ...(p.refs.some((r) => r.type === 'replied_to') ? { replyToId: referenced.id } : {}),
        ...(p.refs.some((r) => r.type === 'quoted') ? { quoteOfId: referenced.id } : {}),
        ...(p.refs.some((r) => r.type === 'retweeted') ? { repostOfId: referenced.id } : {}),
      });
      idOf.set(p.key, t.id);
    }
    await runAndCheck(createLocalSource({ db }), target, idOf);
  });

  it('X (fake X API v2 in its own format)', async () => {
    // the fake X of @sts/testing (X's response format and limits)
    const fake = await startFakeX();
    const user = fake.state.addUser({ id: '5151', username: 'RulesOnX', name: 'Rules on X' });
    const start = Date.now() - 60_000;
    const idOf = new Map<string, string>();
    POSTS.forEach((p, i) => {
      const t = fake.state.post({
        author: user.id,
        text: p.text,
        createdAt: new Date(start + i * 1000),
        // X leaves out lang when it has none, and referenced_tweets on an original post
        lang: p.lang ?? null,
        references: p.refs.map((r) => ({ type: r.type, id: '1700000000000000000' })),
      });
      idOf.set(p.key, t.id);
    });
    try {
      const source = createXSource({ baseUrl: fake.url, bearerToken: 't', timeoutMs: 5000, overlapMs: 30_000 });
      await runAndCheck(source, user.username, idOf);
    } finally {
      await fake.stop();
    }
  });
});
