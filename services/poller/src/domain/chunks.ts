/**
 * How a batch's hits are cut into chunks (each chunk one statement: its hits and their events).
 * A monitor's hits stay together in one chunk, in their order, so chunks may be written at the
 * same time without reordering any monitor's events; a monitor with more hits than a chunk holds
 * (more matching posts in one batch than `size`) is cut in order, and `ordered` says so: then the
 * chunks must be written one after another.
 */
export interface Chunks<T> {
  chunks: T[][];
  /** true when a monitor's hits were cut across chunks (write them in order) */
  ordered: boolean;
}

function byMonitor<T extends { monitorId: string }>(hits: readonly T[]): T[][] {
  const groups = new Map<string, T[]>();
  for (const h of hits) {
    const g = groups.get(h.monitorId);
    if (g) g.push(h);
    else groups.set(h.monitorId, [h]);
  }
  return [...groups.values()];
}

export function hitChunks<T extends { monitorId: string }>(hits: readonly T[], size: number): Chunks<T> {
  const chunks: T[][] = [];
  let ordered = false;
  let current: T[] = [];
  for (const group of byMonitor(hits)) {
    if (current.length + group.length > size && current.length > 0) {
      chunks.push(current);
      current = [];
    }
    if (group.length > size) ordered = true;
    for (let at = 0; at < group.length; at += size) {
      const part = group.slice(at, at + size);
      if (current.length + part.length > size) {
        chunks.push(current);
        current = [];
      }
      current.push(...part);
    }
  }
  if (current.length > 0) chunks.push(current);
  return { chunks, ordered };
}

/**
 * Runs `work` on every item, at most `lanes` at once, items started in order; after a failure no
 * further item starts, and the first error is thrown once the running ones have settled. The
 * results come in the items' order.
 */
export async function inLanes<T, R>(items: readonly T[], lanes: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array<R>(items.length);
  let next = 0;
  let failure: { err: unknown } | undefined;
  async function lane(): Promise<void> {
    while (failure === undefined && next < items.length) {
      const i = next++;
      try {
        results[i] = await work(items[i]!);
      } catch (err) {
        failure ??= { err };
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(lanes, items.length) }, lane));
  if (failure) throw failure.err;
  return results;
}
