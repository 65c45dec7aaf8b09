import type { SocialTweet } from '@sts/social';
import { StreamLanes } from './lanes';

function tweet(id: number, author: string): SocialTweet {
  return {
    id: String(id),
    text: `t${id}`,
    createdAt: new Date(1_700_000_000_000 + id),
    author: { username: author },
  } as unknown as SocialTweet;
}

describe('StreamLanes', () => {
  it('records in parallel across authors, in order per author, in batches', async () => {
    const seen: string[][] = [];
    let inFlight = 0;
    let most = 0;
    const lanes = new StreamLanes({
      lanes: 4,
      record: async (batch) => {
        inFlight++;
        most = Math.max(most, inFlight);
        await new Promise((r) => setTimeout(r, 20));
        seen.push(batch.map((t) => `${t.author.username}:${t.id}`));
        inFlight--;
      },
      lost: () => {
        throw new Error('nothing should be lost');
      },
    });
    const authors = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'];
    for (let i = 0; i < 80; i++) lanes.push(tweet(i, authors[i % authors.length]!));
    expect(lanes.size()).toBe(80);
    await lanes.drain();
    expect(lanes.size()).toBe(0);
    expect(most).toBeGreaterThan(1);
    const all = seen.flat();
    expect(all).toHaveLength(80);
    for (const a of authors) {
      const ids = all.filter((x) => x.startsWith(`${a}:`)).map((x) => Number(x.split(':')[1]));
      expect(ids).toEqual([...ids].sort((x, y) => x - y));
    }
    // the first post of a lane is recorded alone, what waited meanwhile as one batch
    expect(seen.length).toBeLessThan(80);
  });

  it('beyond the bound, and on a failed batch, posts go to lost (to be owed), never dropped silently', async () => {
    const lost: string[] = [];
    let fail = true;
    const lanes = new StreamLanes({
      lanes: 1,
      maxWaiting: 3,
      record: async () => {
        await new Promise((r) => setTimeout(r, 10));
        if (fail) throw new Error('database gone');
      },
      lost: (tweets, why) => lost.push(...tweets.map((t) => `${t.id}:${why}`)),
    });
    for (let i = 0; i < 5; i++) lanes.push(tweet(i, 'a'));
    expect(lanes.oldestWaiting()).toEqual(new Date(1_700_000_000_000));
    await lanes.drain();
    expect(lost.filter((l) => l.endsWith('the recording queue is full')).map((l) => l.split(':')[0])).toEqual([
      '3',
      '4',
    ]);
    expect(lost.filter((l) => l.endsWith('database gone')).map((l) => l.split(':')[0])).toEqual(['0', '1', '2']);
    fail = false;
    lanes.push(tweet(9, 'a'));
    await lanes.drain();
    expect(lost).toHaveLength(5);
    expect(lanes.oldestWaiting()).toBeNull();
  });
});
