/**
 * One system call for the writes of a tick: the stream is corked at the first write of a tick and
 * uncorked when the tick ends (the next `process.nextTick`), so node hands everything written in
 * between to the socket as one `writev`, in order. Nothing waits for a later turn, and backpressure
 * is unchanged: a corked write still returns false past the high-water mark, and 'drain' follows the
 * uncork.
 */
import type { Writable } from 'node:stream';

export class TickCork {
  private corked = false;
  private readonly release = (): void => {
    this.corked = false;
    this.stream.uncork();
  };

  constructor(private readonly stream: Writable) {}

  /** call before a write: corks the stream unless this tick already did (or the stream is destroyed) */
  cork(): void {
    if (this.corked || this.stream.destroyed) return;
    this.corked = true;
    this.stream.cork();
    process.nextTick(this.release);
  }
}
