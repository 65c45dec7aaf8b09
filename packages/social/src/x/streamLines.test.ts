import { MAX_STREAM_LINE, readStreamLines } from './streamLines';

/** a stream of the given chunks that records whether it was cancelled */
function streamOf(chunks: string[]) {
  const state = { cancelled: false, pulled: 0 };
  const encoder = new TextEncoder();
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      const next = chunks[state.pulled++];
      if (next === undefined) controller.close();
      else controller.enqueue(encoder.encode(next));
    },
    cancel() {
      state.cancelled = true;
    },
  });
  return { reader: stream.getReader(), state };
}

describe('readStreamLines', () => {
  it('hands over each \\r\\n-ended JSON line, across chunk borders, and skips keep-alives', async () => {
    const { reader } = streamOf(['{"a":1}\r\n\r\n{"a"', ':2}\r', '\n\r\n']);
    const lines: unknown[] = [];
    const chunks: { partial: boolean; linesSoFar: number }[] = [];
    await readStreamLines(reader, {
      onChunk: (partial) => void chunks.push({ partial, linesSoFar: lines.length }),
      onLine: (l) => void lines.push(l),
    });
    expect(lines).toEqual([{ a: 1 }, { a: 2 }]);
    // each chunk is told after the lines it ended, and whether it left one unfinished
    expect(chunks).toEqual([
      { partial: true, linesSoFar: 1 },
      { partial: true, linesSoFar: 1 },
      { partial: false, linesSoFar: 2 },
    ]);
  });

  it('ends the connection when a line grows past the bound without its \\r\\n', async () => {
    const piece = 'x'.repeat(64 * 1024);
    const chunks = [
      '{"a":"',
      ...Array.from({ length: MAX_STREAM_LINE / piece.length + 2 }, () => piece),
      ...Array(1000).fill(piece),
    ];
    const { reader, state } = streamOf(chunks);
    await expect(readStreamLines(reader, { onChunk: () => undefined, onLine: () => undefined })).rejects.toThrow(
      /longer than 1048576 characters/,
    );
    expect(state.cancelled).toBe(true);
    // it stopped reading soon after the bound, not at the end of the peer's bytes
    expect(state.pulled).toBeLessThan(40);
  });

  it('ends the connection on a line that is not JSON, naming it, and cancels the body', async () => {
    const { reader, state } = streamOf(['{"a":1}\r\nnot json\r\n{"a":2}\r\n', '{"a":3}\r\n', '{"a":4}\r\n']);
    const lines: unknown[] = [];
    await expect(
      readStreamLines(reader, { onChunk: () => undefined, onLine: (l) => void lines.push(l) }),
    ).rejects.toThrow(/not JSON/);
    expect(lines).toEqual([{ a: 1 }]);
    expect(state.cancelled).toBe(true);
  });

  it('ends the connection with the error a line returns (X disconnect notice)', async () => {
    const { reader, state } = streamOf([
      '{"errors":[{"title":"operational-disconnect"}]}\r\n{"a":2}\r\n',
      '{"a":3}\r\n',
      '{"a":4}\r\n',
    ]);
    await expect(
      readStreamLines<{ errors?: unknown }>(reader, {
        onChunk: () => undefined,
        onLine: (l) => (l.errors ? new Error('disconnected by X') : undefined),
      }),
    ).rejects.toThrow('disconnected by X');
    expect(state.cancelled).toBe(true);
  });
});
