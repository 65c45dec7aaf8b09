/**
 * The reading side of X's streaming connections (the filtered stream, the activity stream): JSON
 * objects, one a line, each line ended by \r\n; an empty line is a keep-alive.
 *
 * Bounds: a line longer than `MAX_STREAM_LINE` characters (X's largest posts with every expansion
 * stay far below) or one that is not JSON ends the connection with an error naming it; the caller
 * reconnects and recovers the gap as after any disconnect. Without the bound a peer that never
 * sends \r\n would grow the buffer until the process runs out of memory.
 */

/** the longest line accepted, in UTF-16 code units */
export const MAX_STREAM_LINE = 1024 * 1024;

/** What a line makes of the stream: nothing (read on), or the error that ends it (X's disconnect notice). */
type LineVerdict = Error | undefined;

export interface StreamLineHandlers<T> {
  /**
   * every chunk that arrives, a keep-alive too (the stream is alive), after the lines it ended;
   * `partial`: it left a line unfinished (the bytes so far are not an event yet)
   */
  onChunk(partial: boolean): void;
  /** a line, parsed; an Error returned cancels the connection and is thrown */
  onLine(line: T): LineVerdict;
}

function parseLine<T>(line: string): T | Error {
  try {
    return JSON.parse(line) as T;
  } catch {
    return new Error(`X stream sent a line that is not JSON (${line.length} characters): the connection is dropped`);
  }
}

/** Reads the stream's lines until it ends, or until a line ends it. */
export async function readStreamLines<T>(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  handlers: StreamLineHandlers<T>,
): Promise<void> {
  const decoder = new TextDecoder();
  let buffer = '';
  const end = async (err: Error): Promise<never> => {
    await reader.cancel().catch(() => undefined);
    throw err;
  };
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let at: number;
    while ((at = buffer.indexOf('\r\n')) >= 0) {
      const line = buffer.slice(0, at).trim();
      buffer = buffer.slice(at + 2);
      if (line === '') continue; // keep-alive
      if (line.length > MAX_STREAM_LINE) return end(tooLong());
      const parsed = parseLine<T>(line);
      const ended = parsed instanceof Error ? parsed : handlers.onLine(parsed);
      if (ended) return end(ended);
    }
    if (buffer.length > MAX_STREAM_LINE) return end(tooLong());
    handlers.onChunk(buffer.length > 0);
  }
}

const tooLong = () =>
  new Error(`X stream sent a line longer than ${MAX_STREAM_LINE} characters: the connection is dropped`);
