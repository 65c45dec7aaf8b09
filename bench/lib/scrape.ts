/** A service's Prometheus metrics read from its ops port, and the arithmetic the benches do on two readings. */

/** one reading: series (`name{labels}` as exposed, default labels included) → value */
export type Scrape = Map<string, number>;

export async function scrapeMetrics(opsPort: number): Promise<Scrape> {
  const text = await (await fetch(`http://127.0.0.1:${opsPort}/metrics`)).text();
  const out: Scrape = new Map();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const cut = line.lastIndexOf(' ');
    const value = Number(line.slice(cut + 1));
    if (Number.isFinite(value) || line.endsWith('+Inf')) out.set(line.slice(0, cut), value);
  }
  return out;
}

/** the series of `name` whose labels include every `label="value"` in `match` */
function series(s: Scrape, name: string, match: readonly string[]): [string, number][] {
  return [...s].filter(([k]) => (k === name || k.startsWith(`${name}{`)) && match.every((m) => k.includes(m)));
}

/** the sum of the matching series in one reading */
export function total(s: Scrape, name: string, match: readonly string[] = []): number {
  return series(s, name, match).reduce((a, [, v]) => a + v, 0);
}

/** the sum of the matching series in `end` less `start` (the whole of `end` when the process restarted between them) */
export function delta(start: Scrape, end: Scrape, name: string, match: readonly string[] = []): number {
  const e = total(end, name, match);
  const b = total(start, name, match);
  return e >= b ? e - b : e;
}

/** a histogram's mean between two readings (seconds), NaN when nothing was observed */
export function histogramMean(start: Scrape, end: Scrape, name: string, match: readonly string[] = []): number {
  const n = delta(start, end, `${name}_count`, match);
  return n > 0 ? delta(start, end, `${name}_sum`, match) / n : NaN;
}

/** the upper bound of the bucket holding a histogram's p-th percentile between two readings (seconds) */
export function histogramPercentile(
  start: Scrape,
  end: Scrape,
  name: string,
  p: number,
  match: readonly string[] = [],
): number {
  const n = delta(start, end, `${name}_count`, match);
  if (n === 0) return NaN;
  const bounds = new Set<number>();
  for (const [k] of series(end, `${name}_bucket`, match)) {
    const le = /le="([^"]+)"/.exec(k)?.[1];
    if (le !== undefined) bounds.add(le === '+Inf' ? Infinity : Number(le));
  }
  for (const le of [...bounds].sort((a, b) => a - b)) {
    const label = `le="${le === Infinity ? '+Inf' : String(le)}"`;
    if (delta(start, end, `${name}_bucket`, [...match, label]) >= (p / 100) * n) return le;
  }
  return Infinity;
}
