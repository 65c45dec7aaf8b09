/** The numbers the bench mains share: their settings from the environment, the percentiles they report, and their progress lines. */

/** A positive number from the environment (`whole`: a positive whole number), else `fallback`. */
export function positiveEnv(name: string, fallback: number, opts: { whole?: boolean } = {}): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (opts.whole) {
    if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a positive whole number`);
  } else if (!Number.isFinite(n) || n <= 0) {
    throw new Error(`${name} must be a positive number`);
  }
  return n;
}

/** The p-th percentile of an ascending list (nearest rank); NaN for an empty list. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}

/** The p-th percentile of a list in any order (nearest rank); NaN for an empty list. */
export const percentileOf = (xs: readonly number[], p: number): number =>
  percentile(
    [...xs].sort((a, b) => a - b),
    p,
  );

export const median = (xs: readonly number[]): number => percentileOf(xs, 50);

/** A progress line on stdout behind the time of day (UTC). */
export function clockLog(message: string): void {
  console.log(`[${new Date().toISOString().slice(11, 19)}] ${message}`);
}
