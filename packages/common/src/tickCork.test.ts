/**
 * TickCork on a real stream: the writes of one tick reach the stream's sink in one call, in order;
 * the next tick's writes in another; a destroyed stream is not corked.
 */
import { Writable } from 'node:stream';
import { TickCork } from './tickCork';

/** a stream that records each call its sink gets (one per system call on a socket) */
function recorder() {
  const calls: string[][] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      calls.push([chunk.toString()]);
      done();
    },
    writev(chunks, done) {
      calls.push(chunks.map((c) => (c.chunk as Buffer).toString()));
      done();
    },
  });
  return { stream, calls };
}

const nextTurn = () => new Promise((r) => setImmediate(r));

describe('TickCork', () => {
  it('hands the writes of one tick to the sink together, in order, and a later tick again', async () => {
    const { stream, calls } = recorder();
    const tick = new TickCork(stream);
    for (const s of ['a', 'b', 'c']) {
      tick.cork();
      stream.write(s);
    }
    expect(calls).toEqual([]); // held until the tick ends
    await nextTurn();
    expect(calls).toEqual([['a', 'b', 'c']]);
    tick.cork();
    stream.write('d');
    tick.cork();
    stream.write('e');
    await nextTurn();
    expect(calls).toEqual([
      ['a', 'b', 'c'],
      ['d', 'e'],
    ]);
  });

  it('without it every write reaches the sink alone (the control)', async () => {
    const { stream, calls } = recorder();
    stream.write('a');
    stream.write('b');
    await nextTurn();
    expect(calls.length).toBeGreaterThan(1);
  });

  it('does not cork a destroyed stream', () => {
    const { stream } = recorder();
    stream.destroy();
    new TickCork(stream).cork();
    expect(stream.writableCorked).toBe(0);
  });
});
