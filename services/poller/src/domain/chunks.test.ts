import { hitChunks, inLanes } from './chunks';

const hit = (monitorId: string, n: number) => ({ monitorId, n });

describe('hitChunks', () => {
  it('keeps each monitor’s hits together and in order, at most `size` a chunk', () => {
    // two posts to monitors a..e: post-major order, as findHits returns them
    const hits = ['a', 'b', 'c', 'd', 'e']
      .map((m) => hit(m, 1))
      .concat(['a', 'b', 'c', 'd', 'e'].map((m) => hit(m, 2)));
    const { chunks, ordered } = hitChunks(hits, 4);
    expect(ordered).toBe(false);
    expect(chunks.map((c) => c.map((h) => `${h.monitorId}${h.n}`))).toEqual([
      ['a1', 'a2', 'b1', 'b2'],
      ['c1', 'c2', 'd1', 'd2'],
      ['e1', 'e2'],
    ]);
  });

  it('cuts a monitor with more hits than a chunk in order, and says the chunks must run in order', () => {
    const hits = [hit('x', 0), ...[1, 2, 3, 4, 5].map((n) => hit('big', n)), hit('y', 0)];
    const { chunks, ordered } = hitChunks(hits, 2);
    expect(ordered).toBe(true);
    expect(chunks.map((c) => c.map((h) => `${h.monitorId}${h.n}`))).toEqual([
      ['x0'],
      ['big1', 'big2'],
      ['big3', 'big4'],
      ['big5', 'y0'],
    ]);
  });

  it('one chunk per `size` hits of one post', () => {
    const hits = Array.from({ length: 2500 }, (_, i) => hit(`m${i}`, 1));
    expect(hitChunks(hits, 1000).chunks.map((c) => c.length)).toEqual([1000, 1000, 500]);
  });
});

describe('inLanes', () => {
  it('runs at most `lanes` at once and returns results in order', async () => {
    let running = 0;
    let most = 0;
    const out = await inLanes([1, 2, 3, 4, 5], 2, async (n) => {
      most = Math.max(most, ++running);
      await new Promise((r) => setTimeout(r, 5 * (6 - n)));
      running--;
      return n * 10;
    });
    expect(out).toEqual([10, 20, 30, 40, 50]);
    expect(most).toBe(2);
  });

  it('starts nothing after a failure and throws the first error once the running ones settled', async () => {
    const started: number[] = [];
    const settled: number[] = [];
    const run = inLanes([1, 2, 3, 4, 5, 6], 2, async (n) => {
      started.push(n);
      await new Promise((r) => setTimeout(r, n === 2 ? 1 : 20));
      settled.push(n);
      if (n === 2) throw new Error('chunk 2 failed');
      return n;
    });
    await expect(run).rejects.toThrow('chunk 2 failed');
    expect(started).toEqual([1, 2]);
    expect(settled.sort()).toEqual([1, 2]);
  });
});
