/**
 * The micro-batcher on its own (no I/O): calls of one turn go together, calls made while the
 * bounded number of queries run wait and go together next, a lingering batch waits for more calls
 * until it is full or the linger ends, each caller settles only when the query carrying its item
 * settles, and one failed query fails only its own callers.
 */
import { createBatcher } from './batch';

interface Call {
  items: number[];
  resolve: (out: string[]) => void;
  reject: (err: Error) => void;
}

/** a batch function whose queries the test finishes by hand */
function manual() {
  const calls: Call[] = [];
  const run = (items: number[]) =>
    new Promise<string[]>((resolve, reject) => {
      calls.push({ items, resolve, reject });
    });
  return { calls, run };
}

const turn = () => new Promise((r) => setImmediate(r));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** settled state of a promise, without waiting for it */
function track<T>(p: Promise<T>) {
  const state: { status: 'pending' | 'resolved' | 'rejected'; value?: T; error?: unknown } = { status: 'pending' };
  p.then(
    (value) => Object.assign(state, { status: 'resolved', value }),
    (error: unknown) => Object.assign(state, { status: 'rejected', error }),
  );
  return state;
}

describe('createBatcher', () => {
  it('sends the calls of one turn as one batch and settles each caller with its own result', async () => {
    const { calls, run } = manual();
    const load = createBatcher(run);
    const results = [1, 2, 3].map((n) => load(n));
    await turn();
    expect(calls.map((c) => c.items)).toEqual([[1, 2, 3]]);
    calls[0]!.resolve(['a', 'b', 'c']);
    await expect(Promise.all(results)).resolves.toEqual(['a', 'b', 'c']);
  });

  it('runs at most maxConcurrent queries; calls made meanwhile wait and go together in the next batch', async () => {
    const { calls, run } = manual();
    const load = createBatcher(run, { maxConcurrent: 1 });
    const first = track(load(1));
    await turn();
    expect(calls).toHaveLength(1);
    // the first query is still running: these accumulate, across several turns
    const later = [track(load(2)), track(load(3))];
    await turn();
    later.push(track(load(4)));
    await turn();
    expect(calls).toHaveLength(1);
    expect(later.every((s) => s.status === 'pending')).toBe(true);
    calls[0]!.resolve(['one']);
    await turn();
    await turn();
    expect(first).toMatchObject({ status: 'resolved', value: 'one' });
    expect(calls.map((c) => c.items)).toEqual([[1], [2, 3, 4]]);
    // not settled before their own query is
    expect(later.every((s) => s.status === 'pending')).toBe(true);
    calls[1]!.resolve(['two', 'three', 'four']);
    await turn();
    expect(later.map((s) => s.value)).toEqual(['two', 'three', 'four']);
  });

  it('splits at maxBatch and keeps maxConcurrent queries busy', async () => {
    const { calls, run } = manual();
    const load = createBatcher(run, { maxBatch: 2, maxConcurrent: 2 });
    const all = [1, 2, 3, 4, 5].map((n) => load(n));
    await turn();
    expect(calls.map((c) => c.items)).toEqual([
      [1, 2],
      [3, 4],
    ]);
    calls[1]!.resolve(['c', 'd']);
    await turn();
    await turn();
    expect(calls.map((c) => c.items)).toEqual([[1, 2], [3, 4], [5]]);
    calls[0]!.resolve(['a', 'b']);
    calls[2]!.resolve(['e']);
    await expect(Promise.all(all)).resolves.toEqual(['a', 'b', 'c', 'd', 'e']);
  });

  it('a failed query rejects only its own callers; the batcher keeps working', async () => {
    const { calls, run } = manual();
    const load = createBatcher(run, { maxConcurrent: 1 });
    const failed = [load(1), load(2)];
    await turn();
    const next = load(3);
    calls[0]!.reject(new Error('database said no'));
    await expect(Promise.allSettled(failed)).resolves.toEqual([
      { status: 'rejected', reason: new Error('database said no') },
      { status: 'rejected', reason: new Error('database said no') },
    ]);
    await turn();
    expect(calls.map((c) => c.items)).toEqual([[1, 2], [3]]);
    calls[1]!.resolve(['ok']);
    await expect(next).resolves.toBe('ok');
  });

  it('a batch function that throws at once rejects its callers and does not stall the next ones', async () => {
    let n = 0;
    const load = createBatcher<number, number>(
      (items) => {
        if (n++ === 0) throw new Error('thrown synchronously');
        return Promise.resolve(items.map((i) => i * 10));
      },
      { maxConcurrent: 1 },
    );
    await expect(load(1)).rejects.toThrow('thrown synchronously');
    await expect(load(2)).resolves.toBe(20);
  });

  it('with a linger, calls made one by one across turns wait for each other and go together when it ends', async () => {
    const { calls, run } = manual();
    const load = createBatcher(run, { lingerMs: 40, fillTo: 10 });
    const results = [load(1)];
    await turn();
    results.push(load(2));
    await turn();
    await turn();
    expect(calls).toHaveLength(0);
    await sleep(80);
    expect(calls.map((c) => c.items)).toEqual([[1, 2]]);
    calls[0]!.resolve(['a', 'b']);
    await expect(Promise.all(results)).resolves.toEqual(['a', 'b']);
    // the next lone call lingers again
    const next = load(3);
    await turn();
    expect(calls).toHaveLength(1);
    await sleep(80);
    expect(calls.map((c) => c.items)).toEqual([[1, 2], [3]]);
    calls[1]!.resolve(['c']);
    await expect(next).resolves.toBe('c');
  });

  it('a lingering batch that reaches fillTo goes at the next turn, without waiting for the linger', async () => {
    const { calls, run } = manual();
    const load = createBatcher(run, { lingerMs: 60_000, fillTo: 3 });
    const results = [load(1), load(2)];
    await turn();
    await turn();
    expect(calls).toHaveLength(0);
    results.push(load(3));
    await turn();
    expect(calls.map((c) => c.items)).toEqual([[1, 2, 3]]);
    calls[0]!.resolve(['a', 'b', 'c']);
    await expect(Promise.all(results)).resolves.toEqual(['a', 'b', 'c']);
  });

  it('calls that waited behind running queries linger too when fewer than fillTo, and go when it ends', async () => {
    const { calls, run } = manual();
    const load = createBatcher(run, { maxConcurrent: 1, lingerMs: 40, fillTo: 2 });
    const first = [load(1), load(2)];
    await turn();
    expect(calls.map((c) => c.items)).toEqual([[1, 2]]);
    const waiting = load(3);
    calls[0]!.resolve(['a', 'b']);
    await expect(Promise.all(first)).resolves.toEqual(['a', 'b']);
    await turn();
    expect(calls).toHaveLength(1);
    await sleep(80);
    expect(calls.map((c) => c.items)).toEqual([[1, 2], [3]]);
    calls[1]!.resolve(['c']);
    await expect(waiting).resolves.toBe('c');
  });
});
