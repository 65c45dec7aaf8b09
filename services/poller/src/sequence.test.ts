/**
 * The per-monitor event sequence (docs/webhooks.md "Sequence"), on the real PostgreSQL:
 * - two pollers (each its own connection pool) recording the same monitors at once, the same
 *   posts and different ones, leave each monitor's hits numbered 1 … n without a gap or a repeat,
 *   and every event in the outbox carries its hit's number;
 * - the stream's recording (recordMany) and the chunked fan-out continue the same numbering;
 * - profile and status events of a look take the next numbers, stored with the event for
 *   redelivery.
 */
import { snowflakeId } from '@sts/core';
import { createDbClient, type Db } from '@sts/db';
import { openTestStore, type TestStore } from '@sts/testing';
import { createHitWriter } from './adapters/hitWriter';
import { HIT_CHUNK, type NewHit } from './domain/pipeline';
import { createProfileRepository } from './adapters/profiles';

interface Post {
  id: string;
  createdAt: Date;
}

const post = (): Post => ({ id: snowflakeId(), createdAt: new Date(Date.now() - 60_000) });

describe('a sequence per monitor', () => {
  let bed: TestStore;
  let db: Db;
  let other: Db;
  let accountId: string;
  let n = 0;

  beforeAll(async () => {
    bed = await openTestStore({ poolSize: 6 });
    db = bed.db;
    other = createDbClient({ url: bed.dbUrl, poolSize: 6 });
    accountId = (await db.account.create({ data: { email: 'seq@example.com', plan: 'starter' } })).id;
  });

  afterAll(async () => {
    await other.$disconnect();
    await bed.close();
  });

  async function monitors(count: number, events: string[] = ['posts']): Promise<{ target: string; ids: string[] }> {
    const target = `seq_${++n}`;
    const ids: string[] = [];
    for (let i = 0; i < count; i++) {
      const m = await db.monitor.create({
        data: { accountId, targetUsername: target, targetKey: target, events },
      });
      ids.push(m.id);
    }
    return { target, ids };
  }

  function hit(monitorId: string, target: string, p: Post): NewHit {
    const detectedAt = new Date();
    return {
      monitorId,
      accountId,
      tweetId: p.id,
      tweetText: `post ${p.id}`,
      tweetAuthorId: '7',
      tweetAuthorUsername: target,
      tweetCreatedAt: p.createdAt,
      detectedAt,
      event: {
        event: 'monitor.hit',
        monitor: { id: monitorId, targetUsername: target, query: null, keywords: null },
        tweet: { id: p.id, text: `post ${p.id}`, authorUsername: target, createdAt: p.createdAt.toISOString() },
        detectedAt: detectedAt.toISOString(),
      },
    };
  }

  const cursorOf = (p: Post) => ({ lastTweetId: p.id, lastTweetAt: p.createdAt, position: null });

  /** each monitor's hit sequences, in sequence order, and the tweets they belong to */
  async function hitSequences(monitorId: string): Promise<{ tweetId: string; sequence: number; hitId: string }[]> {
    const rows = await db.hit.findMany({
      where: { monitorId },
      orderBy: { sequence: 'asc' },
      select: { id: true, tweetId: true, sequence: true },
    });
    return rows.map((r) => ({ tweetId: r.tweetId, sequence: Number(r.sequence), hitId: r.id }));
  }

  /** the sequence of each outbox event of a monitor, by the hit or event it names */
  async function outboxSequences(monitorId: string): Promise<Map<string, number>> {
    const rows = await db.$queryRaw<{ ref: string; sequence: number }[]>`
      SELECT coalesce(headers->>'hitId', headers->>'eventId') AS ref, (payload->>'sequence')::int AS sequence
      FROM outbox WHERE payload->'monitor'->>'id' = ${monitorId}`;
    return new Map(rows.map((r) => [r.ref, r.sequence]));
  }

  async function expectGapFree(monitorId: string, count: number): Promise<void> {
    const hits = await hitSequences(monitorId);
    expect(hits.map((h) => h.sequence)).toEqual(Array.from({ length: count }, (_, i) => i + 1));
    expect(new Set(hits.map((h) => h.tweetId)).size).toBe(count);
    const sent = await outboxSequences(monitorId);
    expect(sent.size).toBe(count);
    for (const h of hits) expect([h.hitId, sent.get(h.hitId)]).toEqual([h.hitId, h.sequence]);
  }

  it('two pollers recording the same monitors at once leave no gap and no repeat', async () => {
    const { target, ids } = await monitors(3);
    // the counter row is made with the monitor: recording only updates it
    const counters = await db.monitorSequence.findMany({ where: { monitorId: { in: ids } } });
    expect(counters.map((c) => c.lastSequence)).toEqual([0n, 0n, 0n]);
    const a = createHitWriter(db);
    const b = createHitWriter(other);
    const posts: Post[] = [];
    for (let round = 0; round < 12; round++) {
      const fresh = [post(), post(), post(), post()];
      posts.push(...fresh);
      // A records posts 0-2, B posts 1-3: two posts both record, at the same time
      const hitsOf = (ps: Post[]) => ps.flatMap((p) => ids.map((id) => hit(id, target, p)));
      const [fromA, fromB] = await Promise.all([
        a.recordBatch(target, hitsOf(fresh.slice(0, 3)), cursorOf(fresh[2]!), new Date()),
        b.recordBatch(target, hitsOf(fresh.slice(1)), cursorOf(fresh[3]!), new Date()),
      ]);
      // every hit is new to exactly one of them
      expect(fromA.length + fromB.length).toBe(4 * ids.length);
    }
    for (const id of ids) await expectGapFree(id, posts.length);
  });

  it('the stream recording and a chunked fan-out continue the same numbering', async () => {
    const { target, ids } = await monitors(HIT_CHUNK + 5);
    const repo = createHitWriter(db);
    const first = post();
    // more hits than a chunk: several chunk statements, two at a time
    const fanOut = await repo.recordBatch(
      target,
      ids.map((id) => hit(id, target, first)),
      cursorOf(first),
      new Date(),
    );
    expect(fanOut).toHaveLength(ids.length);
    const second = post();
    const [some] = ids;
    // the stream's one statement, at once with a poll of the same post for the same monitor
    const [streamed, polled] = await Promise.all([
      createHitWriter(other).recordMany(
        [{ targetKey: target, hits: [hit(some!, target, second)], cursor: cursorOf(second) }],
        new Date(),
      ),
      repo.recordBatch(target, [hit(some!, target, second)], cursorOf(second), new Date()),
    ]);
    expect(streamed.length + polled.length).toBe(1);
    await expectGapFree(some!, 2);
    await expectGapFree(ids[ids.length - 1]!, 1);
  });

  it("a look's profile and status events take the next numbers, kept with the event", async () => {
    const { target, ids } = await monitors(2, ['posts', 'profile']);
    const repo = createHitWriter(db);
    const p = post();
    await repo.recordBatch(
      target,
      ids.map((id) => hit(id, target, p)),
      cursorOf(p),
      new Date(),
    );
    const profiles = createProfileRepository(db);
    const profile = {
      userId: '7',
      username: target,
      name: 'Before',
      description: null,
      profileImageUrl: null,
      verified: false,
    };
    await profiles.record(target, { profile, state: 'active' }, new Date());
    // a changed name and a suspension in one look: a profile change then a status change
    const look = await profiles.record(
      target,
      { profile: { ...profile, name: 'After' }, state: 'suspended' },
      new Date(),
    );
    expect(look.events).toBe(4);
    for (const id of ids) {
      const stored = await db.monitorEvent.findMany({ where: { monitorId: id }, orderBy: { sequence: 'asc' } });
      expect(stored.map((e) => [e.kind, Number(e.sequence)])).toEqual([
        ['monitor.profile_changed', 2],
        ['monitor.target_unavailable', 3],
      ]);
      for (const e of stored) expect((e.payload as { sequence: number }).sequence).toBe(Number(e.sequence));
      const sent = await outboxSequences(id);
      expect(stored.map((e) => sent.get(e.id))).toEqual([2, 3]);
    }
  });
});
