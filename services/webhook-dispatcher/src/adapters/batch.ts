/**
 * Micro-batching: calls made in the same turn of the event loop (up to `maxBatch`) go to the
 * database as one query. At a thousand deliveries a second this turns two round trips per
 * delivery into a few per batch; each caller still gets its own result (or error).
 */
export type BatchFn<I, O> = (items: I[]) => Promise<O[]>;

export function createBatcher<I, O>(run: BatchFn<I, O>, maxBatch = 200): (item: I) => Promise<O> {
  let pending: { item: I; resolve: (o: O) => void; reject: (e: unknown) => void }[] = [];
  let scheduled = false;

  const flush = () => {
    scheduled = false;
    const batch = pending;
    pending = [];
    for (let i = 0; i < batch.length; i += maxBatch) {
      const slice = batch.slice(i, i + maxBatch);
      run(slice.map((p) => p.item)).then(
        (out) => slice.forEach((p, j) => p.resolve(out[j] as O)),
        (err: unknown) => slice.forEach((p) => p.reject(err)),
      );
    }
  };

  return (item) =>
    new Promise<O>((resolve, reject) => {
      pending.push({ item, resolve, reject });
      if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
    });
}
