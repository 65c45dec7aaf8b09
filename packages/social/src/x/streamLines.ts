/**
 * The reading side of X's streaming connections (the filtered stream, the activity stream): JSON
 * objects, one a line, each line ended by \r\n; an empty line is a keep-alive.
 */

/** What a line makes of the stream: nothing (read on), or the error that ends it (X's disconnect notice). */
type LineVerdict = Error | undefined;

export interface StreamLineHandlers<T> {
  /** every chunk that arrives, a keep-alive too (the stream is alive) */
  onChunk(): void;
  /** a line, parsed; an Error returned cancels the connection and is thrown */
  onLine(line: T): LineVerdict;
}

/** Reads the stream's lines until it ends, or until a line ends it. */
export async function readStreamLines<T>(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  handlers: StreamLineHandlers<T>,
): Promise<void> {
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    handlers.onChunk();
    buffer += decoder.decode(value, { stream: true });
    let at: number;
    while ((at = buffer.indexOf('\r\n')) >= 0) {
      const line = buffer.slice(0, at).trim();
      buffer = buffer.slice(at + 2);
      if (line === '') continue; // keep-alive
      const ended = handlers.onLine(JSON.parse(line) as T);
      if (ended) {
        await reader.cancel().catch(() => undefined);
        throw ended;
      }
    }
  }
}
