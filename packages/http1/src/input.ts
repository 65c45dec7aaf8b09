/**
 * A connection's unparsed input. Input arriving in many small reads is appended into a buffer of
 * ours whose capacity doubles, never re-copied whole on every read; bodies handed out may be views
 * of an earlier store, which is therefore never written again.
 */
export class InputBuffer {
  /** unparsed input; a view of `store` when `store` is set (then it ends at `store[fill]`) */
  buf: Buffer | null = null;
  private store: Buffer | null = null;
  private fill = 0;
  /** how far the current incomplete head has been checked for bare CR/LF */
  scanned = 0;

  get length(): number {
    return this.buf === null ? 0 : this.buf.length;
  }

  append(chunk: Buffer): void {
    const buf = this.buf;
    if (buf === null || buf.length === 0) {
      this.buf = chunk;
      this.store = null;
      this.scanned = 0;
      return;
    }
    const need = buf.length + chunk.length;
    const store = this.store;
    if (store !== null && this.fill + chunk.length <= store.length) {
      chunk.copy(store, this.fill);
      this.fill += chunk.length;
      this.buf = store.subarray(this.fill - need, this.fill);
      return;
    }
    const next = Buffer.allocUnsafe(Math.max(4096, 2 * need));
    buf.copy(next, 0);
    chunk.copy(next, buf.length);
    this.store = next;
    this.fill = need;
    this.buf = next.subarray(0, need);
  }

  /** drops `n` bytes from the front */
  consume(n: number): void {
    this.buf = this.buf!.subarray(n);
    this.scanned = 0;
  }

  clear(): void {
    this.buf = this.store = null;
  }
}
