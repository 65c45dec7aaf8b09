import type { WriteLane } from './port';

/**
 * At most `size` tasks at a time (the others wait their turn, first come first served): the
 * recording's transactions stay within the database pool instead of timing out waiting for it.
 */
export class Limiter implements WriteLane {
  private running = 0;
  private readonly queue: (() => void)[] = [];

  constructor(private readonly size: number) {}

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.running >= this.size) await new Promise<void>((r) => this.queue.push(r));
    else this.running++;
    try {
      return await task();
    } finally {
      const next = this.queue.shift();
      if (next) next();
      else this.running--;
    }
  }
}
