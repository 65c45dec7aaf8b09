/**
 * Micro-batching: calls go to the database as one query per batch, at most `maxConcurrent`
 * queries at a time; calls made while those run wait and go together in the next batch. At a
 * thousand deliveries a second this turns one round trip per delivery into a few per batch (the
 * busier the database, the larger the batches), and when the dispatcher is idle a lone call still
 * goes out at once (the next turn of the event loop). Each caller gets its own result (or error),
 * and only once the query that carried its item has finished.
 *
 * Measured (bench:pipeline, see README "Throughput"): flushing every event-loop turn with no bound
 * gave batches of a few rows under load, and a query's fixed cost dominated.
 */
export type BatchFn<I, O> = (items: I[]) => Promise<O[]>;

export interface BatcherOptions {
  /** most items in one query */
  maxBatch?: number;
  /** most queries of this batcher running at once */
  maxConcurrent?: number;
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
  let running = 0;
  let scheduled = false;

  const schedule = () => {
    if (scheduled || pending.length === 0 || running >= maxConcurrent) return;
    scheduled = true;
    // the next turn: every call made in this one (and the I/O callbacks before it) joins the batch
    setImmediate(flush);
  };

  const flush = () => {
    scheduled = false;
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
