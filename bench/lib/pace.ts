/** The realtime benches' steady posting: the i-th call at start + i / rate seconds, so a slow call delays no later one's slot. */
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Calls `each(i)` for i = 0 … round(rate × seconds) − 1, `rate` a second, on schedule (no drift). */
export async function paced(rate: number, seconds: number, each: (i: number, total: number) => void): Promise<void> {
  const total = Math.round(rate * seconds);
  const start = Date.now();
  for (let i = 0; i < total; i++) {
    const wait = start + (i * 1000) / rate - Date.now();
    if (wait > 0) await sleep(wait);
    each(i, total);
  }
}
