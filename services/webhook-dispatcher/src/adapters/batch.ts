/**
 * Micro-batching: calls go to the database as one query per batch, at most `maxConcurrent`
 * queries at a time; calls made while those run wait and go together in the next batch. At a
 * thousand deliveries a second this turns one round trip per delivery into a few per batch (the
 * busier the database, the larger the batches), and when the dispatcher is idle a lone call still
 * goes out at once (the next turn of the event loop), or, with `lingerMs`, once more calls joined
 * it or the linger ended. Each caller gets its own result (or error), and only once the query that
 * carried its item has finished.
 *
 * Measured (bench:pipeline, see README "Benchmark"): flushing every event-loop turn with no bound
 * gave batches of a few rows under load, and a query's fixed cost dominated.
 */
export type BatchFn<I, O> = (items: I[]) => Promise<O[]>;

export interface BatcherOptions {
  /** most items in one query */
  maxBatch?: number;
  /** most queries of this batcher running at once */
  maxConcurrent?: number;
  /**
   * How long a batch smaller than `fillTo` may wait for more items before it goes (ms; 0: the next
   * turn). For callers that can wait: each query's answer wakes the process once, so fewer, fuller
   * queries cost less when calls come one by one.
   */
  lingerMs?: number;
  /** a batch of this many items goes at the next turn, lingering or not */
  fillTo?: number;
}

interface Pending<I, O> {
  item: I;
  resolve: (o: O) => void;
  reject: (e: unknown) => void;
}

export function createBatcher<I, O>(run: BatchFn<I, O>, options: BatcherOptions = {}): (item: I) => Promise<O> {
  const maxBatch = options.maxBatch ?? 200;
  const maxConcurrent = options.maxConcurrent ?? 2;
  let pending: Pending<I, O>[] = [];
  const lingerMs = options.lingerMs ?? 0;
  const fillTo = Math.min(options.fillTo ?? maxBatch, maxBatch);
  let running = 0;
  let scheduled = false;
  let lingering: NodeJS.Timeout | null = null;

  const schedule = () => {
    if (scheduled || pending.length === 0 || running >= maxConcurrent) return;
    if (lingerMs > 0 && pending.length < fillTo) {
      lingering ??= setTimeout(flush, lingerMs);
      return;
    }
    scheduled = true;
    // the next turn: every call made in this one (and the I/O callbacks before it) joins the batch
    setImmediate(flush);
  };

  const flush = () => {
    scheduled = false;
    if (lingering) clearTimeout(lingering);
    lingering = null;
    while (running < maxConcurrent && pending.length > 0) {
      const slice = pending.slice(0, maxBatch);
      pending = pending.slice(slice.length);
      running++;
      let result: Promise<O[]>;
      try {
        result = run(slice.map((p) => p.item));
      } catch (err) {
        result = Promise.reject(err instanceof Error ? err : new Error(String(err)));
      }
      result
        .then(
          (out) => slice.forEach((p, j) => p.resolve(out[j] as O)),
          (err: unknown) => slice.forEach((p) => p.reject(err)),
        )
        .finally(() => {
          running--;
          schedule();
        });
    }
  };

  return (item) =>
    new Promise<O>((resolve, reject) => {
      pending.push({ item, resolve, reject });
      schedule();
    });
}
